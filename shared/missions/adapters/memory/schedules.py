"""Users' schedules in memory: the reference ScheduleStore, and a Scheduler that records what it holds
(and fails on demand, for tests of what a failure leaves behind)."""

from __future__ import annotations

import threading

from missions.core.errors import ConflictError, DependencyUnavailable, NotFound, ScheduleLimitReached
from missions.core.mission.envelope import utcnow
from missions.core.triggers.schedules import Firing, ScheduleRecord, ScheduleState
from missions.ports.schedules import SchedulerEntry


class InMemoryScheduleStore:
    def __init__(self) -> None:
        self._records: dict[tuple[str, str], ScheduleRecord] = {}
        self._lock = threading.Lock()
        self.failing: set[str] = set()  # operations that raise (a test's outage of the table)

    def _check(self, operation: str) -> None:
        if operation in self.failing:
            raise DependencyUnavailable(f"the schedules table failed ({operation})")

    def create(self, record: ScheduleRecord, limit: int) -> None:
        self._check("create")
        with self._lock:
            if sum(1 for user, _ in self._records if user == record.user_id) >= limit:
                raise ScheduleLimitReached(
                    f"you have {limit} schedules, the most you may have; delete one to make room"
                )
            if (record.user_id, record.schedule_id) in self._records:
                raise ConflictError(f"schedule {record.schedule_id} exists")
            self._records[(record.user_id, record.schedule_id)] = record

    def get(self, user_id: str, schedule_id: str) -> ScheduleRecord:
        found = self._records.get((user_id, schedule_id))
        if found is None:
            raise NotFound(f"no schedule {schedule_id}")
        return found

    def list(self, user_id: str) -> list[ScheduleRecord]:
        mine = [r for (user, _), r in self._records.items() if user == user_id]
        return sorted(mine, key=lambda r: (r.created_at, r.schedule_id))

    def set_state(self, user_id: str, schedule_id: str, state: ScheduleState) -> ScheduleRecord:
        self._check("set_state")
        with self._lock:
            changed = self.get(user_id, schedule_id).model_copy(update={"state": state, "updated_at": utcnow()})
            self._records[(user_id, schedule_id)] = changed
            return changed

    def record_firing(self, user_id: str, schedule_id: str, firing: Firing) -> None:
        with self._lock:
            record = self.get(user_id, schedule_id)
            self._records[(user_id, schedule_id)] = record.model_copy(update={"firings": record.fired(firing)})

    def delete(self, user_id: str, schedule_id: str) -> bool:
        self._check("delete")
        with self._lock:
            return self._records.pop((user_id, schedule_id), None) is not None

    def delete_all(self, user_id: str) -> int:
        self._check("delete_all")
        with self._lock:
            mine = [key for key in self._records if key[0] == user_id]
            for key in mine:
                del self._records[key]
            return len(mine)


class InMemoryScheduler:
    """EventBridge Scheduler's schedules by name; `failing` names the operations that fail."""

    def __init__(self) -> None:
        self.entries: dict[str, SchedulerEntry] = {}
        self.failing: set[str] = set()

    def _check(self, operation: str) -> None:
        if operation in self.failing:
            raise DependencyUnavailable(f"EventBridge Scheduler failed ({operation})")

    def create(self, entry: SchedulerEntry) -> None:
        self._check("create")
        self.entries[entry.name] = entry

    def update(self, entry: SchedulerEntry) -> None:
        self._check("update")
        if entry.name not in self.entries:
            raise NotFound(f"no Scheduler schedule {entry.name}")
        self.entries[entry.name] = entry

    def delete(self, name: str) -> bool:
        self._check("delete")
        return self.entries.pop(name, None) is not None


__all__ = ["InMemoryScheduleStore", "InMemoryScheduler"]
