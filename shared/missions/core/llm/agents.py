"""Agents as data: versioned configurations of a capability's agents, and the rules every version obeys.

A version is what one agent (a stage of a capability's pipeline) runs with: its model, temperature,
fallback model, output token limit, enabled tools and prompt template. Versions are immutable once
stored and numbered per (capability, agent) from 1; version 1 is the capability.toml as shipped (its
`seed`). Each agent has one active version, which operators move (promote, roll back) without a deploy.

Why a version can never widen what a stage may do: its tools are checked to be a subset of the tools the
stage declares (`allowed_tools`, else the capability's catalog), and the tool executor still applies the
stage's `tool_access` on top; its model must have a price (a dollar budget counts every call). A prompt
template names only the variables in TEMPLATE_VARIABLES (`{{agent}}`, ...): double braces, so the JSON
examples prompts often hold are never read as variables.

A mission pins the versions active when it starts (`Envelope.agents`); each of its stages runs the version
it pinned (`applied`), so a mission resumed days later runs as it began whatever was promoted meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from missions.core.cost.pricing import Price, price_of
from missions.core.errors import AgentConfigError, ConflictError, NotFound
from missions.core.mission.envelope import Model, utcnow
from missions.core.pipeline.config import AgentConfig

if TYPE_CHECKING:
    from missions.core.capability.registry import Capability

TEMPLATE_VARIABLES = frozenset({"capability", "agent", "description", "tools", "date"})
_VARIABLE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
MAX_PROMPT_CHARS = 20_000
SEED_SOURCE = "capability.toml"
HISTORY_LIMIT = 50  # earlier active versions an agent remembers for rollbacks
CONFIG_FIELDS = ("model", "temperature", "fallback_model", "max_tokens", "tools", "prompt")


class AgentSettings(Model):
    """What a version sets (None: the stage's own setting from capability.toml and the environment's model)."""

    model: str | None = Field(None, min_length=1, max_length=100)
    temperature: float | None = Field(None, ge=0, le=2)
    fallback_model: str | None = Field(None, min_length=1, max_length=100)
    max_tokens: int | None = Field(None, ge=1, le=200_000)
    tools: list[str] | None = Field(None, max_length=100)  # None: every tool the stage declares
    prompt: str | None = Field(None, max_length=MAX_PROMPT_CHARS)


class AgentVersion(AgentSettings):
    """One stored version: immutable, numbered per (capability, agent) from 1."""

    capability: str
    agent: str
    version: int = Field(ge=1)
    created_by: str
    created_at: str = Field(default_factory=utcnow)
    note: str = Field("", max_length=500)
    source: str = "api"  # "capability.toml" (version 1), "api", or "clone of N"

    def settings(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in CONFIG_FIELDS}


class AgentState(Model):
    """Which version of an agent runs new missions, whether it may run at all, and what it ran before."""

    capability: str
    agent: str
    active: int = Field(1, ge=1)
    enabled: bool = True
    history: list[int] = Field(default_factory=list)  # earlier active versions, the latest last
    latest: int = Field(1, ge=1)  # the highest version stored
    updated_by: str = SEED_SOURCE
    updated_at: str = Field(default_factory=utcnow)
    revision: int = Field(0, ge=0)  # counts writes: a write names the revision it read (optimistic locking)


AuditAction = Literal["seed", "deploy", "create", "clone", "promote", "rollback", "enable", "disable"]


class AuditEntry(Model):
    """Who changed what, when: one per write, never changed."""

    capability: str
    agent: str
    actor: str
    action: AuditAction
    at: str = Field(default_factory=utcnow)
    detail: dict[str, Any] = Field(default_factory=dict)


def configurable(capability: Capability) -> list[AgentConfig]:
    """The agents a capability's versions are kept for: every stage of its pipeline."""
    return list(capability.pipeline.agents)


def agent_of(capability: Capability, name: str) -> AgentConfig:
    for agent in configurable(capability):
        if agent.name == name:
            return agent
    raise NotFound(f"capability '{capability.name}' has no agent '{name}'")


