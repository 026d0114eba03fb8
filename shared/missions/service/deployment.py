"""What runs while CloudFormation deploys the stack: a custom resource whose function stores each
capability's shipped agent configurations (missions.service.agents `deploy`) before any mission runs.

Why at deploy time, not on first use: a version is what a mission pins, and it must not change once a
mission could have pinned it. Read lazily from capability.toml, version 1 would be whatever the current
deploy ships, so a deploy changing a prompt would change what missions pinned to version 1 run.

The reply always goes out (CloudFormation otherwise waits an hour): SUCCESS with what was stored, or
FAILED with the reason, which fails the deploy and rolls it back. Deleting the stack stores and erases
nothing: versions and their audit trail are data, kept or removed with their table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from missions.core.settings import SettingsError
from missions.ports.deployment import DeploymentReplies

if TYPE_CHECKING:
    from missions.service.agents import AgentConfigs

log = logging.getLogger(__name__)

MAX_REASON_CHARS = 1000  # CloudFormation shows the reason in the stack's events; keep it readable
MAX_SUMMARY_CHARS = 2000  # a reply is at most 4 KB
PHYSICAL_ID = "agent-configurations"


@dataclass(frozen=True)
class CustomResourceRequest:
    request_type: Literal["Create", "Update", "Delete"]
    response_url: str
    stack_id: str
    request_id: str
    logical_resource_id: str
    capabilities: Sequence[str]


def handle_agent_deploy(
    request: CustomResourceRequest,
    deploy: Callable[[str], list[dict[str, Any]]],
    replies: DeploymentReplies,
    on_failure: Callable[[Exception], None],
) -> dict[str, Any]:
    """Store every capability's shipped configuration, then reply; the reply sent (for the logs)."""
    data: dict[str, Any] = {}
    try:
        if request.request_type != "Delete":
            outcomes = {name: deploy(name) for name in request.capabilities}
            stored = sum(1 for report in outcomes.values() for r in report if r["outcome"] != "unchanged")
            data = {"Stored": str(stored), "Outcomes": _summary(outcomes)[:MAX_SUMMARY_CHARS]}
        status, reason = "SUCCESS", "agent configurations stored"
    except Exception as exc:  # any failure fails the deploy, with its reason: CloudFormation must hear of it
        on_failure(exc)
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"[:MAX_REASON_CHARS]
    reply = {
        "Status": status,
        "Reason": reason,
        "PhysicalResourceId": PHYSICAL_ID,
        "StackId": request.stack_id,
        "RequestId": request.request_id,
        "LogicalResourceId": request.logical_resource_id,
        "Data": data,
    }
    replies.send(request.response_url, reply)
    return reply


class AgentDeployment:
    """The deploy function: `handle_agent_deploy` over the agent configurations, its reply logged.
    `agents` is None where no agents table is set: a wiring bug, which fails the deploy with the reason
    rather than leave CloudFormation waiting."""

    def __init__(self, agents: AgentConfigs | None, replies: DeploymentReplies):
        self._agents = agents
        self._replies = replies

    def handle(self, request: CustomResourceRequest) -> dict[str, Any]:
        agents = self._agents

        def deploy(capability: str) -> list[dict[str, Any]]:
            if agents is None:
                raise SettingsError("MISSIONS_AGENTS_TABLE is not set: nowhere to store agent configurations")
            return agents.deploy(capability)

        reply = handle_agent_deploy(
            request, deploy, self._replies, on_failure=lambda exc: log.exception("agent configurations not stored")
        )
        log.info("deploy replied", extra={"status": reply["Status"], "reason": reply["Reason"], "data": reply["Data"]})
        return reply


def _summary(outcomes: dict[str, list[dict[str, Any]]]) -> str:
    """e.g. "travel: 9 seeded; shopping: execute promoted 3, present stored 4" (what the deploy did)."""
    parts = []
    for capability, report in outcomes.items():
        seeded = sum(1 for r in report if r["outcome"] == "seeded")
        changed = [
            f"{r['agent']} {r['outcome']} {r['version']}" for r in report if r["outcome"] in ("promoted", "stored")
        ]
        done = ([f"{seeded} seeded"] if seeded else []) + changed
        parts.append(f"{capability}: {', '.join(done) if done else 'unchanged'}")
    return "; ".join(parts)


__all__ = ["PHYSICAL_ID", "AgentDeployment", "CustomResourceRequest", "handle_agent_deploy"]
