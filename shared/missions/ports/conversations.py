"""Where conversations' working memories live (missions.core.memory.conversation): per user, with a TTL."""

from __future__ import annotations

from typing import Protocol

from missions.core.memory.conversation import WorkingMemory


class VersionConflict(Exception):
    """Another mission of the conversation wrote its memory first: read it again and fold again."""


class ConversationStore(Protocol):
    def get(self, user_id: str, conversation_id: str) -> tuple[WorkingMemory, int] | None:
        """The memory and its version (None: no such conversation of this user)."""

    def put(self, memory: WorkingMemory, expected_version: int) -> None:
        """Write it as version expected_version + 1 (0: a new conversation); VersionConflict if the
        stored version is another (two missions of one conversation ending at once lose nothing)."""

    def list(self, user_id: str, limit: int = 50) -> list[WorkingMemory]:
        """The user's conversations, most recently updated first."""

    def delete(self, user_id: str, conversation_id: str) -> bool:
        """Remove it with its working memory; False when there was none."""
