"""Target of the event-bus rules (webhook and memory-change triggers): events become missions."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from missions.ingest import dispatch_event
from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-trigger")


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    return dispatch_event(event, runtime or default_runtime())
