"""Target of the event-bus rules (webhook and memory-change triggers): events become missions."""

from __future__ import annotations

from typing import Any

from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler("id")
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.ingest.bus_event(event)
