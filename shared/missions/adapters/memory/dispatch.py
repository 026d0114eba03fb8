"""The reference DispatchStore, in memory: the conformance suite runs it beside DynamoDB's."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from typing import Literal

from missions.ports.dispatch import Claim, QueueEntry, Stranded


class InMemoryDispatchStore:
    """The reference DispatchStore: one lock makes every method atomic."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._journal: dict[tuple[str, str, str], Stranded] = {}  # (kind, user, sort key) -> note or claim
        self._keys: dict[str, list[str]] = {}  # user -> sorted sort keys
        self._entries: dict[str, dict[str, QueueEntry]] = {}  # user -> sort key -> entry
        self._running: dict[str, set[str]] = {}
        self._held: dict[tuple[str, str, str], QueueEntry] = {}  # (reason, user, sort key) -> held entry
        self._keys_held: dict[tuple[str, str], str] = {}  # (user, key) -> the mission holding it

    def enqueue(self, entry: QueueEntry) -> None:
        with self._lock:
            self._insert(entry)

    def _insert(self, entry: QueueEntry) -> None:
        key = entry.sort_key
        entries = self._entries.setdefault(entry.user_id, {})
        if key not in entries:
            bisect.insort(self._keys.setdefault(entry.user_id, []), key)
        entries[key] = entry.model_copy(deep=True)

    def front(self, user_id: str, count: int) -> list[QueueEntry]:
        with self._lock:
            keys = self._keys.get(user_id) or []
            return [self._entries[user_id][key].model_copy(deep=True) for key in keys[:count]]

    def claim(self, entry: QueueEntry, limit: int) -> Claim:
        with self._lock:
            if entry.sort_key not in self._entries.get(entry.user_id, {}):
                return Claim.GONE
            running = self._running.setdefault(entry.user_id, set())
            if entry.mission_id not in running and len(running) >= limit:
                return Claim.FULL
            self._delete(entry)
            running.add(entry.mission_id)
            self._note("claimed", entry)
            return Claim.CLAIMED

    def take_slot(self, user_id: str, mission_id: str, limit: int) -> bool:
        with self._lock:
            running = self._running.setdefault(user_id, set())
            if mission_id not in running and len(running) >= limit:
                return False
            running.add(mission_id)
            return True

    def intend(self, entry: QueueEntry) -> None:
        with self._lock:
            self._note("pending", entry)

    def forget(self, entry: QueueEntry) -> None:
        with self._lock:
            self._journal.pop(("pending", entry.user_id, entry.sort_key), None)

    def settle(self, entry: QueueEntry) -> None:
        with self._lock:
            self._journal.pop(("claimed", entry.user_id, entry.sort_key), None)

    def placed(self, entry: QueueEntry) -> bool:
        with self._lock:
            return (
                entry.sort_key in self._entries.get(entry.user_id, {})
                or ("claimed", entry.user_id, entry.sort_key) in self._journal
                or (entry.held is not None and (entry.held, entry.user_id, entry.sort_key) in self._held)
            )

    def stranded(self, before: int) -> list[Stranded]:
        with self._lock:
            kept = [item.model_copy(deep=True) for item in self._journal.values() if item.since < before]
        return sorted(kept, key=lambda item: item.since)

    def _note(self, kind: Literal["pending", "claimed"], entry: QueueEntry) -> None:
        self._journal[(kind, entry.user_id, entry.sort_key)] = Stranded(
            kind=kind, entry=entry.model_copy(deep=True), since=self._clock()
        )

    def release(self, user_id: str, mission_id: str) -> None:
        with self._lock:
            self._running.get(user_id, set()).discard(mission_id)

    def remove(self, entry: QueueEntry) -> bool:
        with self._lock:
            if entry.held is not None:
                return self._held.pop((entry.held, entry.user_id, entry.sort_key), None) is not None
            if entry.sort_key not in self._entries.get(entry.user_id, {}):
                return False
            self._delete(entry)
            return True

    def hold(self, entry: QueueEntry) -> None:
        assert entry.held is not None, "a held entry names why it is held"
        with self._lock:
            self._held[(entry.held, entry.user_id, entry.sort_key)] = entry.model_copy(deep=True)

    def held(self, reason: str, user_id: str | None = None) -> list[QueueEntry]:
        with self._lock:
            found = [
                (user, key, e)
                for (why, user, key), e in self._held.items()
                if why == reason and user_id in (None, user)
            ]
        return [e.model_copy(deep=True) for _, _, e in sorted(found, key=lambda item: (item[0], item[1]))]

    def unhold(self, entry: QueueEntry) -> bool:
        with self._lock:
            taken = self._held.pop((entry.held or "", entry.user_id, entry.sort_key), None)
            if taken is None:
                return False
            self._insert(taken.model_copy(update={"held": None}))
            return True

    def key_holder(self, user_id: str, key: str) -> str | None:
        with self._lock:
            return self._keys_held.get((user_id, key))

    def take_key(self, user_id: str, key: str, mission_id: str, expected: str | None) -> bool:
        with self._lock:
            if self._keys_held.get((user_id, key)) != expected:
                return False
            self._keys_held[(user_id, key)] = mission_id
            return True

    def drop_key(self, user_id: str, key: str, mission_id: str) -> bool:
        with self._lock:
            if self._keys_held.get((user_id, key)) != mission_id:
                return False
            del self._keys_held[(user_id, key)]
            return True

    def running(self, user_id: str) -> set[str]:
        with self._lock:
            return set(self._running.get(user_id, set()))

    def queued(self, user_id: str) -> list[QueueEntry]:
        with self._lock:
            entries = self._entries.get(user_id, {})
            return [entries[k].model_copy(deep=True) for k in self._keys.get(user_id, [])]

    def _delete(self, entry: QueueEntry) -> None:
        keys = self._keys[entry.user_id]
        del keys[bisect.bisect_left(keys, entry.sort_key)]
        del self._entries[entry.user_id][entry.sort_key]