def declared_tools(capability: Capability, agent: AgentConfig) -> list[str]:
    """What a version of this agent may enable: the tools the stage declares, else the capability's catalog."""
    if not agent.has_tools:
        return []
    if agent.allowed_tools is not None:
        return list(agent.allowed_tools)
    return [spec.id for spec in capability.catalog.list()]


def seed(capability: Capability, agent: AgentConfig, version: int = 1, actor: str = SEED_SOURCE) -> AgentVersion:
    """The agent as capability.toml ships it: version 1, or the version a later deploy stores when the
    shipped configuration changed (`shipped_again`)."""
    return AgentVersion(
        capability=capability.name,
        agent=agent.name,
        version=version,
        temperature=agent.temperature,
        max_tokens=agent.max_tokens,
        tools=None,
        prompt=capability.prompts.get(agent.name),
        created_by=actor,
        source=SEED_SOURCE,
        note="as shipped in capability.toml" if version == 1 else "capability.toml as deployed",
    )


def last_shipped(versions: Iterable[AgentVersion]) -> AgentVersion | None:
    """The latest version a deploy stored from capability.toml (None: none is stored yet)."""
    shipped = [version for version in versions if version.source == SEED_SOURCE]
    return max(shipped, key=lambda version: version.version) if shipped else None


def shipped_again(state: AgentState, version: int, active_is_shipped: bool, actor: str) -> AgentState:
    """The state once a deploy stored `version` (capability.toml changed since the last one it stored).

    Why a deploy promotes only over a shipped version: when the active version is capability.toml as an
    earlier deploy stored it, nobody chose otherwise and the new code's configuration is what the deploy
    means; when an operator promoted a version of their own, the deploy must not undo that choice, so the
    new version is stored for them to promote. Missions that pinned the old version keep it either way."""
    if not active_is_shipped:
        return _next(state, actor, latest=version)
    return _next(state, actor, latest=version, active=version, history=[*state.history, state.active][-HISTORY_LIMIT:])


def template_variables(template: str) -> list[str]:
    return [match.group(1) for match in _VARIABLE.finditer(template)]


def check(
    capability: Capability, agent: AgentConfig, settings: AgentSettings, prices: Mapping[str, Price] | None = None
) -> None:
    """AgentConfigError (422) naming the first problem when the settings cannot be a version of this agent."""
    for field_name in ("model", "fallback_model"):
        model = getattr(settings, field_name)
        if model is not None and price_of(model, prices) is None:
            raise AgentConfigError(
                f"{field_name}: no price for model '{model}': every call must count against a mission's budget"
            )
    if settings.tools is not None:
        allowed = declared_tools(capability, agent)
        extra = [tool for tool in settings.tools if tool not in allowed]
        if extra:
            raise AgentConfigError(
                f"tools: {extra} are not tools stage '{agent.name}' declares (it may enable: {allowed or 'none'})"
            )
        if len(set(settings.tools)) != len(settings.tools):
            raise AgentConfigError("tools: a tool is named twice")
    if settings.prompt is not None:
        if not agent.has_llm:
            raise AgentConfigError(f"prompt: stage '{agent.name}' asks no model, so it has no prompt")
        if not settings.prompt.strip():
            raise AgentConfigError("prompt: empty (leave it out to keep the stage's prompt)")
        unknown = sorted(set(template_variables(settings.prompt)) - TEMPLATE_VARIABLES)
        if unknown:
            raise AgentConfigError(
                f"prompt: unknown template variable(s) {unknown} (known: {', '.join(sorted(TEMPLATE_VARIABLES))})"
            )
        if "{{" in _VARIABLE.sub("", settings.prompt) or "}}" in _VARIABLE.sub("", settings.prompt):
            raise AgentConfigError("prompt: an unclosed '{{' or a stray '}}'")
    elif agent.has_llm and not capability.prompts.get(agent.name):
        raise AgentConfigError(f"prompt: stage '{agent.name}' asks its model and has no prompt to keep")


