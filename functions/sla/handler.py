"""Every 15 minutes: count questions left unanswered past the SLA, as a metric the alarm watches."""

from __future__ import annotations

from typing import Any

from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler()
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.interrupt_service.report_overdue()
