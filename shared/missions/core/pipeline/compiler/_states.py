"""State builders both levels share: hop counts, retries, awaits on a task token, guards, reachability."""

from __future__ import annotations

from typing import Any

from missions.core.errors import NON_RETRYABLE_ERRORS
from missions.core.mission.envelope import InterruptKind
from missions.core.pipeline.compiler._layout import (
    AWAIT_BRANCHES,
    AWAIT_PAUSE,
    COUNTER_GUARDS,
    FINALIZE,
    INTERRUPT_FUNCTION,
    TRANSIENT_LAMBDA_ERRORS,
    UNROUTABLE,
)
from missions.core.pipeline.config import AgentConfig, PipelineConfig


def _asl(hops: str, **extra: Any) -> dict[str, Any]:
    """The `asl` block a Pass writes: the hop count, its bound, and what the level needs carried."""
    return {"hops.$": hops, "max_hops.$": "$.asl.max_hops", **extra}


def _entry(p: PipelineConfig, stage: str) -> str:
    """The state a transition to `stage` (or to a parallel group) enters."""
    group = p.group_of(stage)
    if group:
        return "parallel." + "+".join(group)
    if p.agent(stage).fan_out:
        return f"{stage}.map"
    return stage


def _mission_failed() -> dict[str, Any]:
    return {"Type": "Fail", "Error": "MissionFailed", "Cause": "the final stage failed on the failure path"}


def _machine_timeout(pipeline: PipelineConfig) -> int:
    """The last-resort guard: every stage at its timeout with retries, plus waiting humans."""
    b = pipeline.bounds
    per_stage = max(a.timeout_seconds * (a.max_retries + 1) + 60 for a in pipeline.agents)
    waits = pipeline.interrupt_timeout_seconds * min(b.max_agent_hops, 10)
    return min(per_stage * (b.max_agent_hops + 2) + waits, 365 * 24 * 3600)


def _retry(pipeline: PipelineConfig, agent: AgentConfig) -> list[dict[str, Any]]:
    interval = pipeline.retry_interval_seconds
    retry = [
        {"ErrorEquals": TRANSIENT_LAMBDA_ERRORS, "IntervalSeconds": interval, "MaxAttempts": 3, "BackoffRate": 2.0},
        {"ErrorEquals": NON_RETRYABLE_ERRORS, "MaxAttempts": 0},
    ]
    if agent.max_retries:
        retry.append(
            {
                "ErrorEquals": ["States.TaskFailed", "States.Timeout"],
                "IntervalSeconds": interval,
                "MaxAttempts": agent.max_retries,
                "BackoffRate": 2.0,
            }
        )
    return retry


def _failed_pass(states: dict[str, Any], state: str, reason: str, next_state: str = FINALIZE) -> None:
    states[f"{state}.failed"] = {
        "Type": "Pass",
        "Result": {"state": state, "reason": reason},
        "ResultPath": "$.envelope.failure.at",
        "Next": next_state,
    }


def _wait_for_token(
    states: dict[str, Any], p: PipelineConfig, name: str, *, mode: str, result_path: str, reason: str
) -> None:
    """A task that waits for a task token the interrupt function keeps (`mode`), as long as a question may
    wait; what the token is handed back with goes to `result_path`, then `<name>.resume`. A wait that
    times out, or fails, ends the mission through its final stage (`<reason>_timeout`, `<reason>_failed`;
    a pause's timeout is `pause_expired`)."""
    states[name] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {
            "FunctionName": INTERRUPT_FUNCTION,
            "Payload": {"mode": mode, "envelope.$": "$.envelope", "task_token.$": "$$.Task.Token"},
        },
        "TimeoutSeconds": p.interrupt_timeout_seconds,
        "ResultPath": result_path,
        "Retry": [
            {
                "ErrorEquals": TRANSIENT_LAMBDA_ERRORS,
                "IntervalSeconds": p.retry_interval_seconds,
                "MaxAttempts": 3,
                "BackoffRate": 2.0,
            }
        ],
        "Catch": [
            {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.envelope.failure", "Next": f"{name}.timeout"},
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.envelope.failure", "Next": f"{name}.failed"},
        ],
        "Next": f"{name}.resume",
    }
    states[f"{name}.timeout"] = {
        "Type": "Pass",
        "Result": {"state": name, "reason": "pause_expired" if reason == "pause" else f"{reason}_timeout"},
        "ResultPath": "$.envelope.failure.at",
        "Next": FINALIZE,
    }
    _failed_pass(states, name, f"{reason}_failed")


