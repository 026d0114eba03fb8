"""The dispatch store contract, for every backend: in memory, and DynamoDB in moto.

A backend conforms when it behaves exactly like `InMemoryDispatchStore`: queues ordered by
priority, deadline, arrival; claims that respect the limit, are idempotent for a mission that
already holds a slot, and succeed only once per entry; idempotent releases.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from missions.adapters.memory.dispatch import InMemoryDispatchStore
from missions.core.mission.requests import MissionRequest
from missions.core.specs import DISPATCH
from missions.core.triggers.declared import Priority
from missions.ports.dispatch import NO_DEADLINE, Claim, QueueEntry
from missions.service.dispatch import deadline_key

REGION = "us-east-1"


@contextlib.contextmanager
def dispatch_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The dispatch table in a fresh moto account: its client."""
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.tables import table_definition

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(**table_definition(DISPATCH, "test-dispatch"))
        yield client


@pytest.fixture(params=["memory", "dynamodb"])
def store(request, monkeypatch):
    if request.param == "memory":
        yield InMemoryDispatchStore()
        return
    from missions.adapters.dynamodb.dispatch import DynamoDispatchStore

    with dispatch_table(monkeypatch) as client:
        yield DynamoDispatchStore("test-dispatch", client=client)


def entry(
    mission_id: str,
    priority: str = "medium",
    deadline: str | None = None,
    arrival: int = 1,
    user: str = "u1",
    **request: object,
) -> QueueEntry:
    return QueueEntry(
        user_id=user,
        mission_id=mission_id,
        rank=Priority(priority).rank,
        deadline=deadline_key(deadline),
        arrival=arrival,
        request=MissionRequest(capability="code_qa", goal="g", user_id=user, mission_id=mission_id, **request),
    )


def ids(entries: list[QueueEntry]) -> list[str]:
    return [e.mission_id for e in entries]


# --------------------------------------------------------------------------- queue order


def test_empty_queue(store):
    assert store.front("u1", 2) == []
    assert store.queued("u1") == []
    assert store.running("u1") == set()


def test_queue_orders_by_priority_then_deadline_then_arrival(store):
    for e in (
        entry("low", "low", arrival=1),
        entry("med-late-deadline", deadline="2030-01-02T00:00:00+00:00", arrival=2),
        entry("med-none-first", arrival=3),
        entry("urgent", "urgent", arrival=9),
        entry("med-early-deadline", deadline="2030-01-01T00:00:00Z", arrival=8),
        entry("med-none-second", arrival=4),
        entry("high", "high", arrival=7),
        # 2030-01-01T01:30+02:00 is 23:30 UTC the day before: earlier than the Z deadline above
        entry("med-offset-deadline", deadline="2030-01-01T01:30:00+02:00", arrival=10),
    ):
        store.enqueue(e)
    assert ids(store.queued("u1")) == [
        "urgent",
        "high",
        "med-offset-deadline",
        "med-early-deadline",
        "med-late-deadline",
        "med-none-first",
        "med-none-second",
        "low",
    ]
    assert ids(store.front("u1", 1)) == ["urgent"]
    assert ids(store.front("u1", 3)) == ["urgent", "high", "med-offset-deadline"]


def test_entries_round_trip(store):
    e = entry("m1", "high", deadline="2030-05-01T12:00:00", arrival=123, context={"repo": "x", "n": [1, 2.5]})
    store.enqueue(e)
    assert store.front("u1", 2) == [e]
    assert store.queued("u1") == [e]
    assert e.deadline == "2030-05-01T12:00:00.000000Z"
    assert entry("m2").deadline == NO_DEADLINE


def test_enqueue_is_idempotent_and_users_are_separate(store):
    store.enqueue(entry("m1"))
    store.enqueue(entry("m1"))
    store.enqueue(entry("m9", user="u2"))
    assert ids(store.queued("u1")) == ["m1"]
    assert ids(store.queued("u2")) == ["m9"]


# --------------------------------------------------------------------------- claims


def test_claim_takes_the_entry_and_a_slot(store):
    e = entry("m1")
    store.enqueue(e)
    assert store.claim(e, 3) is Claim.CLAIMED
    assert store.queued("u1") == []
    assert store.running("u1") == {"m1"}


def test_claim_respects_the_limit(store):
    entries = [entry(f"m{i}", arrival=i) for i in range(5)]
    for e in entries:
        store.enqueue(e)
    assert [store.claim(e, 3) for e in entries] == [Claim.CLAIMED] * 3 + [Claim.FULL] * 2
    assert store.running("u1") == {"m0", "m1", "m2"}
    assert ids(store.queued("u1")) == ["m3", "m4"]  # a full claim changes nothing
    assert store.claim(entry("x", user="u2"), 0) is Claim.GONE  # no entry: gone, whatever the limit
    store.enqueue(entry("y", user="u2"))
    assert store.claim(entry("y", user="u2"), 0) is Claim.FULL  # limit 0: nothing starts
    assert store.running("u2") == set()


