"""Step Functions execution status changes: record how a mission ended and start the next queued one."""

from __future__ import annotations

from typing import Any

from missions.app import events
from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler("detail.name")
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.control.execution_changed(events.execution_status(event))
