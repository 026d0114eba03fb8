"""Users' schedules on moto: the DynamoDB store (from the same table spec the stack deploys) and the
EventBridge Scheduler adapter, behaving as the in-memory references the service tests use."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from moto import mock_aws

from missions.adapters.dynamodb.schedules import COUNT_KEY, DynamoScheduleStore
from missions.adapters.dynamodb.tables import table_definition
from missions.adapters.scheduler import EventBridgeScheduler
from missions.core.errors import NotFound, ScheduleLimitReached
from missions.core.specs import SCHEDULES
from missions.core.triggers.schedules import Firing, ScheduleRecord
from missions.ports.schedules import SchedulerEntry

GROUP = "users"
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:missions-schedule"
ROLE = "arn:aws:iam::123456789012:role/scheduler"


@pytest.fixture()
def aws(monkeypatch) -> Iterator[tuple[object, object]]:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**table_definition(SCHEDULES, "schedules"))
        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule_group(Name=GROUP)
        yield dynamodb, scheduler


def record(user: str, n: int) -> ScheduleRecord:
    return ScheduleRecord(schedule_id=f"s_{n:020x}", user_id=user, expression="rate(1 day)", goal="a laptop")


def test_the_table_keeps_each_users_schedules_their_count_and_their_firings(aws):
    """Given the schedules table, When alice creates, changes, fires and deletes schedules, Then each read sees
    it, her count frees a place on delete, and bob's partition is his own."""
    dynamodb, _ = aws
    store = DynamoScheduleStore("schedules", dynamodb)
    first, second = record("alice", 1), record("alice", 2)
    store.create(first, limit=2)
    store.create(second, limit=2)
    store.create(record("bob", 3), limit=2)
    with pytest.raises(ScheduleLimitReached):
        store.create(record("alice", 4), limit=2)
    assert [r.schedule_id for r in store.list("alice")] == [first.schedule_id, second.schedule_id]
    assert store.set_state("alice", first.schedule_id, "paused").state == "paused"
    store.record_firing("alice", first.schedule_id, Firing(scheduled_time="2026-01-01T08:00:00Z", outcome="skipped"))
    assert store.get("alice", first.schedule_id).firings[0].outcome == "skipped"
    with pytest.raises(NotFound):
        store.get("bob", first.schedule_id)
    with pytest.raises(NotFound):
        store.get("alice", COUNT_KEY)
    assert store.delete("alice", first.schedule_id) and not store.delete("alice", first.schedule_id)
    with pytest.raises(NotFound):  # a firing never brings a deleted schedule back
        store.record_firing(
            "alice", first.schedule_id, Firing(scheduled_time="2026-01-02T08:00:00Z", outcome="started")
        )
    store.create(record("alice", 5), limit=2)  # the deleted one's place
    assert store.delete_all("alice") == 3  # two schedules and the count
    assert store.list("alice") == [] and len(store.list("bob")) == 1


def test_concurrent_creates_never_pass_the_limit(aws):
    """Given a limit of 3, When 8 creates of one user race, Then exactly 3 are stored."""
    dynamodb, _ = aws
    store = DynamoScheduleStore("schedules", dynamodb)

    def create(n: int) -> bool:
        try:
            store.create(record("alice", n), limit=3)
        except ScheduleLimitReached:
            return False
        return True

    with ThreadPoolExecutor(4) as pool:
        assert sum(pool.map(create, range(8))) == 3
    assert len(store.list("alice")) == 3


def test_the_scheduler_adapter_creates_disables_and_deletes_schedules_in_the_group(aws):
    """Given the users' group, When a schedule is created, disabled and deleted, Then moto's Scheduler holds
    exactly that: the function as target with the role, the input as JSON, the state; deleting twice is fine."""
    _, client = aws
    scheduler = EventBridgeScheduler(group=GROUP, target_arn=TARGET, role_arn=ROLE, client=client)
    entry = SchedulerEntry(name="s_1", expression="cron(0 8 ? * * *)", timezone="Europe/Paris", input={"a": 1})
    scheduler.create(entry)
    found = client.get_schedule(GroupName=GROUP, Name="s_1")
    assert found["Target"]["Arn"] == TARGET and found["Target"]["RoleArn"] == ROLE
    assert json.loads(found["Target"]["Input"]) == {"a": 1} and found["State"] == "ENABLED"
    assert found["ScheduleExpressionTimezone"] == "Europe/Paris"
    scheduler.update(SchedulerEntry(**{**entry.__dict__, "enabled": False}))
    assert client.get_schedule(GroupName=GROUP, Name="s_1")["State"] == "DISABLED"
    assert scheduler.delete("s_1") and not scheduler.delete("s_1")
    with pytest.raises(NotFound):
        scheduler.update(entry)
    assert client.list_schedules(GroupName=GROUP)["Schedules"] == []
