"""The streaming routes' Lambda (chat completions, event streams): behind its function URL in AWS."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import correlation_paths

from missions.app import streams
from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler(correlation_paths.API_GATEWAY_HTTP)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return streams.handle(event, context, runtime)
