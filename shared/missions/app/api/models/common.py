"""Every request body's base and the one error shape the API answers with."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def bounded(value: Any, limit: int, what: str) -> Any:
    """`value`, when its compact JSON is at most `limit` bytes (what the stores downstream take); else a ValueError."""
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > limit:
        raise ValueError(f"{what} is {size} bytes as JSON; the limit is {limit}")
    return value


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """One thing wrong with a request (a field, a header, the body)."""

    loc: list[str | int]
    type: str
    message: str


class ErrorBody(BaseModel):
    """Every error the API sends has this shape; `correlation_id` names the request in the logs."""

    statusCode: int
    message: str
    correlation_id: str | None = None
    detail: list[Problem] | None = None
    next_fire_times: list[str] | None = Field(
        None, description="a schedule refused (422) whose expression parses: when it would have fired next (UTC)"
    )


__all__ = [
    "Body",
    "ErrorBody",
    "Problem",
    "bounded",
]
