"""Long-term memory: namespaced items per user with semantic search (DynamoDB in AWS), and its embedder."""

from __future__ import annotations

import builtins
from typing import Any, Protocol, runtime_checkable

from missions.core.memory.longterm import MemoryItem, Namespace


class LongTermMemory(Protocol):
    def put(self, user_id: str, namespace: Namespace, key: str, value: Any) -> MemoryItem:
        """Create or replace; MemoryValidationError for bad names or values over 64 KB."""

    def put_if_unchanged(
        self, user_id: str, namespace: Namespace, key: str, value: Any, seen: MemoryItem | None
    ) -> MemoryItem:
        """`put`, only if the item still holds what `seen` held (absent, when `seen` is None): a
        read-merge-write that meets another writer gets ConflictError and reads again."""

    def get(self, user_id: str, namespace: Namespace, key: str) -> MemoryItem | None: ...

    def delete(self, user_id: str, namespace: Namespace, key: str) -> bool:
        """True if something was deleted."""

    def list(self, user_id: str, namespace: Namespace, limit: int = 100) -> list[MemoryItem]: ...

    def search(
        self, user_id: str, namespace: Namespace, query: str, limit: int = 10
    ) -> builtins.list[tuple[MemoryItem, float]]:
        """Items of that namespace most similar to the query, best first, with cosine scores."""

    def users_with(self, namespace_head: str) -> builtins.list[str]:
        """Users holding at least one item in a namespace whose first segment is `namespace_head`."""


@runtime_checkable
class Embedder(Protocol):
    dimensions: int

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector of `dimensions` floats per text, in order."""
