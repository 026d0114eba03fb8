"""The one owner of a mission's status: typed transitions, each one conditional write.

Every writer of a status (the dispatcher recording a mission and starting it, a stage reporting
progress or the end, the interrupt function, an answer, a cancel, the execution-ended notice,
retention) asks this module, which names the statuses it may leave (the table in
`missions.core.mission.status`); the store refuses the write when the mission is elsewhere. So nothing
leaves a terminal status, a stage that finishes after its mission was cancelled cannot write it back
to running, and a queued mission cancelled before its claim can never start. Pure: it speaks only to
the MissionStore port.

Pausing is the user's; the stage in flight finishes (it finds the mission pausing), its
segment hands back and the mission's machine waits on a task token, as for a question: `paused`
then holds no running slot. A question asked by that last stage, or its end, wins over the pause
(a mission waiting for an answer holds no slot either). A paused mission whose wait times out ends
through its final stage (`pause_expired`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from missions.core.mission.envelope import utcnow
from missions.core.mission.status import ACTIVE, ALLOWED_FROM, NOT_STARTED
from missions.core.mission.status import MissionStatus as S
from missions.core.redaction import redact
from missions.ports.missions import MissionRecord, MissionStore

# the statuses a mission reaches by leaving the stages' hands (a wait, a pause, its end from outside): their
# write folds in where its stages got to, which the record no longer hears of while it runs
_FOLDS_PROGRESS = frozenset({S.INTERRUPTED, S.PAUSED, S.CANCELLED, S.FAILED, S.COMPLETED})


class Lifecycle:
    """`progress`: a mission's newest stage's progress (missions.service.progress.MissionProgress.latest),
    folded into every write that moves it out of its stages' hands, unless the write names the stage
    itself (the final stage's end does)."""

    def __init__(self, missions: MissionStore, progress: Callable[[str], dict[str, Any]] | None = None):
        self.missions = missions
        self._progress = progress

    def queued(self, record: MissionRecord) -> None:
        """A new mission's first status: its record written once, queued (ConflictError when a mission
        with its id exists: a retried trigger then changes nothing)."""
        self.missions.create(record.model_copy(update={"status": S.QUEUED.value}))

    def move(self, mission_id: str, status: S, **fields: Any) -> MissionRecord:
        """TransitionRefused when the mission's status does not allow it; nothing is written then."""
        return self._transition(mission_id, status, ALLOWED_FROM[status], **fields)

    def _transition(self, mission_id: str, status: S, allowed_from: frozenset[S], **fields: Any) -> MissionRecord:
        """Every write of a status: a terminal reason may quote an exception, so it loses its credentials here."""
        if isinstance(fields.get("terminal_reason"), str):
            fields["terminal_reason"] = redact(fields["terminal_reason"])
        if self._progress is not None and status in _FOLDS_PROGRESS and "stage" not in fields:
            fields = {**self._progress(mission_id), **fields}
        return self.missions.transition(mission_id, str(status), allowed_from, **fields)  # its plain string

    # the named transitions, as their writers think of them -----------------------------------------

    def start(self, mission_id: str, **fields: Any) -> None:
        """The dispatcher claimed it (only from created or queued: a cancelled one never starts)."""
        self._transition(mission_id, S.RUNNING, NOT_STARTED, **fields)

    def execution_started(self, mission_id: str, execution_arn: str) -> None:
        """Its execution began (refused once it was cancelled). A stage's progress is not written here: it
        is kept in the stage's checkpoint (missions.service.progress)."""
        self._transition(mission_id, S.RUNNING, ACTIVE, execution_arn=execution_arn)

    def pause(self, mission_id: str) -> MissionRecord:
        """The user paused it (only a running mission): its stage in flight finishes, then it waits."""
        return self.move(mission_id, S.PAUSING)

    def paused(self, mission_id: str, pause_id: str, task_token: str) -> MissionRecord:
        """The execution waits for the resume (the interrupt function stored its token): paused."""
        return self._transition(
            mission_id,
            S.PAUSED,
            frozenset({S.PAUSING}),
            pause_id=pause_id,
            pause_token=task_token,
            paused_at=utcnow(),
        )

    def unpaused(self, mission_id: str) -> MissionRecord:
        """The resume is handed to the execution (it holds a running slot): running again."""
        return self._transition(
            mission_id, S.RUNNING, frozenset({S.PAUSED}), pause_id=None, pause_token=None, paused_at=None
        )

    def pause_kept(self, mission_id: str, pause_id: str, task_token: str) -> MissionRecord:
        """A resume that could not be handed over (an outage): paused again, the same wait."""
        return self._transition(mission_id, S.PAUSED, frozenset({S.RUNNING}), pause_id=pause_id, pause_token=task_token)

    def waiting(self, mission_id: str, interrupt_id: str, together: list[str] | None = None) -> MissionRecord:
        """Its question (or the questions a group's branches asked `together`, the first named) can be
        answered now (the interrupt function stored the token): the record as written."""
        if together:
            return self.move(mission_id, S.INTERRUPTED, pending_interrupt=interrupt_id, pending_interrupts=together)
        return self.move(mission_id, S.INTERRUPTED, pending_interrupt=interrupt_id)

    def answered(self, mission_id: str, interrupt_id: str) -> MissionRecord:
        """One of the questions asked together is answered: the record as written, whose
        `pending_interrupts` says which are left (none: this answer resumes the mission)."""
        return self.missions.drop_pending(mission_id, interrupt_id)

    def resumed(self, mission_id: str) -> None:
        """Its answer is handed to the execution: running again (refused once it was cancelled)."""
        self._transition(
            mission_id,
            S.RUNNING,
            frozenset({S.INTERRUPTED}),
            pending_interrupt=None,
            pending_interrupts=None,
            asking=None,
        )

    def end(self, mission_id: str, status: str, **fields: Any) -> None:
        """`status`: completed or failed (as a stage reports it)."""
        if status not in (S.COMPLETED, S.FAILED):
            raise ValueError(f"a mission ends completed or failed, not {status}")
        self.move(
            mission_id,
            S(status),
            completed_at=fields.pop("completed_at", None) or utcnow(),
            **{"pause_id": None, "pause_token": None, **fields},
        )

    def cancelled(self, mission_id: str, reason: str = "cancelled") -> MissionRecord:
        return self.move(
            mission_id,
            S.CANCELLED,
            terminal_reason=reason,
            pending_interrupt=None,
            pending_interrupts=None,
            asking=None,
            pause_id=None,
            pause_token=None,
            completed_at=utcnow(),
        )


__all__ = ["Lifecycle"]
