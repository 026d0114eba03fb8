"""Human-in-the-loop interrupts: a question (or a pause) reaching its user, the answer validated,
recorded once and handed to the execution, and the questions left unanswered past the SLA.

`InterruptService` is the interrupt and SLA functions' entry and the API's way to answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from missions.core.errors import AnswerRejected, ConflictError, NotFound, StageRequestError, TaskGone, TransitionRefused
from missions.core.mission.envelope import InterruptKind, InterruptResponse, Resume
from missions.core.mission.events import Event, EventType
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.ports.events import EventStore
from missions.ports.interrupts import InterruptRecord, InterruptStore
from missions.ports.missions import MissionRecord, MissionStore, MissionSummary
from missions.service.lifecycle import Lifecycle
from missions.service.progress import MissionProgress

if TYPE_CHECKING:
    from missions.service.delegation import Delegations
    from missions.service.launcher import Launcher
    from missions.service.notifications import NotificationService

log = logging.getLogger(__name__)

Resumer = Callable[[InterruptRecord, str], bool]  # (answered interrupt, Resume JSON) -> handed over now?


def waiting_question(interrupts: InterruptStore, record: MissionRecord | MissionSummary) -> InterruptRecord | None:
    """The first question a mission waits on (see waiting_questions)."""
    return next(iter(waiting_questions(interrupts, record)), None)


def waiting_questions(interrupts: InterruptStore, record: MissionRecord | MissionSummary) -> list[InterruptRecord]:
    """The questions a mission waits on, in the order asked, shown once their answers can reach the
    execution: after the interrupt function stored the token and marked the mission interrupted, never
    before. Several when a group's branches asked together; those answered already are left out."""
    if record.status != MissionStatus.INTERRUPTED or not record.pending_interrupt:
        return []
    try:
        first = interrupts.get(record.mission_id, record.pending_interrupt)
        asked = [first, *(interrupts.get(record.mission_id, i) for i in first.together if i != first.interrupt_id)]
    except NotFound:
        return []
    # a delegation waits on a sub-mission, not on its user: nothing for them to answer
    return [q for q in asked if q.status == "pending" and q.kind is not InterruptKind.DELEGATION]


class NotAnswerableYet(ConflictError):
    """The question's token is stored, but its mission is not marked waiting yet: retry in a moment."""


