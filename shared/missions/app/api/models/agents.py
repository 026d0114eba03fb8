"""Agents as data (missions.core.llm.agents): their versions, promotion, diffs and audit trail."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, StrictInt, StrictStr

from missions.app.api.models.common import Body


class AgentVersionCreate(Body):
    """A new version: the fields given replace those of `based_on` (default: the active version); an
    explicit null goes back to the stage's own setting in capability.toml."""

    model: StrictStr | None = Field(None, min_length=1, max_length=100, description="a model with a known price")
    temperature: float | None = Field(None, ge=0, le=2, strict=True)
    fallback_model: StrictStr | None = Field(None, min_length=1, max_length=100)
    max_tokens: StrictInt | None = Field(None, ge=1, le=200_000)
    tools: list[StrictStr] | None = Field(None, max_length=100, description="a subset of the stage's `declared_tools`")
    prompt: StrictStr | None = Field(
        None, min_length=1, max_length=20_000, description="the system prompt; {{capability}}, {{agent}}, "
        "{{description}}, {{tools}} and {{date}} are filled in"
    )  # fmt: skip
    based_on: StrictInt | None = Field(None, ge=1, le=1_000_000)
    note: StrictStr = Field("", max_length=500)


class AgentClone(Body):
    note: StrictStr = Field("", max_length=500)


class AgentPromote(Body):
    version: StrictInt = Field(ge=1, le=1_000_000, examples=[2])


class AgentVersionView(BaseModel):
    capability: str
    agent: str
    version: int
    model: str | None
    temperature: float | None
    fallback_model: str | None
    max_tokens: int | None
    tools: list[str] | None
    prompt: str | None
    created_by: str
    created_at: str
    note: str
    source: str


class AgentStateView(BaseModel):
    capability: str
    agent: str
    active: int = Field(description="the version new missions pin")
    latest: int
    enabled: bool
    history: list[int] = Field(description="earlier active versions, the latest last (what a rollback restores)")
    asks_model: bool
    declared_tools: list[str]
    updated_by: str
    updated_at: str


class AgentList(BaseModel):
    capability: str
    models: list[str] = Field(description="the models a mission of this capability may name here")
    agents: list[AgentStateView]


class AgentDetail(AgentStateView):
    versions: list[AgentVersionView]


class AgentDiff(BaseModel):
    capability: str
    agent: str
    older: int
    newer: int
    changes: dict[str, dict[str, Any]] = Field(description='field -> {"from": ..., "to": ...}')


class AuditEntryView(BaseModel):
    capability: str
    agent: str
    actor: str
    action: str
    at: str
    detail: dict[str, Any]


class AuditList(BaseModel):
    entries: list[AuditEntryView]


__all__ = [
    "AgentClone",
    "AgentDetail",
    "AgentDiff",
    "AgentList",
    "AgentPromote",
    "AgentStateView",
    "AgentVersionCreate",
    "AgentVersionView",
    "AuditEntryView",
    "AuditList",
]
