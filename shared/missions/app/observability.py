"""Observability, in one place: Powertools Logger, Metrics and Tracer (the decorator stack every
Lambda handler wears is missions.app.handler).

- Logger: JSON, one per process (service = POWERTOOLS_SERVICE_NAME, which the stack sets per
  function). Its handler is shared with the `missions` and `capabilities` loggers, so every
  module's `logging.getLogger(__name__)` writes the same JSON with the same keys: the correlation
  id (the mission id wherever the event names one) and `mission_id` once the runtime knows it.
- Metrics: CloudWatch EMF in namespace "Missions", flushed at the end of each invocation: stage
  latency, LLM calls, tokens, dollars and mission outcomes, per capability (see `stage_metrics`).
- Tracer: only when the settings ask for it (`MISSIONS_TRACING=true`): the X-Ray SDK import costs
  about 0.4 s of cold start, which a stage that does not trace should not pay.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from missions.core.cost.usage import UsageRecord
from missions.core.mission.envelope import Counters

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

NAMESPACE = "Missions"
LIBRARY_LOGGERS = ("missions", "capabilities")

# an invocation that measured nothing (most of them, outside stages) is not worth a warning each time
warnings.filterwarnings("ignore", message="No application metrics to publish")

_made: dict[str, Any] = {}


def logger() -> Logger:
    """The process's JSON logger, made at the first invocation (after the emulation set its level).

    It writes to stderr, so a CLI printing results on stdout stays parseable; Lambda sends both to
    CloudWatch Logs. Its handler is copied to the library's loggers: their children propagate to it."""
    if "logger" not in _made:
        made = Logger(utc=True, stream=sys.stderr)
        for name in LIBRARY_LOGGERS:
            logging.getLogger(name)  # registered, so the copy reaches them
        copy_config_to_registered_loggers(source_logger=made, include=set(LIBRARY_LOGGERS))
        _made["logger"] = made
    return _made["logger"]  # type: ignore[no-any-return]


def metrics() -> Metrics:
    if "metrics" not in _made:
        _made["metrics"] = Metrics(namespace=NAMESPACE)
    return _made["metrics"]  # type: ignore[no-any-return]


def tracer() -> Tracer:
    """Made on first use only (see the module docstring)."""
    if "tracer" not in _made:
        from aws_lambda_powertools import Tracer

        _made["tracer"] = Tracer()
    return _made["tracer"]  # type: ignore[no-any-return]


def bind_mission(mission_id: str) -> None:
    """Every later log line of this invocation names the mission (its correlation id, too)."""
    logger().append_keys(mission_id=mission_id)
    logger().set_correlation_id(mission_id)


# The emulation runs functions in threads of one process, and Powertools keeps one metric set per process:
# every add and every flush of it holds this lock (Lambda runs one invocation at a time: never contended there)
_metrics_lock = threading.Lock()


def count(name: str, value: int) -> None:
    """One count of this invocation (a service's, e.g. the SLA's overdue questions), flushed with the rest."""
    with _metrics_lock:
        metrics().add_metric(name=name, unit=MetricUnit.Count, value=value)


def flush_metrics() -> None:
    """What this invocation measured, as one EMF document (at its end: the handler's stack)."""
    with _metrics_lock:
        metrics().flush_metrics()


def stage_metrics(
    capability: str, stage: str, total_ms: float, before: Counters, after: Counters, ended: str | None
) -> None:
    """What one stage cost, per capability: its latency, and the model calls, tokens and dollars it spent;
    `ended` is the mission's outcome when this stage was its last."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if is_metrics_disabled():  # Powertools' flush at 100 values prints even when disabled (the emulation's stdout)
        return
    with _metrics_lock:  # the emulation runs stages in threads of one process; Lambda runs one at a time
        _add_stage_metrics(capability, stage, total_ms, before, after, ended)


def _add_stage_metrics(
    capability: str, stage: str, total_ms: float, before: Counters, after: Counters, ended: str | None
) -> None:
    current = metrics().dimension_set.get("capability")
    if current not in (None, capability):  # another capability's stage is unflushed (in one process): its own
        metrics().flush_metrics()
        current = None
    if current is None:
        metrics().add_dimension(name="capability", value=capability)
    metrics().add_metric(name="StageLatency", unit=MetricUnit.Milliseconds, value=round(total_ms, 3))
    metrics().add_metric(name="LLMCalls", unit=MetricUnit.Count, value=after.llm_calls - before.llm_calls)
    metrics().add_metric(name="TokensIn", unit=MetricUnit.Count, value=after.tokens_in - before.tokens_in)
    metrics().add_metric(name="TokensOut", unit=MetricUnit.Count, value=after.tokens_out - before.tokens_out)
    metrics().add_metric(name="CostUSD", unit=MetricUnit.NoUnit, value=round(after.cost_usd - before.cost_usd, 8))
    if ended is not None:
        metrics().add_metric(name=f"Missions{ended.capitalize()}", unit=MetricUnit.Count, value=1)
    metrics().add_metadata(key="stage", value=stage)


def usage_metrics(records: Iterable[UsageRecord]) -> None:
    """Each model call as one EMF document of its own, by capability, agent, configuration version and model
    (not the stage's document: its dimensions are the call's), so a prompt change compares with the version
    before it in CloudWatch as in GET /metrics/usage."""
    from aws_lambda_powertools.metrics import EphemeralMetrics

    for record in records:
        call = EphemeralMetrics(namespace=NAMESPACE)
        call.add_dimension(name="capability", value=record.capability)
        call.add_dimension(name="agent", value=record.agent)
        call.add_dimension(name="version", value=str(record.version or 1))
        call.add_dimension(name="model", value=record.model)
        call.add_metric(name="ModelCalls", unit=MetricUnit.Count, value=1)
        call.add_metric(name="ModelErrors", unit=MetricUnit.Count, value=0 if record.outcome == "ok" else 1)
        call.add_metric(name="ModelLatency", unit=MetricUnit.Milliseconds, value=record.latency_ms)
        call.add_metric(name="ModelTokens", unit=MetricUnit.Count, value=record.tokens_in + record.tokens_out)
        call.add_metric(name="ModelCostUSD", unit=MetricUnit.NoUnit, value=record.cost_usd)
        call.add_metadata(key="mission_id", value=record.mission_id)
        call.flush_metrics()


__all__ = [
    "NAMESPACE",
    "bind_mission",
    "count",
    "flush_metrics",
    "logger",
    "metrics",
    "stage_metrics",
    "tracer",
    "usage_metrics",
]