def answer_interrupt(
    *,
    interrupts: InterruptStore,
    events: EventStore,
    missions: MissionStore,
    resume: Resumer,
    mission: MissionRecord,
    interrupt_id: str,
    response: InterruptResponse | dict[str, Any],
) -> tuple[InterruptRecord, bool | None]:
    """Record the answer once and give it to `resume` (the launcher: at once if the user has a running
    slot free, else queued for one). Returns the interrupt and whether the mission resumed now (None: it
    waits for the answers to the other questions asked with this one; the last of them resumes it). An
    answer that could not be handed over (an outage) is not kept: the question is pending again.

    Raises NotFound (no such interrupt), AnswerRejected (bad shape), ConflictError (already answered,
    the mission ended, or the execution no longer takes an answer), NotAnswerableYet (asked, but the
    mission is not waiting yet) or DependencyUnavailable (retry)."""
    mission_id = mission.mission_id
    record = interrupts.get(mission_id, interrupt_id)
    if record.kind is InterruptKind.DELEGATION:  # answered by the sub-mission's end (missions.service.delegation)
        raise ConflictError(f"interrupt {interrupt_id} waits for a sub-mission's result, not for an answer")
    try:
        answer = response if isinstance(response, InterruptResponse) else InterruptResponse.model_validate(response)
        answer.check_shape(record.kind, record.options)
    except ValueError as exc:
        raise AnswerRejected(str(exc)) from exc
    if record.status != "pending":
        raise ConflictError(f"interrupt {interrupt_id} is already {record.status}")
    awaited = record.together[0] if record.together else interrupt_id  # the first of a group's questions
    if mission.status != MissionStatus.INTERRUPTED or mission.pending_interrupt != awaited:
        # The interrupt function stores the token, then marks the mission waiting. An answer between the
        # two would find no waiting mission to resume and be dropped while the mission went on waiting.
        if mission.status in TERMINAL or mission.status == MissionStatus.CANCELLING:
            raise ConflictError(f"mission {mission_id} is {mission.status}: it takes no answer")
        raise NotAnswerableYet(f"question {interrupt_id} is not answerable yet")
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
    handed = Resume(interrupt_id=interrupt_id, response=answer)
    if record.together:
        # one of several: the mission resumes with the last answer, whichever it is, and with all of them
        try:
            left = Lifecycle(missions).answered(mission_id, interrupt_id).pending_interrupts
        except Exception:
            interrupts.reopen(mission_id, interrupt_id)  # not counted as answered: the user may answer again
            raise
        if left:
            return record, None
        given = {i: interrupts.get(mission_id, i) for i in record.together}
        answers = {i: q.response for i, q in given.items() if q.response is not None}
        handed = Resume(interrupt_id=awaited, response=answers[awaited], answers=answers)
    output = json.dumps(handed.model_dump(mode="json", exclude_none=True))
    try:
        # the first question's record names the wait (the mission's pending_interrupt); all hold its token
        resumed = resume(record if awaited == interrupt_id else interrupts.get(mission_id, awaited), output)
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
        if record.together:  # the last of several: the mission waits on it again, the others stay answered
            Lifecycle(missions).waiting(mission_id, awaited, [interrupt_id])
        raise
    return record, resumed


def record_interrupt(event: dict[str, Any], interrupts: InterruptStore) -> list[InterruptRecord]:
    """What the waitForTaskToken Lambda does: keep the token beside the interrupt it belongs to (beside
    each of them, when a group's branches asked together). The records, in the order asked."""
    envelope = event.get("envelope") or {}
    interrupt = envelope.get("interrupt")
    token = event.get("task_token")
    if not interrupt or not token:
        raise ValueError("an interrupt request needs envelope.interrupt and task_token")
    waiting = envelope.get("waiting_branches") or {}
    grouped = waiting.get("questions") if interrupt.get("group") else None
    asked: list[dict[str, Any]] = grouped if isinstance(grouped, list) and grouped else [interrupt]
    together = [q["id"] for q in asked] if len(asked) > 1 else []
    records = [
        InterruptRecord(
            mission_id=envelope["mission_id"],
            interrupt_id=question["id"],
            kind=question["kind"],
            stage=question["stage"],
            question=question["question"],
            options=question.get("options", []),
            data=question.get("data", {}),
            task_token=token,
            checkpoint_id=envelope.get("checkpoint_id"),
            together=together,
        )
        for question in asked
    ]
    for record in records:
        interrupts.put(record)
    return records


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
    found = [record for record in found if record.kind is not InterruptKind.DELEGATION]  # no user is late there
    return OverdueReport(count=len(found), oldest=found[:10])


