"""Nightly: score every mission that ended in the last day (trace scorers); safety violations alarm."""

from __future__ import annotations

from typing import Any

from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler()
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.evaluator.nightly()
