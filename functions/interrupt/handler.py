"""The waitForTaskToken Lambda: stores an interrupt's task token so a human's answer can resume it."""

from __future__ import annotations

from typing import Any

from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler("envelope.mission_id")
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.interrupt_service.handle(event)
