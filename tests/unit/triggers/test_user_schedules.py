"""Users' own schedules (missions.service.triggers.schedules) on the in-memory store and Scheduler: the rules a new
schedule must pass, nothing half-done when a store fails, firings through the launcher's submit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from missions.adapters.memory.schedules import InMemoryScheduler, InMemoryScheduleStore
from missions.core.errors import (
    DependencyUnavailable,
    MissionRequestError,
    NotFound,
    ScheduleLimitReached,
    ScheduleRejected,
)
from missions.core.mission.requests import MissionRequest
from missions.core.triggers.cron import next_fire_times, parse_expression, parse_rate
from missions.core.triggers.schedules import CHECKED_FIRINGS, KEPT_FIRINGS, check_expression
from missions.service.triggers.schedules import USER_SCHEDULE, ScheduleService

NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # two days before Europe's clocks go forward
MINIMUM = timedelta(minutes=15)


@dataclass
class Submitted:
    mission_id: str
    status: str


class Launcher:
    """The launcher's submit as the schedules see it: one mission per idempotency key."""

    def __init__(self) -> None:
        self.requests: list[MissionRequest] = []
        self.checked: list[MissionRequest] = []
        self.refuse: str | None = None

    def check(self, request: MissionRequest) -> None:
        """As Launcher.check: a path outside the allowed roots is refused."""
        self.checked.append(request)
        if str(request.context.get("repo", "")).startswith("/etc"):
            raise MissionRequestError("repo '/etc' is outside the allowed roots")

    def submit(self, request: MissionRequest) -> Submitted:
        if self.refuse:
            raise MissionRequestError(self.refuse)
        duplicate = any(r.idempotency_key == request.idempotency_key for r in self.requests)
        self.requests.append(request)
        return Submitted(f"m_{abs(hash(request.idempotency_key)) % 10**8}", "duplicate" if duplicate else "started")


def choose(goal: str, requested: str | None) -> str:
    if requested:
        return requested
    if "laptop" in goal:
        return "shopping"
    raise MissionRequestError("could not tell which capability fits this goal; name one of: shopping, travel")


def service(limit: int = 3) -> tuple[ScheduleService, InMemoryScheduleStore, InMemoryScheduler, Launcher]:
    store, scheduler, launcher = InMemoryScheduleStore(), InMemoryScheduler(), Launcher()
    built = ScheduleService(
        store=store,
        scheduler=scheduler,
        capabilities=lambda: ["shopping", "travel"],
        choose_capability=choose,
        submit=launcher.submit,
        check=launcher.check,
        limit=limit,
        minimum_interval=MINIMUM,
        now=lambda: NOW,
    )
    return built, store, scheduler, launcher


def fire(built: ScheduleService, user: str, schedule_id: str, at: str = "2026-03-28T08:00:00Z") -> dict:
    return built.fire({"kind": USER_SCHEDULE, "user_id": user, "schedule_id": schedule_id, "scheduled_time": at})


# -- expressions ---------------------------------------------------------------------------------------


def test_a_rate_fires_every_interval_after_its_anchor():
    """Given rate(90 minutes) anchored at noon, When its next firings are asked, Then they are 13:30, 15:00."""
    rate = parse_expression("rate(90 minutes)", anchor=NOW)
    assert next_fire_times(rate, NOW, 2) == [NOW + timedelta(minutes=90), NOW + timedelta(minutes=180)]
    assert next_fire_times(rate, NOW + timedelta(minutes=100), 1) == [NOW + timedelta(minutes=180)]


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("rate(0 minutes)", "at least 1"),
        ("rate(99999999999 days)", "at most 366 days"),
        ("rate(5 weeks)", "minutes, hours or days"),
        ("rate(five minutes)", "whole number"),
        ("rate(5)", "a number and a unit"),
        ("at(2026-04-01T08:00:00)", "one-time"),
        ("0 8 * * ? *", "cron(<6 fields>) or rate"),
        ("cron(0 8 * * MON *)", "exactly one of day-of-month and day-of-week"),
        ("cron(0 25 ? * * *)", "hours: 25 is outside 0-23"),
    ],
)
def test_a_bad_expression_is_refused_with_what_is_wrong(expression, says):
    """Given a malformed expression, When it is checked, Then the refusal names what is wrong and no firings."""
    with pytest.raises(ScheduleRejected) as refused:
        check_expression(expression, "UTC", now=NOW, minimum_interval=MINIMUM)
    assert says in str(refused.value) and refused.value.kind == "invalid_expression"
    assert refused.value.next_fire_times is None


