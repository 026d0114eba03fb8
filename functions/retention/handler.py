"""Daily: archive missions that ended long ago (summary to long-term memory, checkpoints removed)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from missions.retention import RetentionPolicy, archive_ended_missions
from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-retention")


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(
    event: dict[str, Any], context: Any, runtime: Runtime | None = None, now: Any = None
) -> dict[str, Any]:
    runtime = runtime or default_runtime()
    settings = runtime.settings
    policy = RetentionPolicy(settings.retention_completed_days, settings.retention_failed_days)
    report = archive_ended_missions(
        missions=runtime.missions,
        checkpoints=runtime.checkpoints,
        memory=runtime.memory,
        policy=policy,
        **({"now": now} if now else {}),
    )
    for mission_id, why in report.failures.items():
        logger.error("mission not archived", mission_id=mission_id, reason=why)
    return {"archived": report.archived, "checkpoints_removed": report.checkpoints_removed, "failures": report.failures}
