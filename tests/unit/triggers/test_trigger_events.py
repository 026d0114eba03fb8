"""Webhook and memory events -> mission requests: which trigger of which capability starts, with which goal and
idempotency key.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from missions.core.memory.longterm import MemoryChange
from missions.core.mission.requests import MissionRequest
from missions.core.triggers.declared import (
    MemoryTrigger,
    Priority,
    TriggerSource,
    WebhookTrigger,
)
from missions.core.triggers.specs import memory_change_event
from missions.service.triggers.rules import (
    condition_holds,
    requests_for_event,
)
from missions.service.triggers.webhooks import Delivery, bus_event
from tests.support.triggers import CAPABILITIES, capability, memory_event, webhook_event


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
            "trigger": {
                "kind": "webhook",
                "source": "github",
                "delivery_id": "d-1",
                "event_type": "issues",
                "name": "triage.github-0",
            },
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
