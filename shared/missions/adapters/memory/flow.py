"""The reference FlowRecords, in memory: the conformance suite runs it beside DynamoDB's."""

from __future__ import annotations

import threading
from typing import Any

from missions.ports.flow import Pending, TriggerDecision


class InMemoryFlowRecords:
    def __init__(self) -> None:
        self._decisions: list[TriggerDecision] = []
        self._counts: dict[tuple[str, str, int], int] = {}
        self._pending: dict[tuple[str, str], Pending] = {}
        self._lock = threading.Lock()

    def record(self, decision: TriggerDecision) -> None:
        with self._lock:
            self._decisions.append(decision.model_copy(deep=True))

    def decisions(self, trigger: str, user_id: str | None = None, limit: int = 50) -> list[TriggerDecision]:
        with self._lock:
            found = [d for d in self._decisions if d.trigger == trigger and user_id in (None, d.user_id)]
        newest = sorted(found, key=lambda d: (d.at, d.decision_id), reverse=True)
        return [d.model_copy(deep=True) for d in newest[:limit]]

    def admit(self, trigger: str, key: str, window: int, limit: int, expires_at: int) -> bool:
        with self._lock:
            counted = self._counts.get((trigger, key, window), 0)
            if counted >= limit:
                return False
            self._counts[(trigger, key, window)] = counted + 1
            return True

    def debounce(self, trigger: str, key: str, request: dict[str, Any], due: int) -> Pending | None:
        with self._lock:
            before = self._pending.get((trigger, key))
            version = (before.version if before is not None else 0) + 1
            self._pending[(trigger, key)] = Pending(request=request, due=due, version=version)
            return before.model_copy(deep=True) if before is not None else None

    def pending(self, trigger: str, key: str) -> Pending | None:
        with self._lock:
            found = self._pending.get((trigger, key))
            return found.model_copy(deep=True) if found is not None else None

    def take(self, trigger: str, key: str, version: int) -> bool:
        with self._lock:
            found = self._pending.get((trigger, key))
            if found is None or found.version != version:
                return False
            del self._pending[(trigger, key)]
            return True
