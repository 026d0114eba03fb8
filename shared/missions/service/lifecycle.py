"""The one owner of a mission's status: typed transitions, each one conditional write.

Every writer of a status (the dispatcher starting a mission, a stage reporting progress or the
end, the interrupt function, an answer, a cancel, the execution-ended notice, retention) asks
this module, which names the statuses it may leave; the store refuses the write when the mission
is elsewhere. So nothing leaves a terminal status, a stage that finishes after its mission was
cancelled cannot write it back to running, and a queued mission cancelled before its claim can
never start. Pure: it speaks only to the MissionStore port.

    created/queued --start--> running <--> interrupted
          |                      |   \\         |
          |                      |    cancelling ---> cancelled
          +------cancel----------+--------------------^
    running/interrupted --end--> completed | failed;  completed/failed/cancelled --> archived
"""

from __future__ import annotations

from typing import Any

from missions.core.envelope import utcnow
from missions.core.errors import TransitionRefused
from missions.core.redaction import redact
from missions.ports.store import MissionStatus as S
from missions.ports.store import MissionStore

ACTIVE = frozenset({S.RUNNING, S.INTERRUPTED})
NOT_STARTED = frozenset({S.CREATED, S.QUEUED})

# the statuses a mission may be in to move to each status
ALLOWED_FROM: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.CREATED}),
    S.RUNNING: NOT_STARTED | ACTIVE,  # started, or a stage's progress, or resumed after an answer
    S.INTERRUPTED: ACTIVE,
    S.CANCELLING: NOT_STARTED | ACTIVE,
    S.CANCELLED: NOT_STARTED | ACTIVE | {S.CANCELLING},
    S.COMPLETED: ACTIVE,
    S.FAILED: NOT_STARTED | ACTIVE,
    S.ARCHIVED: frozenset({S.COMPLETED, S.FAILED, S.CANCELLED}),
}


class Lifecycle:
    def __init__(self, missions: MissionStore):
        self.missions = missions

    def move(self, mission_id: str, status: str, **fields: Any) -> None:
        """TransitionRefused when the mission's status does not allow it; nothing is written then."""
        self._transition(mission_id, status, ALLOWED_FROM[status], **fields)

    def _transition(self, mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> None:
        """Every write of a status: a terminal reason may quote an exception, so it loses its credentials here."""
        if isinstance(fields.get("terminal_reason"), str):
            fields["terminal_reason"] = redact(fields["terminal_reason"])
        self.missions.transition(mission_id, status, allowed_from, **fields)

    # the named transitions, as their writers think of them -----------------------------------------

    def start(self, mission_id: str, **fields: Any) -> None:
        """The dispatcher claimed it (only from created or queued: a cancelled one never starts)."""
        self._transition(mission_id, S.RUNNING, NOT_STARTED, **fields)

    def progress(self, mission_id: str, **fields: Any) -> None:
        """A stage ran (or an answer resumed it): only while the mission is active."""
        self._transition(mission_id, S.RUNNING, ACTIVE, **fields)

    def waiting(self, mission_id: str, interrupt_id: str) -> None:
        """Its question can be answered now (the interrupt function stored the token)."""
        self.move(mission_id, S.INTERRUPTED, pending_interrupt=interrupt_id)

    def resumed(self, mission_id: str) -> None:
        """Its answer is handed to the execution: running again (refused once it was cancelled)."""
        self._transition(mission_id, S.RUNNING, frozenset({S.INTERRUPTED}), pending_interrupt=None, asking=None)

    def end(self, mission_id: str, status: str, **fields: Any) -> None:
        if status not in (S.COMPLETED, S.FAILED):
            raise ValueError(f"a mission ends completed or failed, not {status}")
        self.move(mission_id, status, completed_at=fields.pop("completed_at", None) or utcnow(), **fields)

    def cancelled(self, mission_id: str, reason: str = "cancelled") -> None:
        self.move(
            mission_id, S.CANCELLED, terminal_reason=reason, pending_interrupt=None, asking=None, completed_at=utcnow()
        )


__all__ = ["ACTIVE", "ALLOWED_FROM", "NOT_STARTED", "Lifecycle", "TransitionRefused"]
