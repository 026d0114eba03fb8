"""Step Functions execution status changes: record how a mission ended and start the next queued one."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-status")


@logger.inject_lambda_context(correlation_id_path="detail.name", clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    detail = event.get("detail") or {}
    (runtime or default_runtime()).service.execution_ended(detail["executionArn"], detail["status"])
    return {"mission_id": detail.get("name"), "status": detail["status"]}