def test_a_too_frequent_expression_says_when_it_would_have_fired():
    """Given a cron firing at :00 and :05, When it is checked against 15 minutes, Then the refusal names the
    closest firings and lists the next ones."""
    with pytest.raises(ScheduleRejected) as refused:
        check_expression("cron(0,5 8 ? * MON-FRI *)", "Europe/Paris", now=NOW, minimum_interval=MINIMUM)
    assert refused.value.kind == "too_frequent" and "5 minutes apart" in str(refused.value)
    assert refused.value.next_fire_times[:2] == ["2026-03-30T06:00:00Z", "2026-03-30T06:05:00Z"]


def test_an_expression_that_never_fires_again_and_an_unknown_zone_are_refused():
    """Given a cron whose year is past, or an unknown zone, When checked, Then each is refused by name."""
    with pytest.raises(ScheduleRejected, match="does not fire in the 4 years") as past:
        check_expression("cron(0 8 1 1 ? 2020)", "UTC", now=NOW, minimum_interval=MINIMUM)
    assert past.value.next_fire_times == []
    with pytest.raises(ScheduleRejected, match="unknown time zone") as zone:
        check_expression("rate(1 hour)", "Mars/Olympus", now=NOW, minimum_interval=MINIMUM)
    assert zone.value.field == "timezone"


def test_a_daylight_saving_gap_that_brings_two_firings_closer_is_seen():
    """Given hours 1 and 3 in Paris (2 hours apart, but 1 hour on the night clocks go forward), When checked
    against 90 minutes on the eve of the change, Then it is refused."""
    with pytest.raises(ScheduleRejected, match="1 hour apart"):
        check_expression("cron(0 1,3 ? * * *)", "Europe/Paris", now=NOW, minimum_interval=timedelta(minutes=90))


MINUTES = st.lists(st.integers(0, 59), min_size=1, max_size=4, unique=True)
HOURS = st.lists(st.integers(0, 23), min_size=1, max_size=4, unique=True)
ZONES = st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"])


@settings(max_examples=60, deadline=None)
@given(minutes=MINUTES, hours=HOURS, timezone=ZONES, minimum=st.integers(1, 240), rate=st.integers(1, 300))
def test_an_accepted_schedule_never_fires_closer_than_the_minimum(minutes, hours, timezone, minimum, rate):
    """For all crons and rates and zones: if the check accepts the expression, none of its next checked
    firings (daylight-saving changes included) are closer together than the minimum interval."""
    floor = timedelta(minutes=minimum)
    cron = f"cron({','.join(map(str, minutes))} {','.join(map(str, hours))} ? * * *)"
    for expression in (cron, f"rate({rate} minutes)"):
        try:
            upcoming = check_expression(expression, timezone, now=NOW, minimum_interval=floor)
        except ScheduleRejected as refused:
            assert refused.kind == "too_frequent"
            continue
        firings = next_fire_times(parse_expression(expression, anchor=NOW), NOW, CHECKED_FIRINGS + 1, timezone)
        assert firings == upcoming
        assert all(b - a >= floor for a, b in zip(firings, firings[1:], strict=False))


def test_a_rate_parses_singular_and_plural_units():
    """Given rate(1 day) and rate(2 hours), When parsed, Then their intervals are a day and two hours."""
    assert parse_rate("rate(1 day)").interval == timedelta(days=1)
    assert parse_rate("rate(2 hours)").interval == timedelta(hours=2)


# -- create, list, pause, resume, delete ----------------------------------------------------------------


def test_a_schedule_is_stored_and_scheduled_with_its_next_firings():
    """Given alice, When she creates a daily 8:00 schedule in Paris, Then it is stored, a Scheduler
    schedule of its id invokes the schedule function with her id, and its view shows firings in UTC and Paris."""
    built, store, scheduler, _ = service()
    record = built.create("alice", expression="cron(0 8 ? * * *)", timezone="Europe/Paris", goal="a laptop deal")
    assert store.list("alice") == [record]
    entry = scheduler.entries[record.schedule_id]
    assert entry.enabled and entry.timezone == "Europe/Paris"
    assert entry.input == {
        "kind": USER_SCHEDULE,
        "user_id": "alice",
        "schedule_id": record.schedule_id,
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }
    view = built.view(record)
    assert view["next_fire_times"][0] == {"utc": "2026-03-28T07:00:00Z", "local": "2026-03-28T08:00:00+01:00"}
    # after the change to summer time, 8:00 in Paris is 6:00 UTC
    assert view["next_fire_times"][1] == {"utc": "2026-03-29T06:00:00Z", "local": "2026-03-29T08:00:00+02:00"}
    assert "user_id" not in view


