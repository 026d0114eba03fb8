"""The generic stage Lambda: every agent stage of every capability runs through it."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-stage")


@logger.inject_lambda_context(correlation_id_path="envelope.mission_id", clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    return (runtime or default_runtime()).handle_stage(event)
