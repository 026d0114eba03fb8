"""A deploy-time step: before any mission of the new code runs, each capability's shipped agent
configurations are stored as versions (missions.service.deployment explains why)."""

from __future__ import annotations

import hashlib
import json

from aws_cdk import CfnOutput, CustomResource
from constructs import Construct

from infra.components.access import ACCESS, Resources, grant
from infra.components.functions import FunctionFactory
from missions.core.capability.registry import Capability
from missions.core.llm import agents as rules
from missions.core.specs import DEPLOY_FUNCTION

RESOURCE_TYPE = "Custom::AgentConfigurations"


def shipped_fingerprint(capabilities: list[Capability]) -> str:
    """Changes exactly when what a capability.toml ships for some agent changes: CloudFormation then sends
    the custom resource an Update, and only then (a deploy of other code stores nothing)."""
    shipped = {
        capability.name: {agent.name: rules.seed(capability, agent).settings() for agent in capability.pipeline.agents}
        for capability in capabilities
    }
    return hashlib.sha256(json.dumps(shipped, sort_keys=True).encode()).hexdigest()


class AgentVersions(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        capabilities: list[Capability],
        functions: FunctionFactory,
        resources: Resources,
    ) -> None:
        super().__init__(scope, id)
        self.function = functions.create(
            self,
            "deploy",
            DEPLOY_FUNCTION,
            description="stores each capability's shipped agent configurations while the stack deploys",
            timeout_seconds=300,
        )
        grant(self.function.role, ACCESS["deploy"], resources)  # type: ignore[arg-type]
        self.resource = CustomResource(
            self,
            "Shipped",
            service_token=self.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties={
                "Capabilities": [capability.name for capability in capabilities],
                "Fingerprint": shipped_fingerprint(capabilities),
            },
        )
        # the grant must be in place before CloudFormation asks the function
        self.resource.node.add_dependency(self.function.role)
        CfnOutput(
            scope,
            "AgentConfigurations",
            value=self.resource.get_att_string("Outcomes"),
            description="what this deploy stored of the capabilities' shipped agent configurations",
        )


__all__ = ["RESOURCE_TYPE", "AgentVersions", "shipped_fingerprint"]
