"""Per-call usage: every model call a stage makes, whichever provider answered and however it ended.

The envelope's counters say what a mission spent in total; these records say which call spent it: the
stage and agent, the configuration version it ran (missions.core.llm.agents), the provider and model, tokens,
dollars, latency and outcome. Totals per capability, agent, version and model let an operator compare a
prompt with the one before it.

An attempt the client abandoned after sending it (a timeout, a dropped connection: outcome `abandoned`) is
a record of its own, whether a retry answered after it or not: its tokens and dollars are the worst case
(the prompt estimated, plus the limit it carried: missions.core.llm.limits), because the server may have
billed what it generated before the client stopped listening, and the mission's budget counts them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from missions.core.mission.envelope import Model, utcnow

Outcome = Literal["ok", "transient_error", "error", "abandoned"]


class UsageRecord(Model):
    mission_id: str
    user_id: str
    capability: str
    stage: str
    agent: str
    version: int | None = None  # the configuration version the stage ran (None: the capability as shipped)
    provider: str
    model: str  # the model that answered (or was asked, when none did)
    tokens_in: int = Field(0, ge=0)
    tokens_out: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0)
    latency_ms: float = Field(0.0, ge=0)
    outcome: Outcome = "ok"
    error: str | None = Field(None, max_length=500)
    max_tokens: int | None = Field(None, ge=1)  # the output limit the call carried
    # an abandoned attempt's: its number in the call (retries and fallback) and the time it was given
    attempt: int | None = Field(None, ge=1)
    timeout_s: float | None = Field(None, ge=0)
    at: str = Field(default_factory=utcnow)


class UsageTotal(Model):
    """The calls of one (capability, agent, version, model), summed."""

    capability: str
    agent: str
    version: int | None
    model: str
    calls: int = 0
    errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0  # summed: the mean is latency_ms / calls

    def add(self, record: UsageRecord) -> None:
        self.calls += 1
        self.errors += 0 if record.outcome == "ok" else 1
        self.tokens_in += record.tokens_in
        self.tokens_out += record.tokens_out
        self.cost_usd = round(self.cost_usd + record.cost_usd, 8)
        self.latency_ms = round(self.latency_ms + record.latency_ms, 3)


def total_key(record: UsageRecord) -> tuple[str, str, int | None, str]:
    return (record.capability, record.agent, record.version, record.model)


__all__ = ["Outcome", "UsageRecord", "UsageTotal", "total_key"]
