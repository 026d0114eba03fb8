"""Trigger declarations -> AWS wiring specs, events -> mission requests, and the cron evaluator."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from missions.core.capability.registry import Capability
from missions.core.memory.longterm import MemoryChange
from missions.core.mission.requests import MissionRequest
from missions.core.pipeline.config import AgentConfig, PipelineConfig
from missions.core.triggers.cron import parse_cron
from missions.core.triggers.declared import (
    MemoryTrigger,
    Priority,
    ScheduleTrigger,
    Triggers,
    TriggerSource,
    WebhookTrigger,
)
from missions.core.triggers.specs import ScheduleSpec, memory_change_event, memory_rules, schedule_specs, webhook_rules
from missions.local.clock import LocalScheduleClock
from missions.service.triggers.rules import (
    condition_holds,
    normalize_scheduled_time,
    requests_for_event,
    requests_for_schedule,
)
from missions.service.triggers.webhooks import Delivery, bus_event
from tests.support.aws import use_fake_aws
from tests.support.stages import typed_capability

AWS_NAME = re.compile(r"^[.\-_A-Za-z0-9]{1,64}$")


def capability(name: str, **triggers: Any) -> Capability:
    """A one-stage capability (no LLM, no tools) that only exists to carry triggers."""
    return typed_capability(
        name,
        PipelineConfig(name="p", agents=[AgentConfig(name="only")]),
        description=f"test capability {name}",
        offline_policy=lambda request: {},
        triggers=Triggers(**triggers),
    )


TRIAGE = capability(
    "triage",
    webhooks=[
        WebhookTrigger(
            source="github",
            event_types=["issues", "pull_request"],
            goal_template="Triage {payload.title} ({event.event_type})",
            priority=Priority.HIGH,
            context={"repo": "."},
        ),
        WebhookTrigger(source="github", goal_template="Anything else from github"),
    ],
    memory=[
        MemoryTrigger(id="todo-any", namespace="todos", goal_template="Look at {key}: {kind}"),
        MemoryTrigger(
            id="status-change",
            namespace="todos/work",
            condition="field_changed",
            field="status",
            goal_template="Status of {key} is now {new.status}",
            priority=Priority.URGENT,
        ),
        MemoryTrigger(id="tag-added", namespace="todos", condition="item_added", field="tags", goal_template="Tags"),
    ],
    schedules=[
        ScheduleTrigger(
            id="digest",
            cron="cron(0 8 ? * MON-FRI *)",
            timezone="Europe/Paris",
            users="opted_in",
            goal_template="Morning digest for {user_id} at {scheduled_time}",
        ),
        ScheduleTrigger(id="cleanup", cron="cron(*/15 * * * ? *)", users="all", goal_template="Clean up"),
    ],
)
AUDIT = capability(
    "audit",
    webhooks=[WebhookTrigger(source="stripe", goal_template="Audit {payload.id}", priority=Priority.LOW)],
    schedules=[
        ScheduleTrigger(id="digest", cron="cron(30 6 1 * ? *)", opt_in_namespace="audit_opt_in", goal_template="Audit")
    ],
)
CAPABILITIES = [TRIAGE, AUDIT]


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


def lambda_event(entry: dict[str, Any]) -> dict[str, Any]:
    """A PutEvents entry as EventBridge hands it to a Lambda target."""
    return {
        "version": "0",
        "id": "e-1",
        "detail-type": entry["DetailType"],
        "source": entry["Source"],
        "account": "123456789012",
        "time": "2024-03-29T07:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": json.loads(entry["Detail"]),
    }


def webhook_event(event_type: str, source: str = "github", delivery_id: str = "d-1", **payload: Any) -> dict[str, Any]:
    delivery = Delivery(source, delivery_id, event_type, payload, user_id="u1")
    return lambda_event(bus_event(delivery))


def memory_event(kind: str, old: Any, new: Any, namespace: tuple[str, ...] = ("todos", "work")) -> dict[str, Any]:
    change = MemoryChange(user_id="u2", namespace=list(namespace), key="t1", kind=kind, old=old, new=new)
    return lambda_event(memory_change_event(change))


# -- wiring specs ----------------------------------------------------------------------------


def test_webhook_rules_match_source_and_listed_event_types():
    rules = webhook_rules(CAPABILITIES)
    assert [(r.capability, r.trigger_id) for r in rules] == [
        ("triage", "github-0"),
        ("triage", "github-1"),
        ("audit", "stripe-0"),
    ]
    assert rules[0].event_pattern == {
        "source": ["missions.webhook"],
        "detail-type": ["webhook.github"],
        "detail": {"event_type": ["issues", "pull_request"]},
    }
    assert rules[1].event_pattern == {"source": ["missions.webhook"], "detail-type": ["webhook.github"]}
    assert all(AWS_NAME.match(r.name) for r in rules)
    assert len({r.name for r in rules}) == 3


def test_memory_rules_match_the_namespace_head():
    rules = memory_rules(CAPABILITIES)
    assert [r.trigger_id for r in rules] == ["todo-any", "status-change", "tag-added"]
    assert rules[1].event_pattern == {
        "source": ["missions.memory"],
        "detail-type": ["memory.changed"],
        "detail": {"namespace_head": ["todos"]},
    }
    assert all(AWS_NAME.match(r.name) for r in rules)


def test_schedule_specs_carry_cron_zone_and_input():
    specs = schedule_specs(CAPABILITIES)
    assert [(s.capability, s.schedule_id, s.expression, s.timezone) for s in specs] == [
        ("triage", "digest", "cron(0 8 ? * MON-FRI *)", "Europe/Paris"),
        ("triage", "cleanup", "cron(*/15 * * * ? *)", "UTC"),
        ("audit", "digest", "cron(30 6 1 * ? *)", "UTC"),
    ]
    assert specs[0].input == {
        "capability": "triage",
        "schedule_id": "digest",
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }
    assert specs[0].event("2024-03-29T07:00:00Z")["scheduled_time"] == "2024-03-29T07:00:00Z"
    assert all(AWS_NAME.match(s.name) for s in specs)
    assert len({s.name for s in specs}) == 3


def test_long_or_odd_names_become_valid_and_stay_distinct():
    long_a = capability("a" * 60 + "x", memory=[MemoryTrigger(id="t" * 48, namespace="n", goal_template="g")])
    long_b = capability("a" * 60 + "y", memory=[MemoryTrigger(id="t" * 48, namespace="n", goal_template="g")])
    odd = capability("odd name!", memory=[MemoryTrigger(id="t", namespace="n", goal_template="g")])
    names = [r.name for r in memory_rules([long_a, long_b, odd])]
    assert all(AWS_NAME.match(n) for n in names), names
    assert len(set(names)) == 3


def test_names_that_would_collide_are_refused():
    a = capability("a-b", memory=[MemoryTrigger(id="c", namespace="n", goal_template="g")])
    b = capability("a", memory=[MemoryTrigger(id="b-c", namespace="n", goal_template="g")])
    with pytest.raises(ValueError, match="same AWS name"):
        memory_rules([a, b])


def test_schedule_specs_refuse_a_cron_the_evaluator_rejects_and_unknown_zones():
    bad_cron = capability("c", schedules=[ScheduleTrigger(id="s", cron="cron(0 8 * * MON *)", goal_template="g")])
    with pytest.raises(ValueError, match="exactly one"):
        schedule_specs([bad_cron])
    bad_zone = capability(
        "c", schedules=[ScheduleTrigger(id="s", cron="cron(0 8 * * ? *)", timezone="Mars/Olympus", goal_template="g")]
    )
    with pytest.raises(ValueError, match="time zone"):
        schedule_specs([bad_zone])


# -- webhook events --------------------------------------------------------------------------


def test_a_listed_event_type_starts_the_first_matching_trigger_per_capability():
    # Given an issues delivery from github
    event = webhook_event("issues", title="Crash on start")
    # When turned into requests
    [request] = requests_for_event(event, CAPABILITIES)
    # Then the typed trigger (first match) renders the goal; user, priority, key come from the delivery
    assert request == MissionRequest(
        capability="triage",
        goal="Triage Crash on start (issues)",
        user_id="u1",
        context={
            "repo": ".",
            "trigger": {"kind": "webhook", "source": "github", "delivery_id": "d-1", "event_type": "issues"},
        },
        priority=Priority.HIGH,
        trigger=TriggerSource.WEBHOOK,
        idempotency_key="webhook:github:d-1:triage",
    )


def test_an_unlisted_event_type_falls_to_the_catch_all_trigger():
    [request] = requests_for_event(webhook_event("push"), CAPABILITIES)
    assert (request.goal, request.priority) == ("Anything else from github", Priority.MEDIUM)


def test_a_source_only_one_capability_listens_to():
    [request] = requests_for_event(webhook_event("charge", source="stripe", id="ch_1"), CAPABILITIES)
    assert (request.capability, request.goal, request.idempotency_key) == (
        "audit",
        "Audit ch_1",
        "webhook:stripe:d-1:audit",
    )


def test_an_event_type_filter_without_catch_all_starts_nothing():
    only_issues = capability(
        "only", webhooks=[WebhookTrigger(source="github", event_types=["issues"], goal_template="g")]
    )
    assert requests_for_event(webhook_event("push"), [only_issues]) == []
    assert len(requests_for_event(webhook_event("issues"), [only_issues])) == 1


def test_a_goal_with_only_missing_placeholders_falls_back_to_the_template():
    hollow = capability("hollow", webhooks=[WebhookTrigger(source="github", goal_template="{payload.nothing}")])
    [request] = requests_for_event(webhook_event("push"), [hollow])
    assert request.goal == "{payload.nothing}"


def test_webhook_idempotency_keys_are_stable_and_per_delivery():
    first = requests_for_event(webhook_event("push"), CAPABILITIES)
    again = requests_for_event(webhook_event("push"), CAPABILITIES)
    other = requests_for_event(webhook_event("push", delivery_id="d-2"), CAPABILITIES)
    assert [r.idempotency_key for r in first] == [r.idempotency_key for r in again]
    assert first[0].idempotency_key != other[0].idempotency_key


def test_a_webhook_may_name_the_repository_the_mission_reads_and_nothing_else_leaks_into_the_context():
    # Given a push whose payload names a registered repository (and tries to smuggle a path)
    [request] = requests_for_event(webhook_event("push", repository="r_abc", repo="/etc"), CAPABILITIES)
    # Then the mission's context names that repository (checked against the user when it starts), no path
    assert request.context["repository"] == "r_abc" and "repo" not in request.context
    [plain] = requests_for_event(webhook_event("push"), CAPABILITIES)
    assert "repository" not in plain.context


def test_a_put_events_entry_is_accepted_too():
    entry = bus_event(Delivery("github", "d-9", "issues", {"title": "T"}, "u1"))
    [request] = requests_for_event(entry, CAPABILITIES)
    assert request.idempotency_key == "webhook:github:d-9:triage"


def test_unrelated_events_start_nothing_and_malformed_ones_fail():
    assert requests_for_event({"source": "aws.s3", "detail-type": "x", "detail": {}}, CAPABILITIES) == []
    assert requests_for_event({}, CAPABILITIES) == []
    with pytest.raises(ValueError, match="webhook event"):
        requests_for_event({"source": "missions.webhook", "detail-type": "webhook.github", "detail": {}}, CAPABILITIES)


# -- memory events ---------------------------------------------------------------------------


def ids(requests: list[MissionRequest]) -> list[str]:
    return [r.context["trigger"]["trigger_id"] for r in requests]


def test_memory_any_matches_every_change_in_the_namespace():
    requests = requests_for_event(memory_event("added", None, {"status": "open"}), CAPABILITIES)
    assert ids(requests) == ["todo-any", "status-change"]  # the status field appeared: it changed
    assert requests[0].goal == "Look at t1: added"
    assert requests[0].user_id == "u2"
    assert requests[0].trigger == TriggerSource.MEMORY


def test_memory_field_changed_needs_the_field_to_differ():
    changed = requests_for_event(memory_event("updated", {"status": "open"}, {"status": "done"}), CAPABILITIES)
    same = requests_for_event(memory_event("updated", {"status": "open", "x": 1}, {"status": "open"}), CAPABILITIES)
    assert ids(changed) == ["todo-any", "status-change"]
    assert changed[1].goal == "Status of t1 is now done"
    assert changed[1].priority == Priority.URGENT
    assert ids(same) == ["todo-any"]


def test_memory_field_changed_respects_the_namespace_prefix():
    elsewhere = memory_event("updated", {"status": "a"}, {"status": "b"}, namespace=("todos", "home"))
    assert ids(requests_for_event(elsewhere, CAPABILITIES)) == ["todo-any"]


def test_memory_item_added_needs_a_new_element():
    added = memory_event("updated", {"tags": ["a"]}, {"tags": ["a", "b"]})
    removed = memory_event("updated", {"tags": ["a", "b"]}, {"tags": ["a"]})
    created = memory_event("added", None, {"tags": ["a"]})
    assert ids(requests_for_event(added, CAPABILITIES)) == ["todo-any", "tag-added"]
    assert ids(requests_for_event(removed, CAPABILITIES)) == ["todo-any"]
    assert ids(requests_for_event(created, CAPABILITIES)) == ["todo-any", "tag-added"]


def test_memory_deletions_only_match_any():
    deleted = memory_event("deleted", {"status": "open", "tags": ["a"]}, None)
    assert ids(requests_for_event(deleted, CAPABILITIES)) == ["todo-any"]


def test_memory_conditions_edge_cases():
    def change(kind: str, old: Any, new: Any) -> MemoryChange:
        return MemoryChange(user_id="u", namespace=["n"], key="k", kind=kind, old=old, new=new)

    whole = MemoryTrigger(id="w", namespace="n", condition="field_changed", goal_template="g")
    assert condition_holds(whole, change("updated", 1, 2))
    assert not condition_holds(whole, change("updated", 1, 1))
    assert not condition_holds(whole, change("added", None, 1))
    field = MemoryTrigger(id="f", namespace="n", condition="field_changed", field="s", goal_template="g")
    assert condition_holds(field, change("updated", {}, {"s": 1}))  # appeared
    assert condition_holds(field, change("updated", "text", {"s": 1}))  # old not an object: the field appeared
    assert condition_holds(field, change("added", None, {"s": 1}))  # a new item with the field set
    assert not condition_holds(field, change("added", None, {"t": 1}))  # ...but not without it
    listing = MemoryTrigger(id="l", namespace="n", condition="item_added", goal_template="g")
    assert condition_holds(listing, change("updated", [1], [1, 2]))
    assert not condition_holds(listing, change("updated", [1], "not a list"))


def test_memory_idempotency_keys_follow_trigger_place_and_new_value():
    first = requests_for_event(memory_event("updated", {"status": "open"}, {"status": "done"}), CAPABILITIES)
    again = requests_for_event(memory_event("updated", {"status": "open"}, {"status": "done"}), CAPABILITIES)
    other = requests_for_event(memory_event("updated", {"status": "open"}, {"status": "late"}), CAPABILITIES)
    keys = [r.idempotency_key for r in first]
    assert keys == [r.idempotency_key for r in again]
    assert keys[0].startswith("memory:triage:todo-any:u2:todos/work:t1:")
    assert keys[1].startswith("memory:triage:status-change:u2:todos/work:t1:")
    assert keys[1] != other[1].idempotency_key


def test_memory_change_event_adds_the_namespace_head():
    change = MemoryChange(user_id="u", namespace=["todos", "work"], key="k", kind="added", new={"a": 1})
    entry = memory_change_event(change, event_bus_name="bus")
    assert (entry["Source"], entry["DetailType"], entry["EventBusName"]) == ("missions.memory", "memory.changed", "bus")
    assert json.loads(entry["Detail"]) == {**change.model_dump(mode="json"), "namespace_head": "todos"}


# -- schedules -------------------------------------------------------------------------------


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


# -- cron ------------------------------------------------------------------------------------


def fires(expression: str, start: str, end: str, timezone: str = "UTC") -> list[str]:
    cron = parse_cron(expression)
    begin, finish = (datetime.fromisoformat(t).replace(tzinfo=UTC) for t in (start, end))
    return [t.strftime("%Y-%m-%dT%H:%M") for t in cron.fire_times(begin, finish, timezone)]


def test_cron_every_15_minutes():
    assert fires("cron(*/15 * * * ? *)", "2024-01-01T00:00", "2024-01-01T01:00") == [
        "2024-01-01T00:15",
        "2024-01-01T00:30",
        "2024-01-01T00:45",
        "2024-01-01T01:00",
    ]
    assert fires("cron(5/20 * * * ? *)", "2024-01-01T00:00", "2024-01-01T00:59") == [
        "2024-01-01T00:05",
        "2024-01-01T00:25",
        "2024-01-01T00:45",
    ]


def test_cron_weekdays_at_8_in_paris_across_the_spring_dst_change():
    # Given 8:00 on weekdays in Paris, over the week clocks go forward (Sunday 2024-03-31)
    got = fires("cron(0 8 ? * MON-FRI *)", "2024-03-28T00:00", "2024-04-03T00:00", "Europe/Paris")
    # Then it stays 8:00 local: 07:00 UTC before, 06:00 UTC after, never on the weekend
    assert got == ["2024-03-28T07:00", "2024-03-29T07:00", "2024-04-01T06:00", "2024-04-02T06:00"]


def test_cron_in_the_gap_is_skipped_and_in_the_repeated_hour_fires_once():
    # 02:30 does not exist in Paris on 2024-03-31 and happens twice on 2024-10-27
    assert fires("cron(30 2 * * ? *)", "2024-03-30T00:00", "2024-04-02T00:00", "Europe/Paris") == [
        "2024-03-30T01:30",
        "2024-04-01T00:30",
    ]
    assert fires("cron(30 2 * * ? *)", "2024-10-26T00:00", "2024-10-28T00:00", "Europe/Paris") == [
        "2024-10-26T00:30",
        "2024-10-27T00:30",
    ]


def test_cron_day_of_week_numbers_and_names_agree():
    # EventBridge numbers days 1 = SUN ... 7 = SAT; 2024-01-07 is a Sunday
    window = ("2024-01-01T00:00", "2024-01-15T00:00")
    by_number = fires("cron(0 12 ? * 1,7 *)", *window)
    by_name = fires("cron(0 12 ? * sun,SAT *)", *window)
    assert by_number == by_name == ["2024-01-06T12:00", "2024-01-07T12:00", "2024-01-13T12:00", "2024-01-14T12:00"]
    assert fires("cron(0 0 ? * FRI-MON *)", "2024-01-01T00:00", "2024-01-08T00:00") == [
        "2024-01-05T00:00",
        "2024-01-06T00:00",
        "2024-01-07T00:00",
        "2024-01-08T00:00",
    ]


def test_cron_question_mark_in_either_day_field():
    assert fires("cron(0 9 15 * ? *)", "2024-01-01T00:00", "2024-03-31T00:00") == [
        "2024-01-15T09:00",
        "2024-02-15T09:00",
        "2024-03-15T09:00",
    ]
    assert fires("cron(0 9 ? JAN-FEB 2 2024)", "2024-01-01T00:00", "2024-01-20T00:00") == [
        "2024-01-01T09:00",
        "2024-01-08T09:00",
        "2024-01-15T09:00",
    ]


def test_cron_last_weekday_and_nth_day_forms():
    window = ("2024-02-01T00:00", "2024-03-31T23:59")
    assert fires("cron(0 0 L * ? *)", *window) == ["2024-02-29T00:00", "2024-03-31T00:00"]
    assert fires("cron(0 0 LW * ? *)", *window) == ["2024-02-29T00:00", "2024-03-29T00:00"]
    assert fires("cron(0 0 ? * 6L *)", *window) == ["2024-02-23T00:00", "2024-03-29T00:00"]
    assert fires("cron(0 0 ? * MON#1 *)", *window) == ["2024-02-05T00:00", "2024-03-04T00:00"]
    assert fires("cron(0 0 16W * ? *)", *window) == ["2024-02-16T00:00", "2024-03-15T00:00"]  # 2024-03-16 is a Saturday


def test_cron_year_field_limits_firings():
    assert fires("cron(0 0 1 1 ? 2025)", "2024-01-01T00:00", "2024-12-31T00:00") == []


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 8 * * *)",  # five fields
        "cron(0 8 * * MON *)",  # neither day field is '?'
        "cron(0 8 ? * ? *)",  # both are
        "cron(60 8 * * ? *)",  # minute out of range
        "cron(0 24 * * ? *)",
        "cron(0 8 32 * ? *)",
        "cron(0 8 ? * 8 *)",  # day-of-week is 1-7
        "cron(0 8 ? * 0 *)",
        "cron(0 8 * 13 ? *)",
        "cron(0 8 * FOO ? *)",
        "cron(*/0 8 * * ? *)",  # zero step
        "cron(? 8 * * ? *)",  # '?' in minutes
        "cron(0 8 * * ? 1969)",
        "cron(0,,5 8 * * ? *)",
        "cron(0 8 ? * MON#6 *)",
        "rate(5 minutes)",
    ],
)
def test_invalid_cron_expressions_are_value_errors(expression: str):
    with pytest.raises(ValueError):
        parse_cron(expression)


def test_fire_times_refuse_naive_datetimes_and_windows_over_a_year():
    cron = parse_cron("cron(0 0 * * ? *)")
    with pytest.raises(ValueError):
        next(cron.fire_times(datetime(2024, 1, 1), datetime(2024, 1, 2)))
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        next(cron.fire_times(start, start + timedelta(days=367)))


# -- the local clock -------------------------------------------------------------------------


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


# -- the patterns really match the events (moto's EventBridge) ------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    use_fake_aws(monkeypatch)
    import boto3
    from moto import mock_aws

    with mock_aws():
        yield boto3.client("events", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")


def deploy(events: Any, sqs: Any, rules: list[Any]) -> dict[str, str]:
    """Each rule on a custom bus, targeting its own queue; returns rule name -> queue url."""
    events.create_event_bus(Name="missions")
    queues = {}
    for rule in rules:
        url = sqs.create_queue(QueueName=rule.name.replace(".", "-"))["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name=rule.name, EventBusName="missions", EventPattern=json.dumps(rule.event_pattern))
        events.put_targets(Rule=rule.name, EventBusName="missions", Targets=[{"Id": "q", "Arn": arn}])
        queues[rule.name] = url
    return queues


def received(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def test_webhook_rules_match_exactly_the_bus_events_they_should(aws: Any):
    # Given the webhook rules deployed on a bus
    events, sqs = aws
    rules = webhook_rules(CAPABILITIES)
    queues = deploy(events, sqs, rules)
    typed, catch_all, stripe = (queues[r.name] for r in rules)
    # When an issues delivery and a push delivery from github are put on the bus
    for event_type, delivery_id in (("issues", "d-1"), ("push", "d-2")):
        entry = bus_event(Delivery("github", delivery_id, event_type, {"title": "T"}, "u1"), event_bus_name="missions")
        assert events.put_events(Entries=[entry])["FailedEntryCount"] == 0
    # Then the typed rule got only the issues event, the catch-all both, stripe's none
    assert [e["detail"]["delivery_id"] for e in received(sqs, typed)] == ["d-1"]
    assert sorted(e["detail"]["delivery_id"] for e in received(sqs, catch_all)) == ["d-1", "d-2"]
    assert received(sqs, stripe) == []


def test_memory_rules_match_memory_events_and_the_delivered_event_starts_missions(aws: Any):
    # Given the memory rules deployed
    events, sqs = aws
    rules = memory_rules(CAPABILITIES)
    queues = deploy(events, sqs, rules)
    # When changes in two namespaces are put on the bus
    for namespace in (["todos", "work"], ["notes"]):
        change = MemoryChange(
            user_id="u2", namespace=namespace, key="t1", kind="updated", old={"status": "a"}, new={"status": "b"}
        )
        assert events.put_events(Entries=[memory_change_event(change, "missions")])["FailedEntryCount"] == 0
    # Then only the todos change reaches the rules, and as delivered it starts the right missions
    [delivered] = received(sqs, queues[rules[0].name])
    assert delivered["detail"]["namespace"] == ["todos", "work"]
    assert ids(requests_for_event(delivered, CAPABILITIES)) == ["todo-any", "status-change"]


def test_moto_pattern_matching_agrees_with_requests_for_event():
    from moto.events.models import EventPattern

    [typed, catch_all, stripe] = [EventPattern.load(json.dumps(r.event_pattern)) for r in webhook_rules(CAPABILITIES)]
    issues, push = webhook_event("issues"), webhook_event("push")
    assert (typed.matches_event(issues), typed.matches_event(push)) == (True, False)
    assert (catch_all.matches_event(issues), catch_all.matches_event(push)) == (True, True)
    assert stripe.matches_event(issues) is False
    [memory_rule, *_] = [EventPattern.load(json.dumps(r.event_pattern)) for r in memory_rules(CAPABILITIES)]
    assert memory_rule.matches_event(memory_event("added", None, 1)) is True
    assert memory_rule.matches_event(memory_event("added", None, 1, namespace=("notes",))) is False
