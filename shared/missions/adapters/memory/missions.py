"""In-memory adapters of missions.ports.missions:
the fake unit tests use, and the reference the conformance suite holds every backend to."""

from __future__ import annotations

from typing import Any

from missions.adapters.memory._records import KeyedRecords
from missions.core.errors import ConflictError, NotFound, TransitionRefused
from missions.core.mission.envelope import utcnow
from missions.ports.missions import MissionRecord, MissionSummary


class MemoryMissionStore(KeyedRecords[MissionRecord]):
    noun = "mission"

    def create(self, record: MissionRecord) -> None:
        self._insert(record.mission_id, record)

    def discard(self, mission_id: str) -> bool:
        with self._lock:
            record = self._items.get(mission_id)
            if record is None or record.execution_arn or record.status not in ("created", "queued", "running"):
                return False
            del self._items[mission_id]
            return True

    def get(self, mission_id: str) -> MissionRecord:
        try:  # every stage reads its mission's record
            return _detached(self._items[mission_id])
        except KeyError:
            raise NotFound(f"mission {mission_id}") from None

    def update(self, mission_id: str, **fields: Any) -> None:
        if "status" in fields:
            raise ValueError("a mission's status changes only through missions.service.lifecycle (transition)")
        with self._lock:
            self._set(mission_id, fields)

    def transition(self, mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> MissionRecord:
        with self._lock:
            if mission_id not in self._items:
                raise NotFound(f"mission {mission_id}")
            current = self._items[mission_id].status
            if current not in allowed_from:
                raise TransitionRefused(mission_id, current, status)
            self._set(mission_id, {**fields, "status": status})
            return _detached(self._items[mission_id])

    def drop_pending(self, mission_id: str, interrupt_id: str) -> MissionRecord:
        with self._lock:
            record = self._read(mission_id)
            pending = record.pending_interrupts or []
            if record.status != "interrupted" or interrupt_id not in pending:
                raise ConflictError(f"question {interrupt_id} of mission {mission_id} is not pending")
            self._set(mission_id, {"pending_interrupts": [i for i in pending if i != interrupt_id]})
            return _detached(self._items[mission_id])

    def add_note(self, mission_id: str, note: dict[str, Any], allowed_from: frozenset[str], limit: int) -> None:
        with self._lock:
            record = self._items.get(mission_id)
            if record is None:
                raise NotFound(f"mission {mission_id}")
            if record.status not in allowed_from:
                raise TransitionRefused(mission_id, record.status, "noted")
            if len(record.notes) >= limit:
                raise ConflictError(f"mission {mission_id} already has {limit} notes")
            self._set(mission_id, {"notes": [*record.notes, dict(note)]})

    def _set(self, mission_id: str, fields: dict[str, Any]) -> None:
        if mission_id not in self._items:
            raise NotFound(f"mission {mission_id}")
        # validated whole, as the record it becomes (the old one is replaced, never changed: the new one may
        # share its values)
        self._items[mission_id] = MissionRecord.model_validate(
            {**self._items[mission_id].__dict__, **fields, "updated_at": utcnow()}
        )

    def set_feedback(self, mission_id: str, feedback: dict[str, Any]) -> None:
        with self._lock:
            record = self._items.get(mission_id)
            if record is None:
                raise NotFound(f"mission {mission_id}")
            if record.feedback is not None:
                raise ConflictError(f"mission {mission_id} already has feedback")
            self._items[mission_id] = record.model_copy(update={"feedback": feedback, "updated_at": utcnow()})

    def ended_before(self, status: str, before: str, limit: int = 100) -> list[MissionRecord]:
        found = [m for m in self._items.values() if m.status == status and m.completed_at and m.completed_at < before]
        return [m.model_copy(deep=True) for m in sorted(found, key=lambda m: m.completed_at or "")[:limit]]

    def list_for_user(self, user_id: str, limit: int = 50) -> list[MissionSummary]:
        found = [m for m in list(self._items.values()) if m.user_id == user_id]
        return [MissionSummary.of(m) for m in sorted(found, key=lambda m: m.created_at, reverse=True)[:limit]]


class InMemoryMissionsByCapability:
    """The test fake: reads the in-memory mission store's items directly."""

    def __init__(self, store: MemoryMissionStore):
        self._store = store

    def list(self, capability: str, since_iso: str) -> list[MissionSummary]:
        found = [
            m for m in list(self._store._items.values()) if m.capability == capability and m.created_at >= since_iso
        ]
        return [MissionSummary.of(m) for m in sorted(found, key=lambda m: m.created_at)]


def _detached(record: MissionRecord) -> MissionRecord:
    """A copy sharing nothing with the stored record: its dump is fresh containers all the way down, and
    validating it is several times faster than copy.deepcopy (every stage reads its record)."""
    return MissionRecord.model_validate(record.model_dump())
