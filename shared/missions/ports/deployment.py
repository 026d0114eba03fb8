"""How a deploy-time step answers CloudFormation (missions.service.deployment)."""

from __future__ import annotations

from typing import Any, Protocol


class DeploymentReplies(Protocol):
    """Where a custom resource's outcome goes: CloudFormation waits (up to an hour) until it arrives."""

    def send(self, url: str, reply: dict[str, Any]) -> None:
        """Deliver `reply` (the custom resource response object) to the request's ResponseURL; raise when
        it could not be delivered."""


__all__ = ["DeploymentReplies"]
