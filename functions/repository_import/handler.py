"""Target of the repository-import rule: clone or unpack, validate, store one immutable snapshot.

Runs with network egress (git over https) and ephemeral storage sized for the snapshot limits;
the only function allowed to write snapshots."""

from __future__ import annotations

from typing import Any

from missions.app import events
from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler("detail.repository_id")
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.repository_service.handle_import(events.repository_import(event))
