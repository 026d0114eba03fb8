"""How the DynamoDB event store lays a timeline out (moto): a batch is one item, compressed, placed by a
conditional put after the last item (no counter item); big batches go in parts; timelines written one event
an item are read and appended to. What the timeline means is the conformance suite's
(tests/conformance/test_event_store_conformance.py); this is what it costs."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from missions.adapters.dynamodb.events import DynamoEventStore
from missions.adapters.dynamodb.tables import table_definition
from missions.core.cost.infrastructure import item_size, write_units
from missions.core.mission.events import Event, EventType
from missions.core.specs import EVENTS
from missions.ports.events import event_position
from tests.support.aws import SerializedClient, use_fake_aws

TABLE = "test-events"


class CallLog:
    """A client that records which operations the store calls (and lets them through)."""

    def __init__(self, client: Any):
        self._client = client
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attribute(*args, **kwargs)

        return call


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    use_fake_aws(monkeypatch)
    with mock_aws():
        raw = boto3.client("dynamodb", region_name="us-east-1")
        raw.create_table(**table_definition(EVENTS, TABLE))
        yield SerializedClient(raw)


def items(client: Any, mission_id: str) -> list[dict[str, Any]]:
    return client.query(
        TableName=TABLE,
        KeyConditionExpression="mission_id = :m",
        ExpressionAttributeValues={":m": {"S": mission_id}},
        ConsistentRead=True,
    )["Items"]


def stage_events(mission_id: str, count: int, stage: str = "traverser") -> list[Event]:
    """What a tool-using stage emits: a start, tool calls with their results, an end."""
    return [
        Event(
            type=EventType.TOOL_COMPLETED,
            mission_id=mission_id,
            stage=stage,
            payload={"tool": "grep", "args": {"pattern": f"max_agent_hops{n}"}, "result": f"shared/x.py:{n}: hit"},
        )
        for n in range(count)
    ]


def test_a_stages_events_are_one_small_item_written_by_one_put(client: Any) -> None:
    # Given a store that logs its calls, and a stage's 27 events (~6 KB as JSON)
    log = CallLog(client)
    store = DynamoEventStore(TABLE, client=log, ttl_seconds=3600)
    events = stage_events("m1", 27)
    # When they are appended
    store.append("m1", "0004-traverser", events)
    # Then they are one item, whose one write costs a single unit (compressed), with its expiry
    (item,) = items(client, "m1")
    assert item["position"] == {"S": "e000000000001"} and item["batch_id"] == {"S": "0004-traverser"}
    assert write_units(item_size(item)) == 1
    assert "expires_at" in item
    # and the append read the last item and put its batch after it: no counter item, nothing else
    assert log.calls == Counter({"query": 1, "put_item": 1})


def test_a_store_that_wrote_a_missions_last_batch_appends_the_next_without_a_read(client: Any) -> None:
    # Given a store that appended a mission's first stage
    log = CallLog(client)
    store = DynamoEventStore(TABLE, client=log)
    store.append("m1", "0001-a", stage_events("m1", 3, "a"))
    log.calls.clear()
    # When the same store appends the next stage (a warm function)
    store.append("m1", "0002-b", stage_events("m1", 3, "b"))
    # Then it put the batch after the one it remembers, and read nothing
    assert log.calls == Counter({"put_item": 1})
    assert [item["position"]["S"] for item in items(client, "m1")] == ["e000000000001", "e000000000002"]
    # and a retry of that batch still rewrites it in place
    store.append("m1", "0002-b", stage_events("m1", 2, "b"))
    assert [item["batch_id"]["S"] for item in items(client, "m1")] == ["0001-a", "0002-b"]
    assert [e.stage for e in store.read("m1")[0]] == ["a"] * 3 + ["b"] * 2


def test_a_store_whose_memory_went_stale_loses_its_put_reads_and_places_after(client: Any) -> None:
    # Given two stores (two functions) and a mission whose batch the first remembers
    first, second = DynamoEventStore(TABLE, client=client), DynamoEventStore(TABLE, client=client)
    first.append("m1", "0001-a", stage_events("m1", 1, "a"))
    # When the other appends, then the first appends again from its stale memory
    second.append("m1", "answer-1", stage_events("m1", 1, "answer"))
    first.append("m1", "0002-b", stage_events("m1", 1, "b"))
    # Then no batch was overwritten: each has its own place, in the order they were written
    assert [item["batch_id"]["S"] for item in items(client, "m1")] == ["0001-a", "answer-1", "0002-b"]
    assert [e.stage for e in first.read("m1")[0]] == ["a", "answer", "b"]


def test_a_batch_too_big_for_an_item_goes_in_parts_under_its_number(client: Any) -> None:
    # Given parts of at most 1 KB, and a batch of 30 events that do not compress to that
    store = DynamoEventStore(TABLE, client=client)
    store.PART_BYTES = 1024
    noise = ["".join(hashlib.sha256(f"{n}-{k}".encode()).hexdigest() for k in range(8)) for n in range(30)]
    events = [Event(type=EventType.TOOL_COMPLETED, mission_id="m1", payload={"out": text}) for text in noise]
    # When it is appended, then a stage after it
    store.append("m1", "0001-big", events)
    store.append("m1", "0002-next", stage_events("m1", 1))
    # Then its parts follow its first item, before the next batch, each within the limit
    positions = [i["position"]["S"] for i in items(client, "m1")]
    assert len(positions) > 3 and positions[0] == "e000000000001" and positions[-1] == "e000000000002"
    assert all(p.startswith("e000000000001+") for p in positions[1:-1])
    assert all(len(i["events"]["B"]) <= 1024 for i in items(client, "m1"))
    # and it reads as one batch
    read, _ = store.read("m1", limit=100)
    assert [e.position for e in read] == [event_position(1, n) for n in range(30)] + [event_position(2, 0)]
    # When it is retried with one event / Then its other parts are gone
    store.append("m1", "0002-next", stage_events("m1", 1))
    store.append("m1", "0003-retried", stage_events("m1", 1))
    store.append("m1", "0003-retried", stage_events("m1", 1, stage="again"))
    assert [i["position"]["S"] for i in items(client, "m1")][-2:] == ["e000000000002", "e000000000003"]


def test_a_timeline_written_one_event_an_item_is_read_and_appended_to(client: Any) -> None:
    # Given a mission whose events were written one an item with a counter item, before batches
    legacy = [
        {"mission_id": {"S": "m1"}, "position": {"S": "c"}, "top_seq": {"N": "2"}, "batch_id": {"S": "0001-plan"}},
        *(
            {
                "mission_id": {"S": "m1"},
                "position": {"S": f"e00000000000{n}"},
                "type": {"S": "agent_completed"},
                "stage": {"S": "plan"},
                "at": {"S": "2026-01-01T00:00:00.000+00:00"},
                "payload": {"M": {"n": {"N": str(n)}}},
            }
            for n in (1, 2)
        ),
    ]
    for item in legacy:
        client.put_item(TableName=TABLE, Item=item)
    store = DynamoEventStore(TABLE, client=client)
    # When the next stage appends its batch
    store.append("m1", "0002-analyze", stage_events("m1", 2))
    # Then the old events read as batches of one, and the new batch comes after them
    events, _ = store.read("m1")
    assert [e.position for e in events] == [
        event_position(1, 0),
        event_position(2, 0),
        event_position(3, 0),
        event_position(3, 1),
    ]
    assert [e.payload.get("n") for e in events[:2]] == [1, 2]
    # and a client holding an old cursor resumes after its event
    assert [e.position for e in store.read("m1", after="e000000000001")[0]][0] == event_position(2, 0)


def test_concurrent_writers_never_interleave_or_lose_a_batch(client: Any) -> None:
    # Given four writers appending batches of three events to one mission at once
    store = DynamoEventStore(TABLE, client=client)

    def write(writer: int) -> None:
        for n in range(8):
            store.append("m1", f"w{writer}-{n}", stage_events("m1", 3, stage=f"w{writer}-{n}"))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # When the timeline is read
    events, _ = store.read("m1", limit=1000)
    # Then every batch is there once, whole and in one piece, numbered without a gap
    stages = [e.stage for e in events]
    assert len(events) == 4 * 8 * 3 and len(set(stages)) == 32
    assert all(stages[i : i + 3] == [stages[i]] * 3 for i in range(0, len(stages), 3))
    assert [e.position for e in events[::3]] == [event_position(n, 0) for n in range(1, 33)]
