"""Conversations in memory (the emulation without DynamoDB, tests): the ConversationStore port."""

from __future__ import annotations

import threading

from missions.core.memory.conversation import WorkingMemory
from missions.ports.conversations import VersionConflict


class InMemoryConversationStore:
    def __init__(self) -> None:
        self._items: dict[tuple[str, str], tuple[WorkingMemory, int]] = {}
        self._lock = threading.Lock()

    def get(self, user_id: str, conversation_id: str) -> tuple[WorkingMemory, int] | None:
        with self._lock:
            found = self._items.get((user_id, conversation_id))
            return (found[0].model_copy(deep=True), found[1]) if found else None

    def put(self, memory: WorkingMemory, expected_version: int) -> None:
        key = (memory.user_id, memory.conversation_id)
        with self._lock:
            current = self._items.get(key)
            if (current[1] if current else 0) != expected_version:
                raise VersionConflict(f"conversation {memory.conversation_id} changed meanwhile")
            self._items[key] = (memory.model_copy(deep=True), expected_version + 1)

    def list(self, user_id: str, limit: int = 50) -> list[WorkingMemory]:
        with self._lock:
            mine = [memory for (owner, _), (memory, _) in self._items.items() if owner == user_id]
        return sorted(mine, key=lambda m: m.updated_at, reverse=True)[:limit]

    def delete(self, user_id: str, conversation_id: str) -> bool:
        with self._lock:
            return self._items.pop((user_id, conversation_id), None) is not None
