"""The reference LearningsStore, in memory."""

from __future__ import annotations

import threading

from missions.ports.learnings import Learnings, learning_increments


class InMemoryLearningsStore:
    def __init__(self) -> None:
        self._items: dict[str, Learnings] = {}
        self._lock = threading.Lock()

    def record(self, capability: str, *, completed: bool | None, rating: int | None) -> None:
        with self._lock:
            current = self._items.get(capability) or Learnings(capability=capability)
            for name, amount in learning_increments(completed, rating).items():
                setattr(current, name, getattr(current, name) + amount)
            self._items[capability] = current

    def get(self, capability: str) -> Learnings:
        with self._lock:
            found = self._items.get(capability)
            return found.model_copy() if found else Learnings(capability=capability)
