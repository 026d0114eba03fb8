"""The mission's Standard machine over Express segments (see the package docstring)."""

from __future__ import annotations

from typing import Any

from missions.core.pipeline.compiler._layout import (
    AWAIT_BRANCHES,
    AWAIT_PAUSE,
    BRANCHES_ROUTE,
    DONE,
    FAILED,
    FINALIZE,
    MAX_SEGMENT_RESTARTS,
    SEGMENT,
    SEGMENT_BEGIN,
    SEGMENT_EXIT,
    SEGMENT_HEARTBEAT_SECONDS,
    SEGMENT_PLACEHOLDER,
    SFN_TRANSIENT_ERRORS,
    UNROUTABLE,
    function_placeholder,
)
from missions.core.pipeline.compiler._states import (
    _PAUSED,
    _asl,
    _await,
    _await_branches,
    _await_pause,
    _guards,
    _machine_timeout,
    _mission_failed,
    _reachable,
    _retry,
)
from missions.core.pipeline.config import PipelineConfig


class _MissionCompiler:
    """The mission's Standard machine over Express segments (see the module's docstring)."""

    def __init__(self, pipeline: PipelineConfig):
        self.p = pipeline
        self.states: dict[str, Any] = {}

    def build(self) -> dict[str, Any]:
        self._segment()
        for kind in self.p.awaited():
            _await(self.states, self.p, kind, next_state=SEGMENT_BEGIN)
        if self.p.asks_in_branches():
            _await_branches(self.states, self.p, next_state=SEGMENT_BEGIN)
        _await_pause(self.states, self.p, next_state=SEGMENT_BEGIN)
        _guards(self.states)
        final = self.p.agent(self.p.final)
        self.states[FINALIZE] = {
            "Type": "Task",
            "Resource": function_placeholder(final.name),
            "Parameters": {"stage": final.name, "mode": "finalize", "hop.$": "$.asl.hops", "envelope.$": "$.envelope"},
            "ResultPath": "$.envelope",
            "TimeoutSeconds": final.timeout_seconds,
            "Retry": _retry(self.p, final),
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.envelope.failure", "Next": FAILED}],
            "Next": DONE,
        }
        self.states[DONE] = {"Type": "Succeed"}
        self.states[FAILED] = _mission_failed()
        return {
            "Comment": f"Mission '{self.p.name}': waits for people, runs its stages in Express segments "
            "(compiled by missions)",
            # the execution's input carries a fresh restart count (initial_state): the first segment starts
            # at once, a Standard transition fewer per mission
            "StartAt": SEGMENT,
            "TimeoutSeconds": _machine_timeout(self.p),
            "States": _reachable(self.states, SEGMENT),
        }

    def _segment(self) -> None:
        # after a wait for a person: a fresh restart count (the segment computes its own end)
        self.states[SEGMENT_BEGIN] = {
            "Type": "Pass",
            "Parameters": _asl("$.asl.hops", restarts=0),
            "ResultPath": "$.asl",
            "Next": SEGMENT,
        }
        # the segments chain themselves (each starts the next) and the last reports on this task's token, so a
        # mission pays the Standard transitions of one segment whatever its length; a chain that goes quiet
        # for longer than a segment can run lost its segment, and fails the task
        self.states[SEGMENT] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::states:startExecution.waitForTaskToken",
            "HeartbeatSeconds": SEGMENT_HEARTBEAT_SECONDS,
            # the chain runs as long as the mission does (a Task's timeout would otherwise default to 60 s)
            "TimeoutSeconds": _machine_timeout(self.p),
            "Parameters": {
                "StateMachineArn": SEGMENT_PLACEHOLDER,
                # unique per segment and per restart (a name and input seen before would return the old run)
                "Name.$": "States.Format('{}-{}-{}', $$.Execution.Name, $.asl.hops, $.asl.restarts)",
                "Input": {
                    "envelope.$": "$.envelope",
                    "asl.$": "$.asl",
                    "token.$": "$$.Task.Token",
                    # names the chain: its segments' names are unique even when the chain is started again
                    "chain.$": "States.Format('{}-{}', $.asl.hops, $.asl.restarts)",
                    "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$": "$$.Execution.Id",
                },
            },
            "ResultSelector": {"envelope.$": "$.envelope", "asl.$": "$.asl"},
            "ResultPath": "$",
            "Retry": [
                {
                    "ErrorEquals": SFN_TRANSIENT_ERRORS,
                    "IntervalSeconds": self.p.retry_interval_seconds,
                    "MaxAttempts": 3,
                    "BackoffRate": 2.0,
                }
            ],
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.segment_failure", "Next": "segment.failed"}],
            "Next": SEGMENT_EXIT,
        }
        self.states[SEGMENT_EXIT] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.asl.exit", "StringEquals": "done", "Next": DONE},
                {
                    "And": [{"Variable": "$.asl.exit", "StringEquals": "continue"}, *_PAUSED],
                    "Next": AWAIT_PAUSE,
                },
                # the segment's continue exit reset its restart count: no Pass between two segments
                {"Variable": "$.asl.exit", "StringEquals": "continue", "Next": SEGMENT},
                *(
                    {
                        "And": [
                            {"Variable": "$.asl.exit", "StringEquals": "await"},
                            {"Variable": "$.envelope.next_stage", "StringEquals": f"await:{kind.value}"},
                        ],
                        "Next": f"await.{kind.value}",
                    }
                    for kind in self.p.awaited()
                ),
                *(
                    [
                        {
                            "And": [
                                {"Variable": "$.asl.exit", "StringEquals": "await"},
                                {"Variable": "$.envelope.next_stage", "StringEquals": BRANCHES_ROUTE},
                            ],
                            "Next": AWAIT_BRANCHES,
                        }
                    ]
                    if self.p.asks_in_branches()
                    else []
                ),
            ],
            "Default": UNROUTABLE,
        }
        self.states["segment.failed"] = {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.asl.restarts",
                    "NumericGreaterThanEquals": MAX_SEGMENT_RESTARTS,
                    "Next": "segment.lost",
                }
            ],
            "Default": "segment.retry",
        }
        self.states["segment.retry"] = {  # the same hop again: committed stages return what they returned
            "Type": "Pass",
            "Parameters": _asl("$.asl.hops", **{"restarts.$": "States.MathAdd($.asl.restarts, 1)"}),
            "ResultPath": "$.asl",
            "Next": SEGMENT,
        }
        self.states["segment.lost"] = {
            "Type": "Pass",
            "Parameters": {
                "Error": "SegmentFailed",
                "Cause.$": "$.segment_failure.Cause",
                "at": {"state": SEGMENT, "reason": "segment_failed"},
            },
            "ResultPath": "$.envelope.failure",
            "Next": FINALIZE,
        }
