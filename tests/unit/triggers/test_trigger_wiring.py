"""Trigger declarations -> AWS wiring specs (rules and schedules), and the rules' patterns matching the events they
should on moto's EventBridge.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from missions.core.memory.longterm import MemoryChange
from missions.core.triggers.declared import (
    MemoryTrigger,
    ScheduleTrigger,
)
from missions.core.triggers.specs import memory_change_event, memory_rules, schedule_specs, webhook_rules
from missions.service.triggers.rules import (
    requests_for_event,
)
from missions.service.triggers.webhooks import Delivery, bus_event
from tests.support.aws import use_fake_aws
from tests.support.triggers import CAPABILITIES, capability, memory_event, webhook_event
from tests.unit.triggers.test_trigger_events import ids

AWS_NAME = re.compile(r"^[.\-_A-Za-z0-9]{1,64}$")


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
