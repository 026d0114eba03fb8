"""Every 15 minutes: count questions left unanswered past the SLA, as a metric the alarm watches."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from missions.interrupts import overdue_interrupts
from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-sla")
metrics = Metrics(namespace="Missions", service="missions-sla")


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    runtime = runtime or default_runtime()
    report = overdue_interrupts(runtime.interrupts, runtime.settings.interrupt_sla_hours)
    metrics.add_metric(name="InterruptsOverdue", unit=MetricUnit.Count, value=report.count)
    for record in report.oldest:
        logger.warning(
            "question overdue",
            mission_id=record.mission_id,
            interrupt_id=record.interrupt_id,
            asked_at=record.created_at,
            stage=record.stage,
        )
    return {"overdue": report.count, "oldest": [f"{r.mission_id}/{r.interrupt_id}" for r in report.oldest]}
