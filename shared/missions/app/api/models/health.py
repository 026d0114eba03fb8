"""Liveness and readiness."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Liveness(BaseModel):
    status: Literal["ok"] = Field(description="the function answered: it is alive")


class DependencyCheck(BaseModel):
    ok: bool
    latency_ms: float
    error: str | None = Field(description="why it failed (credentials redacted), null when ok")


class Readiness(BaseModel):
    """Every dependency a request may need, each asked with its cheapest call; kept a few seconds."""

    ready: bool = Field(description="every check passed (200); else 503 with the same body")
    checks: dict[str, DependencyCheck] = Field(description="table:<name>, bus, model:<provider>")
    age_seconds: float = Field(description="how long ago the checks ran (answers are cached briefly)")


__all__ = [
    "DependencyCheck",
    "Liveness",
    "Readiness",
]
