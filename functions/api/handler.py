"""The HTTP API Lambda (API Gateway HTTP API, payload v2)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from missions import api
from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-api")


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    return api.handle(event, context, (runtime or default_runtime()).service)
