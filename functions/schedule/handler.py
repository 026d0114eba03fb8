"""Target of EventBridge Scheduler: one cron tick fans out one mission per user."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from missions.ingest import fan_out_schedule
from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-schedule")


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    return fan_out_schedule(event, runtime or default_runtime())