def test_claim_is_idempotent_for_a_mission_holding_a_slot(store):
    for i in range(3):
        store.enqueue(entry(f"m{i}", arrival=i))
        store.claim(entry(f"m{i}", arrival=i), 3)
    again = entry("m1", arrival=99)  # the same mission queued again: it already holds its slot
    store.enqueue(again)
    assert store.claim(again, 3) is Claim.CLAIMED
    assert store.running("u1") == {"m0", "m1", "m2"}
    assert store.queued("u1") == []


def test_claim_succeeds_only_once(store):
    e = entry("m1")
    store.enqueue(e)
    assert store.claim(e, 3) is Claim.CLAIMED
    assert store.claim(e, 3) is Claim.GONE
    store.release("u1", "m1")
    assert store.claim(e, 3) is Claim.GONE  # a stale head cannot take a slot for a finished mission
    assert store.running("u1") == set()


def test_gone_wins_over_full(store):
    for i in range(2):
        store.enqueue(entry(f"m{i}", arrival=i))
        store.claim(entry(f"m{i}", arrival=i), 2)
    assert store.claim(entry("m0", arrival=0), 2) is Claim.GONE


def test_release_is_idempotent(store):
    for i in range(3):
        store.enqueue(entry(f"m{i}", arrival=i))
        store.claim(entry(f"m{i}", arrival=i), 3)
    store.release("u1", "m1")
    store.release("u1", "m1")
    store.release("u1", "unknown")
    store.release("nobody", "m1")
    assert store.running("u1") == {"m0", "m2"}
    store.release("u1", "m0")
    store.release("u1", "m2")
    assert store.running("u1") == set()
    store.release("u1", "m2")  # releasing from an empty set
    e = entry("m3", arrival=3)
    store.enqueue(e)
    assert store.claim(e, 1) is Claim.CLAIMED  # the emptied set takes new ids
    assert store.running("u1") == {"m3"}


def test_remove_succeeds_only_once(store):
    e = entry("m1")
    store.enqueue(e)
    store.enqueue(entry("m2", arrival=2))
    assert store.remove(e) is True
    assert store.remove(e) is False
    assert ids(store.queued("u1")) == ["m2"]
    assert store.claim(e, 3) is Claim.GONE
    assert store.running("u1") == set()


# --------------------------------------------------------------------------- the journal


def test_a_note_is_kept_until_forgotten(store):
    # Given a request noted before it is recorded
    e = entry("a")
    store.intend(e)
    # Then it is stranded for a reconciler reading after it, and not before
    assert [(item.kind, item.entry) for item in store.stranded(before=2**62)] == [("pending", e)]
    assert store.stranded(before=1) == []
    assert not store.placed(e)
    # When it is forgotten (twice: idempotent), nothing is left
    store.forget(e)
    store.forget(e)
    assert store.stranded(before=2**62) == []


def test_a_claim_is_kept_until_settled(store):
    # Given a queued entry
    e = entry("a")
    store.enqueue(e)
    assert store.placed(e)
    # When it is claimed, it leaves the queue but stays placed, as a claim
    assert store.claim(e, limit=3) is Claim.CLAIMED
    assert store.queued("u1") == [] and store.placed(e)
    assert [(item.kind, item.entry.mission_id) for item in store.stranded(before=2**62)] == [("claimed", "a")]
    # and a second claim of it finds it gone
    assert store.claim(e, limit=3) is Claim.GONE
    # When it is settled (twice: idempotent), it is no longer placed, and its slot is kept
    store.settle(e)
    store.settle(e)
    assert not store.placed(e) and store.stranded(before=2**62) == []
    assert store.running("u1") == {"a"}


def test_a_failed_claim_leaves_no_claim(store):
    store.enqueue(entry("a"))
    store.enqueue(entry("b", arrival=2))
    assert store.claim(entry("a"), limit=1) is Claim.CLAIMED
    assert store.claim(entry("b", arrival=2), limit=1) is Claim.FULL
    assert [item.entry.mission_id for item in store.stranded(before=2**62)] == ["a"]
    assert ids(store.queued("u1")) == ["b"]


def test_stranded_lists_every_user_oldest_first(store):
    for n, user in enumerate(("u1", "u2", "u3", "u1")):
        store.intend(entry(f"m{n}", user=user, arrival=n + 1))
    items = store.stranded(before=2**62)
    assert sorted(item.entry.mission_id for item in items) == ["m0", "m1", "m2", "m3"]
    assert [item.since for item in items] == sorted(item.since for item in items)


def held(mission_id: str, user: str = "u1", arrival: int = 1) -> QueueEntry:
    return entry(mission_id, user=user, arrival=arrival).model_copy(update={"held": "budget"})


def test_a_held_entry_is_placed_but_never_claimed_until_it_is_released(store):
    # Given an entry held for its user's budget, beside one queued
    store.hold(held("h", arrival=1))
    store.enqueue(entry("q", arrival=2))
    # Then the queue shows only the queued one, and the held one is placed (the reconciler leaves it be)
    assert ids(store.queued("u1")) == ["q"] and ids(store.front("u1", 5)) == ["q"]
    assert store.placed(held("h")) and ids(store.held("budget", "u1")) == ["h"]
    # When it is released, it joins the queue in its arrival order, no longer held
    assert store.unhold(held("h")) is True
    assert ids(store.queued("u1")) == ["h", "q"] and store.queued("u1")[0].held is None
    assert store.held("budget") == []
    # and a second release of it finds nothing to move
    assert store.unhold(held("h")) is False
    assert ids(store.queued("u1")) == ["h", "q"]