def render(template: str, variables: Mapping[str, str]) -> str:
    """The prompt a stage sends: each {{variable}} replaced (checked names only: see `check`)."""
    return _VARIABLE.sub(lambda match: variables.get(match.group(1), match.group(0)), template)


def variables_for(capability: Capability, agent: AgentConfig, now: datetime | None = None) -> dict[str, str]:
    tools = agent.allowed_tools if agent.allowed_tools is not None else declared_tools(capability, agent)
    return {
        "capability": capability.name,
        "agent": agent.name,
        "description": agent.description,
        "tools": ", ".join(tools),
        "date": (now or datetime.now(UTC)).date().isoformat(),
    }


def applied(agent: AgentConfig, version: AgentVersion) -> AgentConfig:
    """The stage's config as the version sets it: its tools narrowed, its sampling settings replaced."""
    update: dict[str, Any] = {
        "temperature": version.temperature if version.temperature is not None else agent.temperature,
        "max_tokens": version.max_tokens if version.max_tokens is not None else agent.max_tokens,
    }
    if version.tools is not None:
        update["allowed_tools"] = list(version.tools)
    return agent.model_copy(update=update)


def diff(older: AgentVersion, newer: AgentVersion) -> dict[str, dict[str, Any]]:
    """What changed between two versions, field by field ({"from": ..., "to": ...})."""
    return {
        name: {"from": getattr(older, name), "to": getattr(newer, name)}
        for name in CONFIG_FIELDS
        if getattr(older, name) != getattr(newer, name)
    }


def promoted(state: AgentState, version: int, actor: str) -> AgentState:
    """The state with `version` active; the one it replaces is remembered for a rollback."""
    if not 1 <= version <= state.latest:
        raise NotFound(f"no version {version} of agent '{state.agent}' (latest: {state.latest})")
    if version == state.active:
        raise ConflictError(f"version {version} of agent '{state.agent}' is already active")
    history = [*state.history, state.active][-HISTORY_LIMIT:]
    return _next(state, actor, active=version, history=history)


def rolled_back(state: AgentState, actor: str) -> AgentState:
    """The state with the version active before the current one (the last promotion undone)."""
    if not state.history:
        raise ConflictError(f"agent '{state.agent}' has no earlier active version to roll back to")
    return _next(state, actor, active=state.history[-1], history=state.history[:-1])


def _next(state: AgentState, actor: str, **changes: Any) -> AgentState:
    """The state after one write by `actor` (its revision counted)."""
    return state.model_copy(
        update={**changes, "updated_by": actor, "updated_at": utcnow(), "revision": state.revision + 1}
    )


def with_enabled(state: AgentState, enabled: bool, actor: str) -> AgentState:
    if state.enabled == enabled:
        raise ConflictError(f"agent '{state.agent}' is already {'enabled' if enabled else 'disabled'}")
    return _next(state, actor, enabled=enabled)


def with_version(state: AgentState, version: int, actor: str) -> AgentState:
    """The state once `version` (the next one) is stored; the active version does not change."""
    return _next(state, actor, latest=version)


def allowed_models(declared: Iterable[str], environment: Iterable[str]) -> list[str]:
    """The models a mission may name: the capability's list (capability.toml `models`) within the
    environment's, or the environment's when the capability names none."""
    environment_models = list(dict.fromkeys(m for m in environment if m))
    capability_models = list(dict.fromkeys(declared))
    if not capability_models:
        return environment_models
    return [model for model in capability_models if model in environment_models]


__all__ = [
    "CONFIG_FIELDS",
    "SEED_SOURCE",
    "TEMPLATE_VARIABLES",
    "AgentSettings",
    "AgentState",
    "AgentVersion",
    "AuditEntry",
    "agent_of",
    "allowed_models",
    "applied",
    "check",
    "configurable",
    "declared_tools",
    "diff",
    "promoted",
    "render",
    "rolled_back",
    "last_shipped",
    "seed",
    "shipped_again",
    "template_variables",
    "variables_for",
    "with_enabled",
    "with_version",
]
