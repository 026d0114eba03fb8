"""The in-memory long-term memory: the unit tests' fake and the conformance suite's reference.

It also holds the validation rules every adapter shares (`check_user_id`, `encode_value`) and the
writes' checks and embedding (`LongTermWrites`), so that all backends refuse exactly the same inputs.
"""

from __future__ import annotations

import builtins
import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from missions.adapters.embeddings import HashingEmbedder, cosine, text_of
from missions.core.errors import ConflictError, MemoryValidationError
from missions.core.memory.longterm import (
    MAX_VALUE_BYTES,
    MemoryItem,
    Namespace,
    check_key,
    check_namespace,
    is_internal,
)
from missions.core.mission.envelope import utcnow
from missions.ports.memory import Embedder


def check_user_id(user_id: str) -> str:
    """Storage keys are "<user>#<namespace>", so a user id must be non-empty and free of '#'."""
    if not isinstance(user_id, str) or not user_id or "#" in user_id:
        raise MemoryValidationError(f"user id {user_id!r} must be a non-empty string without '#'")
    return user_id


def check_names(user_id: str, namespace: Namespace) -> Namespace:
    check_user_id(user_id)
    if isinstance(namespace, str):  # tuple("prefs") would silently become 5 one-letter segments
        raise MemoryValidationError(f"namespace {namespace!r} must be a tuple of segments, not a string")
    return check_namespace(namespace)


def encode_value(value: Any) -> str:
    """Compact JSON of a value, refused when it is not JSON or is over MAX_VALUE_BYTES."""
    try:
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(f"value is not JSON-serializable: {exc}") from exc
    size = len(encoded.encode())
    if size > MAX_VALUE_BYTES:
        raise MemoryValidationError(f"value is {size} bytes of JSON, over the {MAX_VALUE_BYTES}-byte limit")
    return encoded


def searchable_text(key: str, value: Any) -> str:
    """What gets embedded: the value's text, or the key when the value has none (e.g. a number)."""
    return text_of(value).strip() or key


def check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise MemoryValidationError("a search query must be non-empty text")
    return query


@dataclass(frozen=True)
class Write:
    """A checked write: its namespace, its value as a JSON round trip gives it back (as DynamoDB stores it),
    that JSON, and its embedding (none in an internal namespace)."""

    namespace: Namespace
    value: Any
    encoded: str
    embedding: builtins.list[float]


class LongTermWrites(ABC):
    """The writes every backend shares: the same checks and embedding, then the backend's `_store`."""

    _embedder: Embedder

    def put(self, user_id: str, namespace: Namespace, key: str, value: Any) -> MemoryItem:
        return self._store(user_id, key, self._checked(user_id, namespace, key, value), seen=None, compare=False)

    def put_if_unchanged(
        self, user_id: str, namespace: Namespace, key: str, value: Any, seen: MemoryItem | None
    ) -> MemoryItem:
        return self._store(user_id, key, self._checked(user_id, namespace, key, value), seen=seen, compare=True)

    def _checked(self, user_id: str, namespace: Namespace, key: str, value: Any) -> Write:
        namespace = check_names(user_id, namespace)
        check_key(key)
        encoded = encode_value(value)
        value = json.loads(encoded)
        # before any lock or write: the embedder may be remote
        embedding = [] if is_internal(namespace) else self._embedder.embed([searchable_text(key, value)])[0]
        return Write(namespace, value, encoded, embedding)

    @abstractmethod
    def _store(self, user_id: str, key: str, write: Write, *, seen: MemoryItem | None, compare: bool) -> MemoryItem:
        """Store the write; with `compare`, only while the value is still `seen` (None: absent), else ConflictError."""


@dataclass
class _Stored:
    item: MemoryItem
    embedding: list[float]


class InMemoryLongTermMemory(LongTermWrites):
    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder or HashingEmbedder()
        self._items: dict[tuple[str, Namespace], dict[str, _Stored]] = {}
        self._lock = threading.Lock()

    def _store(self, user_id: str, key: str, write: Write, *, seen: MemoryItem | None, compare: bool) -> MemoryItem:
        namespace, value, embedding = write.namespace, write.value, write.embedding
        with self._lock:
            items = self._items.setdefault((user_id, namespace), {})
            now = utcnow()
            previous = items.get(key)
            held = (previous.item.value,) if previous else None
            if compare and held != ((seen.value,) if seen else None):
                raise ConflictError(f"memory {user_id}/{'/'.join(namespace)}/{key} changed since it was read")
            item = MemoryItem(
                user_id=user_id,
                namespace=list(namespace),
                key=key,
                value=value,
                created_at=previous.item.created_at if previous else now,
                updated_at=now,
            )
            items[key] = _Stored(item, embedding)
            return item.model_copy(deep=True)

    def get(self, user_id: str, namespace: Namespace, key: str) -> MemoryItem | None:
        namespace = check_names(user_id, namespace)
        check_key(key)
        with self._lock:
            stored = self._items.get((user_id, namespace), {}).get(key)
            return stored.item.model_copy(deep=True) if stored else None

    def delete(self, user_id: str, namespace: Namespace, key: str) -> bool:
        namespace = check_names(user_id, namespace)
        check_key(key)
        with self._lock:
            items = self._items.get((user_id, namespace), {})
            existed = items.pop(key, None) is not None
            if not items:
                self._items.pop((user_id, namespace), None)
            return existed

    def list(self, user_id: str, namespace: Namespace, limit: int = 100) -> list[MemoryItem]:
        namespace = check_names(user_id, namespace)
        with self._lock:
            items = self._items.get((user_id, namespace), {})
            return [items[key].item.model_copy(deep=True) for key in sorted(items)[: max(0, limit)]]

    def search(
        self, user_id: str, namespace: Namespace, query: str, limit: int = 10
    ) -> builtins.list[tuple[MemoryItem, float]]:
        namespace = check_names(user_id, namespace)
        check_query(query)
        if limit <= 0:
            return []
        with self._lock:
            stored = list(self._items.get((user_id, namespace), {}).values())
        if not stored:
            return []
        wanted = self._embedder.embed([query])[0]
        vectors = [s.embedding for s in stored]
        stale = [i for i, vector in enumerate(vectors) if len(vector) != len(wanted)]  # another embedder wrote them
        if stale:
            fresh = self._embedder.embed([searchable_text(stored[i].item.key, stored[i].item.value) for i in stale])
            for i, vector in zip(stale, fresh, strict=True):
                vectors[i] = vector
        scored = [(s.item, cosine(wanted, vector)) for s, vector in zip(stored, vectors, strict=True)]
        scored.sort(key=lambda pair: (-pair[1], pair[0].key))
        return [(item.model_copy(deep=True), score) for item, score in scored[:limit]]

    def users_with(self, namespace_head: str) -> builtins.list[str]:
        check_namespace((namespace_head,))
        with self._lock:
            return sorted(
                {user for (user, namespace), items in self._items.items() if namespace[0] == namespace_head and items}
            )
