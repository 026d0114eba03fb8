"""Flow control (missions.service.flow): a burst under debounce, and what the layer adds to a mission's start.

Measured in one run on the emulation (the runtime's services on moto, no HTTP):
- a burst of 1,000 changes of one memory item, delivered to the trigger function as the bus rule would, for
  the first installed capability whose memory trigger debounces: every event debounced, one timer in the
  Scheduler group, and once its quiet period is over (the runtime's clock moved on), exactly one mission,
  with the last change; `event_ms` is the trigger function's median per event.
- `plain_ms`: a mission's start through the launcher with no flow control to apply (no key, no daily budget:
  the layer reads the user's own budget, kept for a minute), each for a user of its own so every one starts.
- `keyed_ms`: the same start with a concurrency key and a daily budget (the key's holder read and taken with a
  conditional write, the day's spend read): `keyed_ratio` is the layer's added cost per start (goal 1.2x).
moto's cost per call is in every figure; AWS's would be a network round trip each.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from itertools import count
from typing import Any

from bench import median_ms
from missions.core.mission.requests import MissionRequest

SAMPLES = 30
BURST = 1_000
CAPABILITY, GOAL = "shopping", "a desk lamp under 40 dollars"
TARGET_RATIO = 1.2


def _median_ms(action: Callable[[], Any], samples: int = SAMPLES, after: Callable[[Any], None] | None = None) -> float:
    return median_ms(action, samples, after)


def run() -> dict[str, Any]:
    from missions.core.capability import registry
    from missions.core.memory.longterm import MemoryChange
    from missions.core.triggers.specs import memory_change_event
    from missions.local.emulation import LocalCloud

    users = count()
    debounced, trigger = next(
        (capability.name, trigger)
        for capability in registry.default_registry().load_all()
        for trigger in capability.triggers.memory
        if trigger.flow is not None and trigger.flow.debounce_seconds
    )
    field = trigger.field or "value"
    with LocalCloud([CAPABILITY, debounced], settings={"daily_budget_usd": None}) as cloud:
        runtime = cloud.runtime
        # -- a burst under debounce
        times = []
        decided: list[str] = []
        for n in range(BURST):
            change = MemoryChange(
                user_id="bench-burst", namespace=trigger.namespace.split("/"), key="item", kind="updated",
                old={field: "before"}, new={field: f"change {n}"}, record_id=f"r-{n}",
            )  # fmt: skip
            entry = memory_change_event(change)
            event = {"source": entry["Source"], "detail-type": entry["DetailType"], "detail": entry["Detail"]}
            started = time.perf_counter()
            result = runtime.ingest.bus_event(event)
            times.append((time.perf_counter() - started) * 1000)
            decided += [outcome for outcome, ids in result.items() if ids]
        group = runtime.settings.schedule_group
        timers = [
            s for s in cloud.scheduler.list_schedules(GroupName=group)["Schedules"] if s["Name"].startswith("flow-")
        ]
        [timer] = timers
        held = cloud.scheduler.get_schedule(GroupName=group, Name=timer["Name"])
        moved = runtime.now() + timedelta(seconds=120)
        runtime.now = lambda: moved  # the quiet minute is over
        fired = runtime.ingest.schedule(json.loads(held["Target"]["Input"]))
        started_missions = fired.get("started", []) + fired.get("queued", [])
        goal = runtime.missions.get(started_missions[0]).goal if started_missions else ""

        # -- the layer's cost per start
        def start(**fields: Any) -> str:
            user = f"bench-start-{next(users)}"
            request = MissionRequest.parse(capability=CAPABILITY, goal=GOAL, user_id=user, **fields)
            result = runtime.launcher.submit(request)
            assert result.status == "started", result
            return str(result.mission_id)

        def settle(mission_id: str) -> None:
            cloud.wait(mission_id, timeout=60, until_interrupt=True)

        settle(start())  # warm
        plain = _median_ms(start, after=settle)
        budgets = runtime.budgets
        assert budgets is not None
        budgets.default_usd = 5.0
        keyed = _median_ms(lambda: start(concurrency_key=f"order-{next(users)}"), after=settle)
        budgets.default_usd = None
    return {
        "burst_events": BURST,
        "burst_debounced": decided.count("debounced"),
        "burst_timers": len(timers),
        "burst_missions": len(started_missions),
        "burst_last_goal": f"change {BURST - 1}" in goal,
        "event_ms": round(statistics.median(times), 3),
        "plain_ms": round(plain, 3),
        "keyed_ms": round(keyed, 3),
        "keyed_ratio": round(keyed / plain, 3),
    }


def checks(results: dict[str, Any]) -> dict[str, bool]:
    return {
        "a burst of 1,000 changes under debounce starts one mission, the last": results["burst_missions"] == 1
        and results["burst_last_goal"]
        and results["burst_debounced"] == BURST,
        f"flow control adds <= {TARGET_RATIO}x to a start": results["keyed_ratio"] <= TARGET_RATIO,
    }


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (
            f"burst of {results['burst_events']:,} memory changes under debounce",
            f"{results['burst_debounced']} debounced ({results['event_ms']:.2f} ms each, moto), "
            f"{results['burst_timers']} timer, {results['burst_missions']} mission (the last goal: "
            f"{results['burst_last_goal']})",
        ),
        (
            "flow control per start (key + daily budget)",
            f"{results['keyed_ms']:.2f} ms = {results['keyed_ratio']:.3f}x a start without it "
            f"({results['plain_ms']:.2f} ms, moto)",
        ),
    ]
