"""How a capability is doing, from its missions, its tools and its model calls: the caller's own, or every
user's for an operator (`scope=all`; missions.app.api.edge.metrics_owner decides whose)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query

from missions.app.api.edge import app, metrics_owner, responses, runtime
from missions.app.api.models.metrics import MetricsScope, MissionMetrics, ToolMetrics, UsageMetrics
from missions.core.errors import DependencyUnavailable

Capability = Annotated[str, Query(min_length=1, max_length=64)]
Scope = Annotated[
    MetricsScope,
    Query(description="`mine` (the default): your missions'; `all`: every user's, for operators only (else 403)"),
]


@app.get(
    "/metrics/missions",
    summary="How a capability's missions are doing: yours, or every user's for an operator",
    responses=responses((200, MissionMetrics, "rates and averages over the window"), 403, 422),
)
def metrics(
    capability: Capability, days: Annotated[int, Query(ge=1, le=365)] = 30, scope: Scope = "mine"
) -> dict[str, Any]:
    """Rates and averages of the caller's missions of a capability; `scope=all` gives an operator every user's,
    with the capability's learnings (every user's feedback)."""
    owner = metrics_owner(capability, scope, "missions' metrics")
    return {**runtime().service.mission_metrics(capability, days, user_id=owner), "scope": scope}


@app.get(
    "/metrics/tools",
    summary="Each tool's recent error rate and latency in a capability: your missions', or everyone's",
    responses=responses((200, ToolMetrics, "per tool"), 403, 422),
)
def tool_metrics(
    capability: Capability, days: Annotated[int, Query(ge=1, le=90)] = 7, scope: Scope = "mine"
) -> dict[str, Any]:
    owner = metrics_owner(capability, scope, "missions' tool calls")
    return {**runtime().service.tool_metrics(capability, days, user_id=owner), "scope": scope}


@app.get(
    "/metrics/usage",
    summary="Model calls of a capability per agent, configuration version and model: yours, or everyone's",
    responses=responses((200, UsageMetrics, "the totals"), 403, 422, 503),
)
def usage_metrics(capability: Capability, scope: Scope = "mine") -> dict[str, Any]:
    """Compare a prompt with the one before it: calls, errors, tokens, cost and latency per version."""
    owner = metrics_owner(capability, scope, "missions' usage")
    if not runtime().settings.usage_table:
        raise DependencyUnavailable("usage is not recorded here (no usage table)")
    totals = runtime().usage.totals(capability, owner)
    return {
        "scope": scope,
        "capability": capability,
        "totals": [
            {
                **t.model_dump(mode="json"),
                "average_latency_ms": round(t.latency_ms / t.calls, 3) if t.calls else None,
                "average_cost_usd": round(t.cost_usd / t.calls, 8) if t.calls else None,
            }
            for t in totals
        ],
    }