def test_a_refused_request_keeps_nothing_and_says_when_a_valid_expression_would_fire():
    """Given a valid expression but an unknown capability, a goal no capability fits, or an empty goal,
    When created, Then it is refused by field, with the next firings, and nothing is stored or scheduled."""
    built, store, scheduler, _ = service()
    for fields, field in (
        ({"capability": "poetry", "goal": "a laptop"}, "capability"),
        ({"goal": "write me a sonnet"}, "capability"),
        ({"goal": "   "}, "goal"),
        ({"goal": "a laptop", "context": {"blob": "x" * 20_000}}, "context"),
    ):
        with pytest.raises(ScheduleRejected) as refused:
            built.create("alice", expression="rate(1 day)", **fields)
        assert refused.value.field == field
        assert refused.value.next_fire_times == ["2026-03-28T12:00:00Z", "2026-03-29T12:00:00Z"] + [
            f"2026-03-{d}T12:00:00Z" for d in (30, 31)
        ] + ["2026-04-01T12:00:00Z"]
    assert store.list("alice") == [] and scheduler.entries == {}


def test_a_schedule_whose_missions_could_never_start_is_refused_when_it_is_made():
    """Given a context the launcher refuses (a path outside the allowed roots), When created, Then it is
    refused with the launcher's reason and the next firings, checked as the user's own request, and
    nothing is kept; with `auto`, the capability chosen from the goal is the one checked."""
    built, store, scheduler, launcher = service()
    with pytest.raises(ScheduleRejected, match="outside the allowed roots") as refused:
        built.create("alice", expression="rate(1 day)", goal="a laptop", context={"repo": "/etc"})
    assert (refused.value.field, refused.value.kind) == ("context", "request_refused")
    assert refused.value.next_fire_times and store.list("alice") == [] and scheduler.entries == {}
    (checked,) = launcher.checked
    assert (checked.user_id, checked.capability, checked.trigger.value) == ("alice", "shopping", "schedule")
    assert launcher.requests == []  # checked, never started


def test_the_per_user_limit_is_a_conflict_and_another_user_is_not_counted():
    """Given a limit of 2 and alice with 2 schedules, When she creates a third, Then ScheduleLimitReached and
    nothing is scheduled; bob still may create his."""
    built, _, scheduler, _ = service(limit=2)
    for _ in range(2):
        built.create("alice", expression="rate(1 day)", goal="a laptop")
    with pytest.raises(ScheduleLimitReached, match="delete one"):
        built.create("alice", expression="rate(1 day)", goal="a laptop")
    assert len(scheduler.entries) == 2
    built.create("bob", expression="rate(1 day)", goal="a laptop")


def test_when_the_scheduler_fails_the_stored_record_is_removed_again():
    """Given a Scheduler that refuses, When alice creates a schedule, Then DependencyUnavailable and no
    record is left (nor a place in her count)."""
    built, store, scheduler, _ = service(limit=1)
    scheduler.failing.add("create")
    with pytest.raises(DependencyUnavailable):
        built.create("alice", expression="rate(1 day)", goal="a laptop")
    assert store.list("alice") == [] and scheduler.entries == {}
    scheduler.failing.clear()
    built.create("alice", expression="rate(1 day)", goal="a laptop")  # her one place is free


def test_when_the_table_fails_nothing_is_scheduled():
    """Given a schedules table that fails, When alice creates a schedule, Then the Scheduler was never asked."""
    built, store, scheduler, _ = service()
    store.failing.add("create")
    with pytest.raises(DependencyUnavailable):
        built.create("alice", expression="rate(1 day)", goal="a laptop")
    assert scheduler.entries == {}


def test_pause_and_resume_change_the_record_and_the_scheduler_state_or_neither():
    """Given a schedule, When paused, Then the record and the Scheduler schedule are paused (DISABLED); When
    resuming while the Scheduler fails, Then it stays paused in both; When it recovers, both are enabled."""
    built, store, scheduler, _ = service()
    record = built.create("alice", expression="rate(1 day)", goal="a laptop")
    paused = built.pause("alice", record.schedule_id)
    assert paused.state == "paused" and not scheduler.entries[record.schedule_id].enabled
    assert built.view(paused)["next_fire_times"] == []
    assert built.pause("alice", record.schedule_id).state == "paused"  # again: unchanged
    scheduler.failing.add("update")
    with pytest.raises(DependencyUnavailable):
        built.resume("alice", record.schedule_id)
    assert store.get("alice", record.schedule_id).state == "paused"
    assert not scheduler.entries[record.schedule_id].enabled
    scheduler.failing.clear()
    assert built.resume("alice", record.schedule_id).state == "enabled"
    assert scheduler.entries[record.schedule_id].enabled