class InterruptService:
    """The interrupt function (a question or a pause reaching its user), the SLA function, and answers.

    `launcher` and `notifications` are made on first use: the SLA function needs neither. `count` adds a
    count metric to the invocation's (the SLA alarm watches `InterruptsOverdue`)."""

    def __init__(
        self,
        *,
        interrupts: InterruptStore,
        events: EventStore,
        missions: MissionStore,
        launcher: Callable[[], Launcher],
        notifications: Callable[[], NotificationService],
        sla_hours: int = 24,
        count: Callable[[str, int], None] = lambda name, value: None,
        delegations: Callable[[], Delegations] | None = None,
        progress: MissionProgress | None = None,
    ):
        """`progress`: where the mission's stages got to, folded into the write that makes it wait
        (missions.service.progress)."""
        self._interrupts = interrupts
        self._events = events
        self._missions = missions
        self._lifecycle = Lifecycle(missions, progress=progress.latest if progress is not None else None)
        self._launcher = launcher
        self._notifications = notifications
        self._sla_hours = sla_hours
        self._count = count
        self._delegations = delegations

    def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        """The waitForTaskToken task: keep the token where the answer (or the resume) will find it."""
        if event.get("mode") == "pause":
            return self._pause(event)
        records = record_interrupt(event, self._interrupts)
        record = records[0]
        # only now can an answer reach the execution: only now is the mission waiting for one
        try:
            mission = self._lifecycle.waiting(record.mission_id, record.interrupt_id, record.together)
        except TransitionRefused:
            pass  # cancelled meanwhile: its execution is being stopped, the question will not be shown
        else:
            # waiting (for a human, or a sub-mission) holds no slot: a child never waits behind its parent
            self._launcher().waiting(record.mission_id, mission.user_id)
            if record.kind is InterruptKind.DELEGATION:
                if self._delegations is None:
                    raise StageRequestError("this function cannot start sub-missions (no delegations wired)")
                self._delegations().start(mission, record, event.get("envelope") or {})
            else:
                for asked in records:
                    self._notifications().mission_waiting(mission, asked)
        return {"interrupt_id": record.interrupt_id, "status": record.status}

    def _pause(self, event: dict[str, Any]) -> dict[str, Any]:
        """The execution waits for its user's resume: keep the token on the mission, now paused, and give
        its running slot to the next one. A mission cancelled while it was pausing refuses (this task
        fails, so the execution ends through its final stage, which finds it cancelled)."""
        envelope = event.get("envelope") or {}
        token, mission_id = event.get("task_token"), envelope.get("mission_id")
        if not token or not isinstance(mission_id, str):
            raise StageRequestError("a pause request needs envelope.mission_id and task_token")
        hops = int((envelope.get("counters") or {}).get("agent_hops") or 0)
        pause_id = f"pause-{hops:04d}"
        record = self._lifecycle.paused(mission_id, pause_id, str(token))
        self._launcher().waiting(mission_id, record.user_id)  # a paused mission holds no running slot
        paused = Event(
            type=EventType.MISSION_PAUSED,
            mission_id=mission_id,
            stage=envelope.get("next_stage"),
            payload={"pause_id": pause_id, "next_stage": envelope.get("next_stage")},
        )
        self._events.append(mission_id, pause_id, [paused])
        return {"pause_id": pause_id, "status": "paused"}

    def answer(
        self,
        mission_id: str,
        interrupt_id: str,
        response: InterruptResponse | dict[str, Any],
        mission: MissionRecord | None = None,
    ) -> tuple[InterruptRecord, bool | None]:
        """Answer a question (the API and the CLI): recorded once, resumed when the user has a slot.
        `mission`: its record, when the caller has just read it (read here otherwise)."""
        launcher = self._launcher()
        if mission is None or mission.mission_id != mission_id:
            mission = self._missions.get(mission_id)
        record = mission
        return answer_interrupt(
            interrupts=self._interrupts,
            events=self._events,
            missions=self._missions,
            resume=lambda interrupt, output: launcher.resume(interrupt, output, record),
            mission=mission,
            interrupt_id=interrupt_id,
            response=response,
        )

    def report_overdue(self) -> dict[str, Any]:
        """Questions unanswered past the SLA: a metric the alarm watches, and the oldest logged."""
        report = overdue_interrupts(self._interrupts, self._sla_hours)
        self._count("InterruptsOverdue", report.count)
        for record in report.oldest:
            log.warning(
                "question overdue",
                extra={
                    "mission_id": record.mission_id,
                    "interrupt_id": record.interrupt_id,
                    "asked_at": record.created_at,
                    "stage": record.stage,
                },
            )
        return {"overdue": report.count, "oldest": [f"{r.mission_id}/{r.interrupt_id}" for r in report.oldest]}