def _await(states: dict[str, Any], p: PipelineConfig, kind: InterruptKind, *, next_state: str | None = None) -> None:
    """A question to a human: the execution waits for its task token (for days, at no compute cost).

    `next_state` set (two levels): the answer names where the next segment starts (the segment's
    first state routes on `next_stage`); otherwise the answer enters the resume stage directly."""
    name = f"await.{kind.value}"
    _wait_for_token(states, p, name, mode="interrupt", result_path="$.envelope.resume", reason="interrupt")
    configured = p.resume_stage(kind)
    if next_state is not None:
        states[f"{name}.resume"] = {"Type": "Pass", "ResultPath": "$.envelope.next_stage", "Next": next_state}
        if configured:
            states[f"{name}.resume"]["Result"] = configured
        else:  # resume where the human was asked
            states[f"{name}.resume"]["InputPath"] = "$.envelope.interrupt.stage"
        return
    if configured:
        states[f"{name}.resume"] = {"Type": "Pass", "Next": _entry(p, configured)}
        return
    # resume where the human was asked
    states[f"{name}.resume"] = {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.envelope.interrupt.stage", "StringEquals": stage, "Next": _entry(p, stage)}
            for stage in p.stage_names()
            if not p.group_of(stage)
        ],
        "Default": UNROUTABLE,
    }


def _await_branches(states: dict[str, Any], p: PipelineConfig, *, next_state: str | None = None) -> None:
    """Branches of a group (or items of a fan-out) asked their user, each its own question: the execution
    waits, as for one question, until every one is answered; then the group runs again (its finished
    branches return what they returned, the others resume with their answers). `next_state` set (two
    levels): the next segment starts at the group; otherwise the answers enter it directly."""
    _wait_for_token(states, p, AWAIT_BRANCHES, mode="interrupt", result_path="$.envelope.resume", reason="interrupt")
    if next_state is not None:
        states[f"{AWAIT_BRANCHES}.resume"] = {
            "Type": "Pass",
            "InputPath": "$.envelope.interrupt.group",
            "ResultPath": "$.envelope.next_stage",
            "Next": next_state,
        }
        return
    states[f"{AWAIT_BRANCHES}.resume"] = {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.envelope.interrupt.group", "StringEquals": group, "Next": _entry(p, group)}
            for group in p.group_names() + [a.name for a in p.agents if a.fan_out]
        ],
        "Default": UNROUTABLE,
    }


# the last stage found its user paused the mission
_PAUSED = (
    {"Variable": "$.envelope.pause", "IsPresent": True},
    {"Variable": "$.envelope.pause", "BooleanEquals": True},
)
# the last stage found its mission ended meanwhile (cancelled): its segment starts no next one
_ENDED = (
    {"Variable": "$.envelope.mission_ended", "IsPresent": True},
    {"Variable": "$.envelope.mission_ended", "BooleanEquals": True},
)


def _await_pause(states: dict[str, Any], p: PipelineConfig, *, next_state: str) -> None:
    """The user paused the mission: wait for their resume on a task token (the interrupt function keeps
    it on the mission's record), at no compute cost, as long as a question may wait. The resume hands
    back the notes the user sent (into `notes`, which the next stage reads); then on where the routing
    had sent the mission."""
    _wait_for_token(states, p, AWAIT_PAUSE, mode="pause", result_path="$.envelope.notes", reason="pause")
    states[f"{AWAIT_PAUSE}.resume"] = {
        "Type": "Pass",
        "Result": False,
        "ResultPath": "$.envelope.pause",
        "Next": next_state,
    }


def _guards(states: dict[str, Any]) -> None:
    for bound in ["max_agent_hops"] + [b for b, _ in COUNTER_GUARDS]:
        states[f"guard.{bound}"] = {
            "Type": "Pass",
            "Result": {
                "Error": "BoundReached",
                "Cause": f"the state machine stopped the mission at {bound}",
                "at": {"state": f"guard.{bound}", "reason": bound},
            },
            "ResultPath": "$.envelope.failure",
            "Next": FINALIZE,
        }
    states[UNROUTABLE] = {
        "Type": "Pass",
        "Result": {
            "Error": "Unroutable",
            "Cause": "the stage chose a next stage it has no route to",
            "at": {"state": UNROUTABLE, "reason": "unroutable"},
        },
        "ResultPath": "$.envelope.failure",
        "Next": FINALIZE,
    }


def _reachable(states: dict[str, Any], start: str) -> dict[str, Any]:
    """Only the states a transition can reach (Step Functions rejects unreachable ones)."""
    seen, frontier = {start}, [start]
    while frontier:
        state = states[frontier.pop()]
        targets = [state.get("Next"), state.get("Default")]
        targets += [c.get("Next") for c in state.get("Choices", [])]
        targets += [c.get("Next") for c in state.get("Catch", [])]
        for target in targets:
            if target and target not in seen:
                seen.add(target)
                frontier.append(target)
    return {name: state for name, state in states.items() if name in seen}
