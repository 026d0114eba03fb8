"""The stage function's entry: one stage of a mission run on its envelope, then measured.

Every agent stage of every capability runs through it: the runner of the envelope's capability runs
the stage within the invocation's remaining time, a stage of an Express segment says whether the
segment should hand back, and what the stage cost goes out as metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from missions.app import observability
from missions.app.events import deadline_of
from missions.core.errors import StageRequestError
from missions.core.pipeline.compiler import segment_spent
from missions.service.runner import StageRunner


class StageFunction:
    """`runner`: the stage runner of a capability (the runtime's, one per capability and process)."""

    def __init__(self, runner: Callable[[str], StageRunner]):
        self._runner = runner

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        envelope = event.get("envelope")
        if not isinstance(envelope, dict) or not isinstance(envelope.get("capability"), str):
            raise StageRequestError("stage request without an envelope naming its capability")
        runner = self._runner(envelope["capability"])
        result = runner.handle(event, deadline=deadline_of(context))
        if "segment_started" in event:  # a stage of an Express segment: should the segment hand back?
            # when the mission ended meanwhile (cancelled), its user paused it, or the segment has used its time
            result["segment_yield"] = (
                runner.mission_ended_meanwhile or runner.pausing or segment_spent(event, datetime.now(UTC))
            )
            # and whether it may start the next one: not for a mission that ended (cancelled)
            result["mission_ended"] = runner.mission_ended_meanwhile
        report = runner.last_report
        if report is not None:
            observability.stage_metrics(
                report.capability, report.stage, runner.last_timings.total_ms, report.before, report.after, report.ended
            )
        observability.usage_metrics(runner.last_usage)
        return result


__all__ = ["StageFunction"]
