"""While CloudFormation deploys the stack (a custom resource): store each capability's shipped agent
configurations as versions, so what a mission pins never changes with a later deploy."""

from __future__ import annotations

from typing import Any

from missions.app import events
from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler()
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.agent_deployment.handle(events.custom_resource(event))
