"""POST /webhooks/{source}: verify the signature, drop replays, put the delivery on the event bus."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from missions.ingest import receive_webhook
from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-webhook")


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    return receive_webhook(event, runtime or default_runtime())
