"""Users' own schedules: what making one and each of its firings cost, as ratios of a mission's start.

Measured in one run on the emulation (the runtime's services on moto, no HTTP), each a median:
- `start_ms`: a mission's start through the launcher (`submit`: its checks, the dispatcher's claim and
  StartExecution), each for a user of its own so every one starts: the baseline every ratio divides by.
- `check_ms`: a schedule's checks alone (missions.core.triggers.schedules.check_expression: the expression, its time
  zone, and no two of its next 50 firings closer than the minimum), pure.
- `create_ms`: creating a schedule (those checks, the launcher's check of what its firings will ask, the
  table write that takes a place in the user's count, the Scheduler's CreateSchedule).
- `fire_ms`: one firing (the schedule function's handler: its record read, a mission's start, the firing
  kept on the record).
moto's own cost per call is in every figure but `check_ms`; AWS's would be a network round trip each.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

from bench import median_ms, ratio_rows
from missions.core.mission.requests import MissionRequest
from missions.core.triggers.schedules import check_expression
from missions.service.triggers.schedules import USER_SCHEDULE

SAMPLES = 30
CAPABILITY, GOAL = "shopping", "a desk lamp under 40 dollars"
EXPRESSION, TIMEZONE = "cron(30 7 ? * MON-FRI *)", "Europe/Paris"


def _median_ms(action: Callable[[], Any], samples: int = SAMPLES, after: Callable[[Any], None] | None = None) -> float:
    return median_ms(action, samples, after)


def run() -> dict[str, Any]:
    from missions.local.emulation import LocalCloud

    users = count()
    with LocalCloud([CAPABILITY]) as cloud:
        runtime = cloud.runtime

        def start() -> str:
            request = MissionRequest.parse(capability=CAPABILITY, goal=GOAL, user_id=f"bench-start-{next(users)}")
            result = runtime.launcher.submit(request)
            assert result.status == "started"
            return str(result.mission_id)

        def settle(mission_id: str | None) -> None:
            """Until the mission waits for its user's choice (a shopping mission asks one)."""
            if mission_id:
                cloud.wait(mission_id, timeout=60, until_interrupt=True)

        created: list[tuple[str, str]] = []

        def create() -> None:
            user = f"bench-schedule-{next(users)}"
            record = runtime.schedules.create(
                user, expression=EXPRESSION, timezone=TIMEZONE, goal=GOAL, capability=CAPABILITY
            )
            created.append((user, record.schedule_id))

        firing = iter(range(10**6))

        def fire() -> str | None:
            user, schedule_id = created[next(firing) % len(created)]
            event = {"kind": USER_SCHEDULE, "user_id": user, "schedule_id": schedule_id}
            result = runtime.ingest.schedule({**event, "scheduled_time": "2026-12-07T06:30:00Z"})
            assert result["outcome"] == "started", result  # each schedule fires once: every firing starts one
            return result.get("mission_id")

        now = datetime(2026, 12, 1, tzinfo=UTC)
        check = lambda: check_expression(EXPRESSION, TIMEZONE, now=now, minimum_interval=timedelta(minutes=15))  # noqa: E731
        settle(start())  # warm: the first start imports and builds what every later one reuses
        figures = {
            "start_ms": _median_ms(start, after=settle),
            "check_ms": _median_ms(check, SAMPLES * 10),
            "create_ms": _median_ms(create),
            "fire_ms": _median_ms(fire, after=settle),
        }
    result = {name: round(value, 3) for name, value in figures.items()}
    for name in ("check", "create", "fire"):
        result[f"{name}_ratio"] = round(figures[f"{name}_ms"] / figures["start_ms"], 3)
    return result


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    labels = {
        "check": "schedule checks (50 firings), pure",
        "create": "schedule create (moto table + Scheduler)",
        "fire": "schedule firing (record, start, kept)",
    }
    return ratio_rows(results, f"x a mission's start ({results['start_ms']:.2f} ms, moto)", labels, digits=2)
