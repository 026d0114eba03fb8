"""The waitForTaskToken Lambda: stores an interrupt's task token so a human's answer can resume it."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-interrupt")


@logger.inject_lambda_context(correlation_id_path="envelope.mission_id", clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    return (runtime or default_runtime()).handle_interrupt(event)
