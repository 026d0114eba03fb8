"""What the state machine brings back into a stage's envelope, absorbed before the stage runs: the failure
the failure path carries, what a Parallel group's branches or a Map's items returned, and the answer a
mission resumes with."""

from __future__ import annotations

import json
from typing import Any

from missions.core.errors import RepairsExhausted
from missions.core.mission.envelope import (
    Citation,
    Counters,
    Envelope,
    Interrupt,
    InterruptKind,
    InterruptResponse,
    StageRecord,
    WaitingBranches,
)
from missions.core.mission.events import EventType
from missions.core.mission.offload import EnvelopeCodec
from missions.core.pipeline.config import PipelineConfig
from missions.core.redaction import redact
from missions.service.runner._base import Emit


def absorb_failure(envelope: Envelope) -> dict[str, Any] | None:
    """The failure the state machine caught (its Catch's `failure`), recorded on the mission as an error."""
    failure = envelope.failure
    if not failure:
        return None
    envelope.failure = None
    at = failure.get("at") or {}
    record = {
        "reason": at.get("reason", "stage_failed"),
        "state": at.get("state"),
        "error": redact(str(failure.get("Error", "Unknown"))),
        "cause": cause_of(failure.get("Cause")),
    }
    attempts = RepairsExhausted.attempts_in(record["cause"]) if record["error"] == RepairsExhausted.__name__ else []
    if attempts:  # why no repair followed, then the model's every invalid answer, each its own error
        envelope.record_error(record["state"] or "?", record["error"], record["cause"].splitlines()[0])
    else:
        envelope.record_error(record["state"] or "?", record["error"], record["cause"] or record["reason"])
    for number, (kind, why) in enumerate(attempts, 1):
        envelope.record_error(record["state"] or "?", kind, f"attempt {number}: {why}")
    return record


def absorb_branches(
    envelope: Envelope,
    emit: Emit,
    fan_out: bool,
    records: list[StageRecord],
    codec: EnvelopeCodec,
    pipeline: PipelineConfig,
) -> tuple[list[Any] | None, WaitingBranches | None]:
    """Fold what a Parallel group's branches or a Map's items returned; for a fan-out, the items'
    outputs (in order) are this stage's to join. Each branch's record goes into `records` (the
    joining stage's checkpoint keeps them). When branches asked their user, what they spent is folded
    now and the rest waits for every answer (the WaitingBranches returned)."""
    results = envelope.branch_results
    if results is None:
        return None, None
    envelope.branch_results = None
    deltas = [codec.unpack(r) for r in results]
    for delta in deltas:
        envelope.counters.add(Counters.model_validate(delta["counters"]))
        envelope.add_citations([Citation.model_validate(c) for c in delta.get("citations", [])])
        for error in delta.get("errors", []):
            envelope.record_error(delta["stage"], error["kind"], error["message"])
        for event in delta.get("events", []):
            emit(EventType(event["type"]), _stage=delta["stage"], **event["payload"])
        if delta.get("history"):
            records.append(StageRecord.model_validate(delta["history"]))
    mode = "item" if fan_out else "branch"
    asked = [delta for delta in deltas if delta.get("asked")]
    if asked:  # the items stay: the Map runs them again once every question is answered
        questions = [Interrupt.model_validate(delta["asked"]) for delta in asked]
        group = questions[0].group
        assert group is not None  # a branch's question names its group
        return None, WaitingBranches(
            group=group,
            questions=questions,
            asked={delta["key"]: question.id for delta, question in zip(asked, questions, strict=True)},
            replays={delta["key"]: delta["replay"] for delta in asked if delta.get("replay")},
            done={
                branch_key(delta["stage"], mode, delta.get("index")): _settled(delta)
                for delta in deltas
                if not delta.get("asked")
            },
        )
    if fan_out:  # the items belong to this stage
        envelope.work_items = None
        return [d["output"] for d in sorted(deltas, key=lambda d: d.get("index", 0))], None
    for delta in deltas:  # parallel group: each branch is a stage of its own
        envelope.outputs[pipeline.agent(delta["stage"]).key] = delta["output"]
    return None, None


def branch_key(stage: str, mode: str, index: Any) -> str:
    """A branch of a parallel group by its stage; an item of a fan-out by its stage and position."""
    return stage if mode == "branch" else f"{stage}#{int(index or 0)}"


def _settled(delta: dict[str, Any]) -> dict[str, Any]:
    """A finished branch's result as it is returned again after the others' answers: its output, with
    what it spent and said already folded (so nothing is counted twice)."""
    return {
        "stage": delta["stage"],
        "index": delta.get("index", 0),
        "output": delta["output"],
        "counters": {name: 0 for name in delta["counters"]},
        "history": None,
    }


def absorb_resume(envelope: Envelope) -> tuple[InterruptResponse | None, bool]:
    """The answer the mission resumes with, and whether it answered a tool call's approval (which
    the tool executor reads from the approvals, not a question of the stage)."""
    resume, interrupt = envelope.resume, envelope.interrupt
    envelope.resume = None
    if resume is None:
        return None, False
    if interrupt is None or resume.interrupt_id != interrupt.id:
        envelope.record_error(
            envelope.current_stage or "?", "resume", f"answer for unknown interrupt {resume.interrupt_id}"
        )
        return None, False
    envelope.interrupt = None
    if resume.answers is not None:  # a group's questions: its branches took their answers; keep them all
        _absorb_answers(envelope, resume.answers, interrupt)
        return None, False
    response = resume.response
    if interrupt.kind is InterruptKind.CONFIRMATION and "call_id" in interrupt.data:
        envelope.approvals[interrupt.data["call_id"]] = bool(response.approved)
    if interrupt.kind is InterruptKind.DELEGATION:  # what the sub-mission spent is this mission's spend too
        envelope.counters.cost_usd = round(
            envelope.counters.cost_usd + float((response.data or {}).get("cost_usd") or 0), 8
        )
    envelope.answers.append(
        {
            "interrupt_id": interrupt.id,
            "kind": interrupt.kind.value,
            "stage": interrupt.stage,
            "question": interrupt.question,
            "response": response.model_dump(exclude_none=True),
        }
    )
    return response, interrupt.kind is InterruptKind.CONFIRMATION and "call_id" in interrupt.data


def _absorb_answers(envelope: Envelope, answers: dict[str, InterruptResponse], first: Interrupt) -> None:
    """Every answer a group's branches resumed with, in the order they were asked, kept with the mission's."""
    waiting, envelope.waiting_branches = envelope.waiting_branches, None
    for question in waiting.questions if waiting is not None else [first]:
        response = answers.get(question.id)
        if response is None:
            envelope.record_error(question.stage, "resume", f"no answer for interrupt {question.id}")
            continue
        if question.kind is InterruptKind.CONFIRMATION and "call_id" in question.data:
            envelope.approvals[question.data["call_id"]] = bool(response.approved)
        envelope.answers.append(
            {
                "interrupt_id": question.id,
                "kind": question.kind.value,
                "stage": question.stage,
                "question": question.question,
                "response": response.model_dump(exclude_none=True),
            }
        )


def cause_of(cause: Any) -> str:
    """Step Functions hands a Lambda's error as a JSON string; keep its message, without credentials
    (it becomes the mission's error, a FLOW_ERROR event and the failed mission's result)."""
    if not isinstance(cause, str):
        return redact(str(cause or ""))
    try:
        parsed = json.loads(cause)
        if isinstance(parsed, dict):
            return redact(str(parsed.get("errorMessage") or cause))[:2000]
    except ValueError:
        pass
    return redact(cause)[:2000]
