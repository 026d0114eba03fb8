"""Target of the repository-import rule: clone or unpack, validate, store one immutable snapshot.

Runs with network egress (git over https) and ephemeral storage sized for the snapshot limits;
the only function allowed to write snapshots.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-repository-import")


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    detail = event.get("detail") or {}
    runtime = runtime or default_runtime()
    record = runtime.repository_service.run_import(str(detail.get("repository_id")), detail.get("ref"))
    logger.info("repository imported", extra={"repository_id": record.repository_id, "status": record.status})
    return {"repository_id": record.repository_id, "status": record.status, "reason": record.reason}