def test_delete_removes_both_or_neither_and_another_users_schedule_is_not_found():
    """Given alice's schedule, When bob reads, pauses or deletes it, Then NotFound; When the table fails
    during her delete, Then the Scheduler schedule is put back; When it works, both are gone."""
    built, store, scheduler, _ = service()
    record = built.create("alice", expression="rate(1 day)", goal="a laptop")
    for attempt in (built.get, built.pause, built.delete):
        with pytest.raises(NotFound):
            attempt("bob", record.schedule_id)
    store.failing.add("delete")
    with pytest.raises(DependencyUnavailable):
        built.delete("alice", record.schedule_id)
    assert record.schedule_id in scheduler.entries and store.list("alice") == [record]
    store.failing.clear()
    built.delete("alice", record.schedule_id)
    assert scheduler.entries == {} and store.list("alice") == []
    with pytest.raises(NotFound):
        built.delete("alice", record.schedule_id)


# -- firing ---------------------------------------------------------------------------------------------


def test_a_firing_starts_one_mission_through_the_launcher_even_when_delivered_twice():
    """Given an auto schedule, When it fires and the same firing is delivered again, Then the launcher gets
    the same idempotency key twice (one mission), the capability chosen from the goal, and both are kept."""
    built, store, _, launcher = service()
    record = built.create("alice", expression="rate(1 day)", goal="a laptop under 900", context={"budget": 900})
    first, again = fire(built, "alice", record.schedule_id), fire(built, "alice", record.schedule_id)
    assert first["outcome"] == "started" and again["outcome"] == "duplicate"
    assert first["mission_id"] == again["mission_id"]
    request = launcher.requests[0]
    assert request.capability == "shopping" and request.user_id == "alice" and request.trigger == "schedule"
    assert request.idempotency_key == f"user-schedule:{record.schedule_id}:2026-03-28T08:00:00Z"
    assert request.context["budget"] == 900 and request.context["trigger"]["schedule_id"] == record.schedule_id
    assert [f.outcome for f in store.get("alice", record.schedule_id).firings] == ["duplicate"]  # one per time


def test_a_paused_or_deleted_schedule_starts_nothing_and_says_why():
    """Given a paused schedule, When it fires, Then nothing starts and the firing is kept with the reason;
    Given a deleted one, When it fires, Then nothing starts and nothing is written back."""
    built, store, _, launcher = service()
    record = built.create("alice", expression="rate(1 day)", goal="a laptop")
    built.pause("alice", record.schedule_id)
    assert fire(built, "alice", record.schedule_id)["reason"] == "the schedule is paused"
    (kept,) = store.get("alice", record.schedule_id).firings
    assert kept.outcome == "skipped" and kept.reason == "the schedule is paused"
    built.delete("alice", record.schedule_id)
    assert fire(built, "alice", record.schedule_id) == {
        "schedule_id": record.schedule_id,
        "scheduled_time": "2026-03-28T08:00:00Z",
        "outcome": "skipped",
        "reason": "the schedule was deleted",
    }
    assert launcher.requests == [] and store.list("alice") == []


def test_a_firing_whose_goal_cannot_run_is_rejected_with_the_reason_and_only_the_last_firings_are_kept():
    """Given a schedule whose missions the launcher refuses, When it fires many times, Then each is recorded as
    rejected with the launcher's reason, and only the last KEPT_FIRINGS are kept."""
    built, store, _, launcher = service()
    record = built.create("alice", expression="rate(1 day)", goal="a laptop", capability="shopping")
    launcher.refuse = "the repository is gone"
    for day in range(1, KEPT_FIRINGS + 3):
        fire(built, "alice", record.schedule_id, at=f"2026-04-{day:02d}T08:00:00Z")
    firings = store.get("alice", record.schedule_id).firings
    assert len(firings) == KEPT_FIRINGS and firings[-1].scheduled_time == f"2026-04-{KEPT_FIRINGS + 2:02d}T08:00:00Z"
    assert {f.outcome for f in firings} == {"rejected"} and firings[0].reason == "the repository is gone"


def test_export_and_erase_cover_the_records_and_the_scheduler_schedules():
    """Given alice and bob with schedules, When alice's are exported then erased, Then the export holds hers,
    the erasure deletes her Scheduler schedules and records, and bob's are untouched; a Scheduler failure
    leaves her records, so erasing again finishes it."""
    built, store, scheduler, _ = service()
    mine = [built.create("alice", expression="rate(1 day)", goal="a laptop") for _ in range(2)]
    bobs = built.create("bob", expression="rate(1 day)", goal="a laptop")
    exported = list(built.export("alice", []))
    assert sorted((kind, data["schedule_id"]) for kind, data in exported) == sorted(
        ("schedule", r.schedule_id) for r in mine
    )
    scheduler.failing.add("delete")
    with pytest.raises(DependencyUnavailable):
        built.erase("alice", [])
    assert len(store.list("alice")) == 2
    scheduler.failing.clear()
    assert built.erase("alice", []) == 2
    assert store.list("alice") == [] and set(scheduler.entries) == {bobs.schedule_id}
