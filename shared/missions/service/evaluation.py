"""Scoring missions' timelines (missions.core.evaluation) on demand and every night.

On demand (`GET /missions/{id}/evaluation`, `missions evaluate --last N`) a mission is scored from
its events as they are. The nightly run scores every mission that ended in the last day, stores
each verdict on the mission's own timeline (one `mission.evaluated` event per mission and night:
a rerun rewrites it, it does not add a second) and reports the totals, whose safety violations
the deployed stack alarms on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from missions.core.capability.registry import Registry, UnknownCapability
from missions.core.evaluation import Evaluation, evaluate, summary
from missions.core.mission.events import Event, EventType
from missions.core.mission.status import MissionStatus
from missions.ports.events import EventStore
from missions.ports.missions import MissionRecord, MissionsByCapability, MissionStore, MissionSummary

log = logging.getLogger(__name__)

ENDED = frozenset({MissionStatus.COMPLETED, MissionStatus.FAILED, MissionStatus.CANCELLED})
PAGE = 500
LONGEST_MISSION_DAYS = 14  # a mission that ended last night may have started this long before


class Evaluator:
    def __init__(
        self,
        missions: MissionStore,
        events: EventStore,
        registry: Registry,
        by_capability: MissionsByCapability | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        count: Callable[[str, int], None] = lambda name, value: None,
    ):
        """`count` adds a count metric to the invocation's (the stack alarms on `SafetyViolations`)."""
        self.missions, self.events, self.registry, self.now = missions, events, registry, now
        self._count = count
        self.by_capability = by_capability  # the nightly run's index (DynamoDB's by_capability GSI)

    def mission(self, record: MissionRecord | MissionSummary) -> Evaluation:
        """One mission, scored from its whole timeline."""
        timeline: list[Event] = []
        cursor: str | None = None
        while True:
            batch, cursor = self.events.read(record.mission_id, after=cursor, limit=PAGE)
            timeline += batch
            if len(batch) < PAGE:
                break
        try:
            capability = self.registry.load(record.capability)
        except UnknownCapability:  # a capability since removed: risks come from the events themselves
            capability = None
        catalog = capability.catalog if capability is not None else None

        def risk_of(tool: str) -> str | None:
            spec = catalog.get(tool) if catalog is not None else None
            return spec.risk.value if spec is not None else None

        auto = capability.auto_approve_tools if capability is not None else frozenset()
        return evaluate(
            record.mission_id,
            record.capability,
            [e for e in timeline if e.type is not EventType.MISSION_EVALUATED],
            started_at=record.created_at,
            risk_of=risk_of,
            auto_approved=auto,
        )

    def last(self, user_id: str, count: int) -> list[Evaluation]:
        """The user's `count` newest missions that ended."""
        ended = [r for r in self.missions.list_for_user(user_id, limit=max(count * 4, 50)) if r.status in ENDED]
        return [self.mission(record) for record in ended[:count]]

    def nightly(self, days: int = 1) -> dict[str, Any]:
        """Score and record every mission that ended in the last `days`; the totals, for the alarm. The
        count of safety violations is the metric the stack alarms on, and each one is logged."""
        since = (self.now() - timedelta(days=days)).isoformat()
        created_since = (self.now() - timedelta(days=days + LONGEST_MISSION_DAYS)).isoformat()
        night = self.now().strftime("%Y%m%d")
        scored: list[Evaluation] = []
        if self.by_capability is None:
            raise RuntimeError("the nightly evaluation needs the missions-by-capability index")
        for name in self.registry.available():
            for record in self.by_capability.list(name, created_since):
                if record.status not in ENDED or (record.completed_at or record.created_at) < since:
                    continue
                evaluation = self.mission(record)
                scored.append(evaluation)
                self.events.append(
                    record.mission_id,
                    f"evaluation-{night}",
                    [
                        Event(
                            type=EventType.MISSION_EVALUATED,
                            mission_id=record.mission_id,
                            payload=evaluation.model_dump(mode="json"),
                        )
                    ],
                )
        report = {**summary(scored), "violations": [v for e in scored for v in e.violations][:50]}
        self._count("SafetyViolations", int(report["safety_violations"]))
        for violation in report["violations"]:
            log.error("tool used without approval", extra={"violation": violation})
        return report
