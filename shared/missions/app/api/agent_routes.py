"""Agents as data: read and change the versioned configurations of a capability's agents (operators write),
and read what every model call cost (missions.core.llm.agents, missions.core.cost.usage)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from missions.app.api.edge import app, current_user, is_operator, owned_mission, responses, runtime
from missions.app.api.models.agents import (
    AgentClone,
    AgentDetail,
    AgentDiff,
    AgentList,
    AgentPromote,
    AgentStateView,
    AgentVersionCreate,
    AgentVersionView,
    AuditList,
)
from missions.app.api.models.metrics import MissionUsage
from missions.core.errors import DependencyUnavailable, NotFound
from missions.core.llm.agents import AgentSettings
from missions.service.agents import AgentConfigs

_AGENT = "/agents/<capability>/<agent>"
# with an example each, so a client (and the fuzzer's examples phase) sees names that exist
CapabilityName = Annotated[str, Path(min_length=1, max_length=64, examples=["code_analysis"])]
AgentName = Annotated[str, Path(min_length=1, max_length=64, examples=["intent"])]
Version = Annotated[int, Path(ge=1, le=1_000_000, examples=[1])]


def _configs() -> AgentConfigs:
    configs = runtime().agents
    if configs is None:
        raise DependencyUnavailable("agent configurations are not kept here (no agents table)")
    return configs


def _operator() -> str:
    """The caller, who must be an operator (the `operators` group, or named in the settings): else 403."""
    user = current_user()
    if not is_operator(user):
        raise PermissionError("only operators change agent configurations")
    return user


@app.get(
    "/agents/<capability>",
    summary="A capability's agents: the version each runs, and the models a mission may name",
    responses=responses((200, AgentList, "every agent of its pipeline"), 404, 422, 503),
)
def list_agents(capability: CapabilityName) -> dict[str, Any]:
    current_user()
    configs = _configs()
    return {"capability": capability, "models": configs.models(capability), "agents": configs.overview(capability)}


@app.get(
    _AGENT,
    summary="An agent: its state and every version",
    responses=responses((200, AgentDetail, "state and versions, oldest first"), 404, 422, 503),
)
def get_agent(capability: CapabilityName, agent: AgentName) -> dict[str, Any]:
    current_user()
    return _configs().agent(capability, agent)


@app.get(
    f"{_AGENT}/versions/<version>",
    summary="One version of an agent",
    responses=responses((200, AgentVersionView, "the version"), 404, 422, 503),
)
def get_version(capability: CapabilityName, agent: AgentName, version: Version) -> dict[str, Any]:
    current_user()
    return _configs().version(capability, agent, version).model_dump(mode="json")


@app.post(
    f"{_AGENT}/versions",
    summary="Create a version (operators): checked against the capability, not active until promoted",
    responses=responses((201, AgentVersionView, "the new version"), 403, 404, 409, 422, 503, body=True),
)
def create_version(capability: CapabilityName, agent: AgentName, body: AgentVersionCreate) -> Response[dict[str, Any]]:
    actor = _operator()
    given = body.model_dump(include=body.model_fields_set - {"based_on", "note"})
    created = _configs().create(
        capability, agent, AgentSettings.model_validate(given), actor, based_on=body.based_on, note=body.note
    )
    return Response(201, "application/json", body=created.model_dump(mode="json"))


@app.post(
    f"{_AGENT}/versions/<version>/clone",
    summary="Clone a version into a new one (operators)",
    responses=responses((201, AgentVersionView, "the new version"), 403, 404, 409, 422, 503, body=True),
)
def clone_version(
    capability: CapabilityName, agent: AgentName, version: Version, body: AgentClone
) -> Response[dict[str, Any]]:
    actor = _operator()
    created = _configs().clone(capability, agent, version, actor, note=body.note)
    return Response(201, "application/json", body=created.model_dump(mode="json"))


@app.post(
    f"{_AGENT}/promote",
    summary="Make a version the one new missions run (operators); no deploy",
    responses=responses((200, AgentStateView, "the agent's state"), 403, 404, 409, 422, 503, body=True),
)
def promote(capability: CapabilityName, agent: AgentName, body: AgentPromote) -> dict[str, Any]:
    actor = _operator()
    configs = _configs()
    configs.promote(capability, agent, body.version, actor)
    return _state(configs, capability, agent)


@app.post(
    f"{_AGENT}/rollback",
    summary="Restore the version active before the current one (operators)",
    responses=responses((200, AgentStateView, "the agent's state"), 403, 404, 409, 422, 503),
)
def rollback(capability: CapabilityName, agent: AgentName) -> dict[str, Any]:
    actor = _operator()
    configs = _configs()
    configs.rollback(capability, agent, actor)
    return _state(configs, capability, agent)


@app.post(
    f"{_AGENT}/enable",
    summary="Let new missions of the capability start again (operators)",
    responses=responses((200, AgentStateView, "the agent's state"), 403, 404, 409, 422, 503),
)
def enable(capability: CapabilityName, agent: AgentName) -> dict[str, Any]:
    actor = _operator()
    configs = _configs()
    configs.set_enabled(capability, agent, True, actor)
    return _state(configs, capability, agent)


@app.post(
    f"{_AGENT}/disable",
    summary="Stop new missions of the capability from starting (operators); running ones go on",
    responses=responses((200, AgentStateView, "the agent's state"), 403, 404, 409, 422, 503),
)
def disable(capability: CapabilityName, agent: AgentName) -> dict[str, Any]:
    actor = _operator()
    configs = _configs()
    configs.set_enabled(capability, agent, False, actor)
    return _state(configs, capability, agent)


@app.get(
    f"{_AGENT}/diff",
    summary="What changed between two versions",
    responses=responses((200, AgentDiff, "field by field"), 404, 422, 503),
)
def diff(
    capability: CapabilityName,
    agent: AgentName,
    older: Annotated[int, Query(alias="from", ge=1, le=1_000_000)],
    newer: Annotated[int, Query(alias="to", ge=1, le=1_000_000)],
) -> dict[str, Any]:
    current_user()
    changes = _configs().diff(capability, agent, older, newer)
    return {"capability": capability, "agent": agent, "older": older, "newer": newer, "changes": changes}


@app.get(
    f"{_AGENT}/audit",
    summary="Who changed the agent, when, and what (newest first)",
    responses=responses((200, AuditList, "the audit trail"), 404, 422, 503),
)
def audit(
    capability: CapabilityName, agent: AgentName, limit: Annotated[int, Query(ge=1, le=500)] = 100
) -> dict[str, Any]:
    current_user()
    return {"entries": [e.model_dump(mode="json") for e in _configs().audit(capability, agent, limit)]}


@app.get(
    "/missions/<mission_id>/usage",
    summary="Every model call of your mission: stage, agent, version, provider, model, tokens, cost, latency",
    responses=responses((200, MissionUsage, "in the order they were made"), 404, 422, 503),
)
def mission_usage(mission_id: Annotated[str, Path(min_length=1, max_length=80)]) -> dict[str, Any]:
    owned_mission(mission_id, current_user())
    if not runtime().settings.usage_table:
        raise DependencyUnavailable("usage is not recorded here (no usage table)")
    calls = runtime().usage.for_mission(mission_id)
    total = {
        "calls": float(len(calls)),
        "tokens_in": float(sum(c.tokens_in for c in calls)),
        "tokens_out": float(sum(c.tokens_out for c in calls)),
        "cost_usd": round(sum(c.cost_usd for c in calls), 8),
        "latency_ms": round(sum(c.latency_ms for c in calls), 3),
        "abandoned": float(sum(1 for c in calls if c.outcome == "abandoned")),
        "abandoned_cost_usd": round(sum(c.cost_usd for c in calls if c.outcome == "abandoned"), 8),
    }
    return {"mission_id": mission_id, "calls": [c.model_dump(mode="json") for c in calls], "total": total}


def _state(configs: AgentConfigs, capability: str, agent: str) -> dict[str, Any]:
    found = next((a for a in configs.overview(capability) if a["agent"] == agent), None)
    if found is None:
        raise NotFound(f"no agent '{agent}' of '{capability}'")
    return found
