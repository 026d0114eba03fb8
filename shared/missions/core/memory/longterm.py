"""The long-term memory port. Items live under (user, namespace tuple, key); users never see each other's."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from missions.core.errors import MemoryValidationError
from missions.core.mission.envelope import Model, utcnow

Namespace = tuple[str, ...]
SEGMENT = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_VALUE_BYTES = 64 * 1024
PREFERENCES = "user_preferences"  # ("user_preferences", <user>) holds what feedback taught us
MemoryChangeKind = Literal["added", "updated", "deleted"]


def check_namespace(namespace: Namespace) -> Namespace:
    if not namespace or len(namespace) > 4:
        raise MemoryValidationError("a namespace has 1 to 4 segments")
    for segment in namespace:
        if not SEGMENT.match(segment):
            raise MemoryValidationError(f"namespace segment {segment!r} must match {SEGMENT.pattern}")
    return tuple(namespace)


def check_key(key: str) -> str:
    if not SEGMENT.match(key):
        raise MemoryValidationError(f"key {key!r} must match {SEGMENT.pattern}")
    return key


class MemoryItem(Model):
    user_id: str
    namespace: list[str]
    key: str
    value: Any
    created_at: str = Field(default_factory=utcnow)
    updated_at: str = Field(default_factory=utcnow)


class MemoryChange(Model):
    """One change of one item, as the memory table's stream reports it."""

    user_id: str
    namespace: list[str]
    key: str
    kind: MemoryChangeKind
    old: Any = None
    new: Any = None
    # the stream record's id (eventID): one per change, the same when the record is delivered again,
    # so X -> Y -> X is three changes and a redelivery is one
    record_id: str | None = Field(None, max_length=128)


def is_internal(namespace: Namespace) -> bool:
    """The runtime's own namespaces ("_users", ...): never searched, never triggering missions, so their
    items need no embedding (and writing them never waits on the embedding service)."""
    return namespace[0].startswith("_")
