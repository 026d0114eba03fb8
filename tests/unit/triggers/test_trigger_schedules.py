"""Schedules -> mission requests for the users who opted in, and the local clock that fires them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from missions.core.triggers.declared import (
    TriggerSource,
)
from missions.core.triggers.specs import ScheduleSpec, schedule_specs
from missions.local.clock import LocalScheduleClock
from missions.service.triggers.rules import (
    normalize_scheduled_time,
    requests_for_schedule,
)
from tests.support.triggers import CAPABILITIES, TRIAGE


class FakeMemory:
    """Only what schedules use of the long-term memory port."""

    def __init__(self, by_head: dict[str, list[str]]):
        self.by_head = by_head
        self.asked: list[str] = []

    def users_with(self, namespace_head: str) -> list[str]:
        self.asked.append(namespace_head)
        return list(self.by_head.get(namespace_head, []))

    def list(self, user_id: str, namespace: tuple[str, ...], limit: int = 20) -> list[Any]:
        return []  # no opt-in item names a repository


def schedule_event(capability_name: str, schedule_id: str, scheduled_time: str = "2024-03-29T07:00:00Z") -> dict:
    return {"capability": capability_name, "schedule_id": schedule_id, "scheduled_time": scheduled_time}


def test_an_opted_in_schedule_starts_one_mission_per_opted_in_user():
    # Given two users holding items under the trigger's id, one of them twice over
    memory = FakeMemory({"digest": ["bob", "alice", "bob"]})
    # When the schedule fires
    requests = requests_for_schedule(schedule_event("triage", "digest"), CAPABILITIES, memory, lambda: ["nobody"])
    # Then each opted-in user gets one mission, keyed by schedule, time and user
    assert [(r.user_id, r.goal) for r in requests] == [
        ("alice", "Morning digest for alice at 2024-03-29T07:00:00Z"),
        ("bob", "Morning digest for bob at 2024-03-29T07:00:00Z"),
    ]
    assert [r.idempotency_key for r in requests] == [
        "schedule:triage:digest:2024-03-29T07:00:00Z:alice",
        "schedule:triage:digest:2024-03-29T07:00:00Z:bob",
    ]
    assert requests[0].trigger == TriggerSource.SCHEDULE
    assert memory.asked == ["digest"]


def test_an_opt_in_namespace_overrides_the_trigger_id():
    memory = FakeMemory({"audit_opt_in": ["carol"]})
    [request] = requests_for_schedule(schedule_event("audit", "digest"), CAPABILITIES, memory, lambda: [])
    assert request.user_id == "carol"
    assert memory.asked == ["audit_opt_in"]


def test_an_all_users_schedule_asks_all_users_not_memory():
    memory = FakeMemory({})
    requests = requests_for_schedule(schedule_event("triage", "cleanup"), CAPABILITIES, memory, lambda: ["x", "y"])
    assert [r.user_id for r in requests] == ["x", "y"]
    assert memory.asked == []


def test_schedule_keys_do_not_depend_on_how_the_time_is_spelled():
    memory = FakeMemory({"digest": ["alice"]})
    keys = {
        requests_for_schedule(schedule_event("triage", "digest", t), CAPABILITIES, memory, list)[0].idempotency_key
        for t in (
            "2024-03-29T07:00:00Z",
            "2024-03-29T08:00:00+01:00",
            "2024-03-29T07:00:00",
            "2024-03-29T07:00:00.000Z",
        )
    }
    assert keys == {"schedule:triage:digest:2024-03-29T07:00:00Z:alice"}


def test_unknown_capability_schedule_or_time_is_a_clear_error():
    memory = FakeMemory({})
    with pytest.raises(ValueError, match="unknown capability 'nope'"):
        requests_for_schedule(schedule_event("nope", "digest"), CAPABILITIES, memory, list)
    with pytest.raises(ValueError, match="no schedule 'weekly'"):
        requests_for_schedule(schedule_event("triage", "weekly"), CAPABILITIES, memory, list)
    with pytest.raises(ValueError, match="scheduled_time"):
        requests_for_schedule(
            schedule_event("triage", "digest", "<aws.scheduler.scheduled-time>"), CAPABILITIES, memory, list
        )
    with pytest.raises(ValueError, match="scheduled_time"):
        normalize_scheduled_time("tomorrow")


def test_the_local_clock_yields_firings_in_order_without_repeats():
    # Given the schedules of the test capabilities, a clock at Friday 2024-03-29 06:50 UTC
    specs = schedule_specs(CAPABILITIES)
    clock = LocalScheduleClock(specs, start=datetime(2024, 3, 29, 6, 50, tzinfo=UTC))
    # When advanced 25 minutes
    firings = clock.advance(25 * 60)
    # Then the quarter-hourly cleanup and the Paris digest (08:00 CET = 07:00 UTC) fire in time order
    assert [(spec.schedule_id, at) for spec, at in firings] == [
        ("cleanup", "2024-03-29T07:00:00Z"),
        ("digest", "2024-03-29T07:00:00Z"),
        ("cleanup", "2024-03-29T07:15:00Z"),
    ]
    assert clock.now() == datetime(2024, 3, 29, 7, 15, tzinfo=UTC)
    # And the next window starts after the last one: 07:15 is not repeated
    assert [at for _, at in clock.advance(15 * 60)] == ["2024-03-29T07:30:00Z"]
    assert clock.advance(0) == []


def test_the_local_clock_firings_feed_requests_for_schedule():
    [digest] = [s for s in schedule_specs([TRIAGE]) if s.schedule_id == "digest"]
    clock = LocalScheduleClock([digest], start=datetime(2024, 3, 29, 0, 0, tzinfo=UTC))
    [(spec, at)] = clock.advance(86_400)
    [request] = requests_for_schedule(spec.event(at), [TRIAGE], FakeMemory({"digest": ["alice"]}), list)
    assert request.idempotency_key == "schedule:triage:digest:2024-03-29T07:00:00Z:alice"


def test_the_local_clock_is_bounded():
    spec = ScheduleSpec("s", "c", "s", "cron(0 0 1 1 ? *)", "UTC", {})
    clock = LocalScheduleClock([spec], start=datetime(2024, 6, 1, tzinfo=UTC))
    with pytest.raises(ValueError):
        clock.advance(367 * 86_400)
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert [at for _, at in clock.advance(366 * 86_400)] == ["2025-01-01T00:00:00Z"]
    with pytest.raises(ValueError):
        LocalScheduleClock([spec], start=datetime(2024, 6, 1))
