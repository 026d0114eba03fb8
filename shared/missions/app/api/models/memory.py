"""A user's long-term memory items."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, JsonValue, field_validator

from missions.app.api.models.common import Body, bounded

MEMORY_VALUE_LIMIT_BYTES = 64 * 1024  # one long-term memory item (the store's own limit)


class MemoryValue(Body):
    value: JsonValue

    @field_validator("value")
    @classmethod
    def _small_value(cls, value: JsonValue) -> JsonValue:
        return bounded(value, MEMORY_VALUE_LIMIT_BYTES, "value")  # type: ignore[no-any-return]


class MemoryItemView(BaseModel):
    namespace: list[str]
    key: str
    value: Any
    created_at: str
    updated_at: str
    score: float | None = Field(None, description="similarity to the query, when searching")


class MemoryList(BaseModel):
    items: list[MemoryItemView]


__all__ = [
    "MemoryItemView",
    "MemoryList",
    "MemoryValue",
]
