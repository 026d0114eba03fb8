"""Answering a human-in-the-loop interrupt: validate, record once, resume the execution."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from missions.core.envelope import InterruptResponse, Resume
from missions.core.errors import AnswerRejected, ConflictError, NotFound, TaskGone
from missions.core.events import Event, EventType
from missions.ports.events import EventStore
from missions.ports.interrupts import InterruptRecord, InterruptStore
from missions.ports.missions import MissionRecord, MissionStatus, MissionSummary

Resumer = Callable[[InterruptRecord, str], bool]  # (answered interrupt, Resume JSON) -> handed over now?


def waiting_question(interrupts: InterruptStore, record: MissionRecord | MissionSummary) -> InterruptRecord | None:
    """The question a mission waits on, shown once its answer can reach the execution: after the interrupt
    function stored its token and marked the mission interrupted, never before."""
    if record.status != MissionStatus.INTERRUPTED or not record.pending_interrupt:
        return None
    try:
        interrupt = interrupts.get(record.mission_id, record.pending_interrupt)
    except NotFound:
        return None
    return interrupt if interrupt.status == "pending" else None


def answer_interrupt(
    *,
    interrupts: InterruptStore,
    events: EventStore,
    resume: Resumer,
    mission_id: str,
    interrupt_id: str,
    response: InterruptResponse | dict[str, Any],
) -> tuple[InterruptRecord, bool]:
    """Record the answer once and give it to `resume` (the launcher: at once if the user has a running
    slot free, else queued for one). Returns the interrupt and whether the mission resumed now. An
    answer that could not be handed over (an outage) is not kept: the question is pending again.

    Raises NotFound (no such interrupt), AnswerRejected (bad shape), ConflictError (already answered,
    or the execution no longer takes an answer) or DependencyUnavailable (retry)."""
    record = interrupts.get(mission_id, interrupt_id)
    try:
        answer = response if isinstance(response, InterruptResponse) else InterruptResponse.model_validate(response)
        answer.check_shape(record.kind, record.options)
    except ValueError as exc:
        raise AnswerRejected(str(exc)) from exc
    if record.status != "pending":
        raise ConflictError(f"interrupt {interrupt_id} is already {record.status}")
    record = interrupts.answer(mission_id, interrupt_id, answer)
    # recorded before the execution resumes, so the answer precedes what the next stage writes
    events.append(
        mission_id,
        f"answer-{interrupt_id}",
        [
            Event(
                type=EventType.INTERRUPT_ANSWERED,
                mission_id=mission_id,
                stage=record.stage,
                payload={
                    "interrupt_id": interrupt_id,
                    "kind": record.kind.value,
                    "response": answer.model_dump(exclude_none=True),
                },
            )
        ],
    )
    output = json.dumps(Resume(interrupt_id=interrupt_id, response=answer).model_dump(mode="json"))
    try:
        resumed = resume(record, output)
    except TaskGone as gone:
        interrupts.expire(mission_id, interrupt_id)  # the answer was refused: do not keep it
        reason = f"the answer could not be delivered ({gone})"
        expired = Event(
            type=EventType.INTERRUPT_EXPIRED,
            mission_id=mission_id,
            stage=record.stage,
            payload={"interrupt_id": interrupt_id, "reason": reason},
        )
        events.append(mission_id, f"expired-{interrupt_id}", [expired])
        raise ConflictError(f"interrupt {interrupt_id} can no longer be answered ({gone})") from gone
    except Exception:
        # Step Functions throttled, or another outage: the answer did not reach the execution, so it is
        # not kept as given; the question is pending again and the client's retry is taken (the answered
        # event, batch "answer-<id>", is rewritten in place by that retry)
        interrupts.reopen(mission_id, interrupt_id)
        raise
    return record, resumed


def record_interrupt(event: dict[str, Any], interrupts: InterruptStore) -> InterruptRecord:
    """What the waitForTaskToken Lambda does: keep the token beside the interrupt it belongs to."""
    envelope = event.get("envelope") or {}
    interrupt = envelope.get("interrupt")
    token = event.get("task_token")
    if not interrupt or not token:
        raise ValueError("an interrupt request needs envelope.interrupt and task_token")
    record = InterruptRecord(
        mission_id=envelope["mission_id"],
        interrupt_id=interrupt["id"],
        kind=interrupt["kind"],
        stage=interrupt["stage"],
        question=interrupt["question"],
        options=interrupt.get("options", []),
        data=interrupt.get("data", {}),
        task_token=token,
        checkpoint_id=envelope.get("checkpoint_id"),
    )
    interrupts.put(record)
    return record


@dataclass(frozen=True)
class OverdueReport:
    count: int  # at most `limit`: enough to alarm on and to list the worst
    oldest: list[InterruptRecord]


def overdue_interrupts(
    interrupts: InterruptStore, sla_hours: int, now: datetime | None = None, limit: int = 100
) -> OverdueReport:
    """Questions users left unanswered longer than the SLA, oldest first."""
    cutoff = (now or datetime.now(UTC)) - timedelta(hours=sla_hours)
    found = interrupts.overdue(cutoff.isoformat(timespec="milliseconds"), limit=limit)  # utcnow()'s format
    return OverdueReport(count=len(found), oldest=found[:10])
