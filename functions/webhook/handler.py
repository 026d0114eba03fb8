"""POST /webhooks/{source}: verify the signature, drop replays, put the delivery on the event bus."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import correlation_paths

from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler(correlation_paths.API_GATEWAY_HTTP)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.ingest.webhook(event)
