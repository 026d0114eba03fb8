"""In-memory adapter of missions.ports.interrupts:
the fake unit tests use, and the reference the conformance suite holds every backend to."""

from __future__ import annotations

import threading

from missions.core.errors import ConflictError, NotFound
from missions.core.mission.envelope import InterruptResponse, utcnow
from missions.ports.interrupts import InterruptRecord


class MemoryInterruptStore:
    def __init__(self) -> None:
        self._items: dict[tuple[str, str], InterruptRecord] = {}
        self._lock = threading.Lock()

    def put(self, record: InterruptRecord) -> None:
        with self._lock:
            existing = self._items.get((record.mission_id, record.interrupt_id))
            if existing is not None and existing.status != "pending":
                raise ConflictError(f"interrupt {record.interrupt_id} is already {existing.status}")
            self._items[(record.mission_id, record.interrupt_id)] = record.model_copy(deep=True)

    def get(self, mission_id: str, interrupt_id: str) -> InterruptRecord:
        try:
            return self._items[(mission_id, interrupt_id)].model_copy(deep=True)
        except KeyError:
            raise NotFound(f"interrupt {mission_id}/{interrupt_id}") from None

    def answer(self, mission_id: str, interrupt_id: str, response: InterruptResponse) -> InterruptRecord:
        with self._lock:
            record = self._items.get((mission_id, interrupt_id))
            if record is None:
                raise NotFound(f"interrupt {mission_id}/{interrupt_id}")
            if record.status != "pending":
                raise ConflictError(f"interrupt {interrupt_id} is already {record.status}")
            record = record.model_copy(update={"status": "answered", "response": response, "answered_at": utcnow()})
            self._items[(mission_id, interrupt_id)] = record
            return record.model_copy(deep=True)

    def reopen(self, mission_id: str, interrupt_id: str) -> None:
        with self._lock:
            record = self._items.get((mission_id, interrupt_id))
            if record is None:
                raise NotFound(f"interrupt {mission_id}/{interrupt_id}")
            if record.status != "answered":
                raise ConflictError(f"interrupt {interrupt_id} is {record.status}, not answered")
            self._items[(mission_id, interrupt_id)] = record.model_copy(
                update={"status": "pending", "response": None, "answered_at": None}
            )

    def expire(self, mission_id: str, interrupt_id: str) -> None:
        with self._lock:
            record = self._items.get((mission_id, interrupt_id))
            if record is None:
                raise NotFound(f"interrupt {mission_id}/{interrupt_id}")
            self._items[(mission_id, interrupt_id)] = record.model_copy(
                update={"status": "expired", "response": None, "answered_at": None}
            )

    def pending(self, mission_id: str) -> list[InterruptRecord]:
        return [r for (m, _), r in self._items.items() if m == mission_id and r.status == "pending"]

    def overdue(self, asked_before: str, limit: int = 100) -> list[InterruptRecord]:
        waiting = [r for r in self._items.values() if r.status == "pending" and r.created_at < asked_before]
        return sorted(waiting, key=lambda r: r.created_at)[:limit]