def test_held_entries_are_listed_per_user_or_for_everyone_and_removed_once(store):
    # Given held entries of two users
    store.hold(held("a2", "alice", arrival=2))
    store.hold(held("a1", "alice", arrival=1))
    store.hold(held("b1", "bob", arrival=3))
    # Then each user's come in queue order, everyone's grouped by user
    assert ids(store.held("budget", "alice")) == ["a1", "a2"]
    assert ids(store.held("budget")) == ["a1", "a2", "b1"]
    assert store.held("other") == []
    # When one is cancelled, only the first removal wins, and it is gone
    assert store.remove(held("b1", "bob", arrival=3)) is True
    assert store.remove(held("b1", "bob", arrival=3)) is False
    assert ids(store.held("budget")) == ["a1", "a2"] and not store.placed(held("b1", "bob", arrival=3))


def test_a_key_has_one_holder_changed_only_from_the_one_expected(store):
    # Given no holder of alice's conversation
    assert store.key_holder("alice", "conversation:c1") is None
    # When a mission takes it, a second taking it as if free is refused
    assert store.take_key("alice", "conversation:c1", "m1", expected=None) is True
    assert store.take_key("alice", "conversation:c1", "m2", expected=None) is False
    # and one that expects a stale holder is refused too; one that expects the holder takes it over
    assert store.take_key("alice", "conversation:c1", "m3", expected="m9") is False
    assert store.take_key("alice", "conversation:c1", "m2", expected="m1") is True
    assert store.key_holder("alice", "conversation:c1") == "m2"
    # Then keys are per user and per key
    assert store.key_holder("bob", "conversation:c1") is None and store.key_holder("alice", "key:k") is None
    # When a mission that does not hold it drops it, nothing changes; the holder's drop frees it once
    assert store.drop_key("alice", "conversation:c1", "m1") is False
    assert store.drop_key("alice", "conversation:c1", "m2") is True
    assert store.drop_key("alice", "conversation:c1", "m2") is False
    assert store.key_holder("alice", "conversation:c1") is None


@pytest.fixture(params=["memory", "dynamodb"])
def records(request, monkeypatch):
    from missions.adapters.memory.flow import InMemoryFlowRecords

    if request.param == "memory":
        yield InMemoryFlowRecords()
        return
    from missions.adapters.dynamodb.flow import DynamoFlowRecords

    with dispatch_table(monkeypatch) as client:
        yield DynamoFlowRecords("test-dispatch", client=client)


def test_a_triggers_decisions_read_back_newest_first_per_user_or_for_everyone(records):
    from missions.ports.flow import TriggerDecision

    made = [
        TriggerDecision(
            trigger="c.t", user_id=user, decision="started", mission_id=f"m{n}", at=f"2026-11-28T10:00:0{n}Z"
        )
        for n, user in enumerate(("ann", "bob", "ann"))
    ]
    for decision in [*made, TriggerDecision(trigger="c.other", user_id="ann", decision="skipped")]:
        records.record(decision)
    assert [d.mission_id for d in records.decisions("c.t")] == ["m2", "m1", "m0"]
    assert [d.mission_id for d in records.decisions("c.t", "ann")] == ["m2", "m0"]
    assert [d.mission_id for d in records.decisions("c.t", limit=1)] == ["m2"]
    assert records.decisions("c.t") == list(reversed(made))


def test_a_throttle_window_admits_up_to_its_limit_once_each(records):
    assert [records.admit("c.t", "k1", 600, 2, expires_at=1) for _ in range(3)] == [True, True, False]
    assert records.admit("c.t", "k2", 600, 2, expires_at=1) and records.admit("c.t", "k1", 660, 2, expires_at=1)


def test_a_debounced_burst_keeps_its_last_event_and_is_taken_once_by_its_version(records):
    # Given a burst's first event: nothing was pending before it
    assert records.debounce("c.t", "k1", {"goal": "first"}, due=100) is None
    # When two more arrive, each pushes the end and reports what was pending
    assert records.debounce("c.t", "k1", {"goal": "second"}, due=110).version == 1
    before = records.debounce("c.t", "k1", {"goal": "third"}, due=120)
    assert before is not None and (before.version, before.request, before.due) == (2, {"goal": "second"}, 110)
    pending = records.pending("c.t", "k1")
    assert pending is not None and (pending.version, pending.request, pending.due) == (3, {"goal": "third"}, 120)
    # Then a take of a stale version changes nothing; the current one takes it once
    assert records.take("c.t", "k1", version=2) is False and records.pending("c.t", "k1") is not None
    assert records.take("c.t", "k1", version=3) is True
    assert records.take("c.t", "k1", version=3) is False and records.pending("c.t", "k1") is None
    # and keys and triggers are apart
    assert records.pending("c.t", "k2") is None and records.debounce("c.other", "k1", {}, due=1) is None
