"""The compiled machines' fixed state names, and whether a pipeline runs on one level or two."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from missions.core.pipeline.config import PipelineConfig

# dotted: stage names cannot contain a dot, so these never collide with a stage
START = "mission.start"
FINALIZE = "mission.finalize"
DONE = "mission.done"
FAILED = "mission.failed"
UNROUTABLE = "guard.unroutable"
SEGMENT = "segment"
SEGMENT_BEGIN = "segment.begin"
SEGMENT_EXIT = "segment.exit"
SEGMENT_END = "segment.end"
SEGMENT_START = "segment.start"
SEGMENT_HEARTBEAT = "segment.heartbeat"
SEGMENT_CHAIN = "segment.chain"
SEGMENT_REPORT = "segment.report"
SEGMENT_HANDED = "segment.handed"
SEGMENT_FAIL = "segment.fail"
SEGMENT_PLACEHOLDER = "${segment}"
AWAIT_PAUSE = "await.pause"
# branches of a group (or items of a fan-out) asked: the joining stage routes here; the answers run the group again
AWAIT_BRANCHES = "await.branches"
BRANCHES_ROUTE = "await:branches"
PAUSE_ROUTE = "pause.route"
# Express runs 5 minutes at most; a segment hands back this long before, whatever a stage may take
EXPRESS_SECONDS = 300
SEGMENT_MARGIN_SECONDS = 30
# a segment heartbeats on its mission's task token as it hands on to the next, and runs EXPRESS_SECONDS at
# most: the mission's machine hears from its chain at least this often, or the segment running was lost
SEGMENT_HEARTBEAT_SECONDS = EXPRESS_SECONDS + SEGMENT_MARGIN_SECONDS
MIN_SEGMENT_SECONDS = 60  # below this a segment would run a stage or two: one Standard machine instead
MAX_SEGMENT_RESTARTS = 2
# what a call to Step Functions fails with when it may work if made again (the optimized startExecution
# integration's names, then the aws-sdk integration's)
SFN_TRANSIENT_ERRORS = [
    "StepFunctions.ExecutionLimitExceededException",
    "StepFunctions.SdkClientException",
    "StepFunctions.AWSStepFunctionsException",
]
SFN_SDK_TRANSIENT_ERRORS = ["Sfn.ThrottlingException", "Sfn.SdkClientException", "Sfn.SfnException"]
TRANSIENT_LAMBDA_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]
# guards on counters the stages report; hops are counted by the state machine itself
COUNTER_GUARDS = (
    ("max_llm_calls", "llm_calls"),
    ("max_tool_calls", "tool_calls"),
    ("max_iterations", "iterations"),
    ("max_cost_usd", "cost_usd"),
)


def function_placeholder(stage: str) -> str:
    return f"${{fn_{stage}}}"


INTERRUPT_FUNCTION = "${fn_interrupt}"


def segment_seconds(pipeline: PipelineConfig) -> int:
    """How long a segment runs stages before it hands back: a stage that starts before this ends
    (at its timeout) before Express's limit, with a margin for the state machine's own work."""
    longest = max(agent.timeout_seconds for agent in pipeline.agents)
    return EXPRESS_SECONDS - SEGMENT_MARGIN_SECONDS - longest


def segment_spent(request: dict[str, Any], now: datetime) -> bool:
    """Whether the segment a stage ran in has used its time (the stage's request carries when the
    segment started and its budget). An unreadable start counts as spent: handing back early costs
    a few transitions, running past Express's limit costs a restart."""
    try:
        started = datetime.fromisoformat(str(request["segment_started"]).replace("Z", "+00:00"))
        budget = float(request["segment_seconds"])
    except (KeyError, TypeError, ValueError):
        return True
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return (now - started).total_seconds() >= budget


def two_level(pipeline: PipelineConfig) -> bool:
    return segment_seconds(pipeline) >= MIN_SEGMENT_SECONDS
