"""What a capability's missions achieved, cost and met on the way: success metrics, LLM usage, tool health."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class MetricsWindow(BaseModel):
    days: int
    since: str
    until: str


class LevelTimes(BaseModel):
    count: int
    average_seconds: float | None


MetricsScope = Literal["mine", "all"]


class MissionMetrics(BaseModel):
    """Seed 004's success metrics of one capability's missions in a window of days: the caller's own
    missions (`scope` mine), or every user's for an operator (`scope` all)."""

    scope: MetricsScope = Field(description="mine: the caller's missions; all: every user's (operators only)")
    window: MetricsWindow
    count: int
    finished: int
    by_status: dict[str, int]
    completion_rate: float | None
    error_rate: float | None
    feedback_rate: float | None
    average_rating: float | None
    rating_count: int
    time_to_completion: dict[str, LevelTimes]
    average_cost_usd: float | None
    total_cost_usd: float
    learnings: dict[str, Any] | None = Field(
        description="the capability's feedback aggregates over every user: scope all only, else null"
    )


class UsageRecordView(BaseModel):
    mission_id: str
    user_id: str
    capability: str
    stage: str
    agent: str
    version: int | None
    provider: str
    model: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_ms: float
    outcome: str = Field(description="ok, transient_error, error, or abandoned (tokens and cost estimated)")
    error: str | None
    max_tokens: int | None = Field(None, description="the output limit the call carried")
    attempt: int | None = Field(None, description="an abandoned attempt's number in its call")
    timeout_s: float | None = Field(None, description="the time an abandoned attempt was given")
    at: str


class MissionUsage(BaseModel):
    mission_id: str
    calls: list[UsageRecordView]
    total: dict[str, float] = Field(
        description="calls, tokens_in, tokens_out, cost_usd, latency_ms summed; abandoned attempts and their "
        "estimated abandoned_cost_usd (counted in cost_usd)"
    )


class UsageTotalView(BaseModel):
    capability: str
    agent: str
    version: int | None
    model: str
    calls: int
    errors: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_ms: float
    average_latency_ms: float | None
    average_cost_usd: float | None


class UsageMetrics(BaseModel):
    scope: MetricsScope
    capability: str
    totals: list[UsageTotalView] = Field(description="per agent, configuration version and model")


class ToolLatency(BaseModel):
    mean: float
    p50: float
    p95: float
    max: float


class ToolHealthView(BaseModel):
    tool: str
    calls: int
    errors: int = Field(description="calls that ended in error or timeout (not_found and denied are answers)")
    error_rate: float
    latency_ms: ToolLatency


class ToolMetrics(BaseModel):
    """Each tool's recent error rate and latency in one capability, from its missions' tool calls."""

    scope: MetricsScope
    capability: str
    window: MetricsWindow
    missions: int = Field(description="missions whose tool calls were read (the newest, at most 50)")
    tools: list[ToolHealthView]


__all__ = [
    "LevelTimes",
    "MetricsScope",
    "MetricsWindow",
    "MissionMetrics",
    "MissionUsage",
    "ToolHealthView",
    "ToolLatency",
    "ToolMetrics",
    "UsageMetrics",
    "UsageRecordView",
    "UsageTotalView",
]
