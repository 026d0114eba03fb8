"""Event stores (a mission's timeline), in memory and on DynamoDB in moto: a backend conforms when it behaves
exactly like the in-memory reference adapter."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from missions.core.mission.events import Event, EventType
from missions.core.specs import EVENTS
from missions.ports.events import event_position, parse_position

if TYPE_CHECKING:
    from tests.conformance.conftest import Moto


@dataclass
class Backend:
    name: str
    events: Any


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        from missions.adapters.memory.events import MemoryEventStore

        yield Backend("memory", MemoryEventStore())
        return
    from missions.adapters.dynamodb.events import DynamoEventStore

    aws: Moto = request.getfixturevalue("aws")
    yield Backend("dynamodb", DynamoEventStore(aws.table(EVENTS), client=aws.ddb, ttl_seconds=3600))


def event(mission_id: str, n: int, **payload: Any) -> Event:
    return Event(type=EventType.AGENT_COMPLETED, mission_id=mission_id, stage="plan", payload={"n": n, **payload})


def test_events_append_and_read_in_order(backend):
    # Given two batches of one mission and a batch of another
    backend.events.append("m1", "0001-plan", [event("m1", 0), event("m1", 1, cost_usd=0.015)])
    backend.events.append("m1", "0002-analyze", [event("m1", 2), event("m1", 3), event("m1", 4)])
    backend.events.append("m2", "0001-plan", [event("m2", 99)])
    # When the first mission's timeline is read
    events, cursor = backend.events.read("m1")
    # Then its events come in order, each placed by its batch and its index in the batch
    assert [e.payload["n"] for e in events] == [0, 1, 2, 3, 4]
    assert [e.position for e in events] == [
        event_position(1, 0),
        event_position(1, 1),
        event_position(2, 0),
        event_position(2, 1),
        event_position(2, 2),
    ]
    assert cursor == event_position(2, 2)
    assert all(e.mission_id == "m1" for e in events)
    assert events[1].payload["cost_usd"] == 0.015
    assert events[0].type is EventType.AGENT_COMPLETED


def test_events_read_after_cursor(backend):
    backend.events.append("m1", "0001-plan", [event("m1", 0), event("m1", 1)])
    _, cursor = backend.events.read("m1")
    backend.events.append("m1", "0002-analyze", [event("m1", 2), event("m1", 3)])
    later, cursor2 = backend.events.read("m1", after=cursor)
    assert [e.payload["n"] for e in later] == [2, 3]
    assert cursor2 == event_position(2, 1)
    nothing, cursor3 = backend.events.read("m1", after=cursor2)
    assert nothing == []
    assert cursor3 == cursor2  # unchanged when nothing new
    empty, none_cursor = backend.events.read("unknown")
    assert empty == [] and none_cursor is None


def test_a_limit_cuts_a_batch_and_its_cursor_resumes_inside_it(backend):
    # Given one batch of five events, then another of one
    backend.events.append("m1", "0001-traverse", [event("m1", n) for n in range(5)])
    backend.events.append("m1", "0002-next", [event("m1", 5)])
    # When it is read two events at a time
    first, cursor = backend.events.read("m1", limit=2)
    second, cursor2 = backend.events.read("m1", after=cursor, limit=2)
    rest, cursor3 = backend.events.read("m1", after=cursor2, limit=2)
    # Then each page stops inside the batch, at the cursor of its last event, and the next goes on from there
    assert [e.payload["n"] for e in first] == [0, 1] and cursor == event_position(1, 1)
    assert [e.payload["n"] for e in second] == [2, 3] and cursor2 == event_position(1, 3)
    assert [e.payload["n"] for e in rest] == [4, 5] and cursor3 == event_position(2, 0)
    # and any event's position is a cursor that resumes just after it
    assert [e.payload["n"] for e in backend.events.read("m1", after=first[0].position)[0]] == [1, 2, 3, 4, 5]


def test_a_cursor_that_is_no_position_is_refused(backend):
    backend.events.append("m1", "0001-plan", [event("m1", 0)])
    for bad in ("", "c", "e1", "zzz", "e000000000001.1", "e000000000001.000000x"):
        with pytest.raises(ValueError):
            backend.events.read("m1", after=bad)


def test_a_cursor_without_an_index_names_a_batch_of_one_event(backend):
    # Given a timeline, and a cursor as a timeline of one event an item wrote them ("e<sequence>")
    backend.events.append("m1", "0001-plan", [event("m1", 0)])
    backend.events.append("m1", "0002-next", [event("m1", 1), event("m1", 2)])
    # When it is read after that cursor / Then the batch it names is behind it
    assert [e.payload["n"] for e in backend.events.read("m1", after="e000000000001")[0]] == [1, 2]


def test_events_paginate_without_loss(backend):
    # 60 events over three batches (the middle one crosses a 25-item batch boundary)
    n = 0
    for prefix, count in (("0001-a", 10), ("0002-b", 40), ("0003-c", 10)):
        batch = []
        for _ in range(count):
            batch.append(event("m1", n))
            n += 1
        backend.events.append("m1", prefix, batch)

    seen: list[int] = []
    positions: list[str] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = backend.events.read("m1", after=cursor, limit=7)
        if not page:
            break
        assert len(page) <= 7
        seen += [e.payload["n"] for e in page]
        positions += [e.position for e in page]
        pages += 1
    assert seen == list(range(60))
    assert positions == sorted(positions) and len(set(positions)) == 60
    assert pages == 9  # ceil(60 / 7)


def test_events_reappend_is_idempotent(backend):
    # Given a stage's events appended once
    batch = [event("m1", 0), event("m1", 1), event("m1", 2)]
    backend.events.append("m1", "0001-plan", batch)
    # When the retried stage appends the same batch again
    backend.events.append("m1", "0001-plan", batch)
    # Then the timeline holds them once, where they were
    events, _ = backend.events.read("m1")
    assert [e.payload["n"] for e in events] == [0, 1, 2]
    assert [e.position for e in events] == [event_position(1, 0), event_position(1, 1), event_position(1, 2)]


def test_a_retry_that_writes_fewer_events_leaves_none_of_the_first_try(backend):
    backend.events.append("m1", "0001-plan", [event("m1", 0), event("m1", 1), event("m1", 2)])
    backend.events.append("m1", "0001-plan", [event("m1", 10)])
    backend.events.append("m1", "0002-next", [event("m1", 20)])
    events, _ = backend.events.read("m1")
    assert [e.payload["n"] for e in events] == [10, 20]
    assert [e.position for e in events] == [event_position(1, 0), event_position(2, 0)]


def test_a_retry_that_writes_more_events_keeps_them_before_the_next_batch(backend):
    backend.events.append("m1", "0001-plan", [event("m1", 0)])
    backend.events.append("m1", "0001-plan", [event("m1", 0), event("m1", 1), event("m1", 2)])
    backend.events.append("m1", "0002-next", [event("m1", 3)])
    events, _ = backend.events.read("m1")
    assert [e.payload["n"] for e in events] == [0, 1, 2, 3]


def test_a_reader_inside_a_retried_batch_gets_what_the_retry_added(backend):
    # Given a reader that read a stage's first try to its end
    backend.events.append("m1", "0001-plan", [event("m1", 0), event("m1", 1)])
    _, cursor = backend.events.read("m1")
    # When the retried stage writes its batch again with more events, then the next stage its own
    backend.events.append("m1", "0001-plan", [event("m1", 0), event("m1", 1), event("m1", 2)])
    backend.events.append("m1", "0002-next", [event("m1", 3)])
    # Then the reader resumes with the events it had not seen, none twice
    assert [e.payload["n"] for e in backend.events.read("m1", after=cursor)[0]] == [2, 3]


def test_only_the_last_batch_is_rewritten_by_a_retry(backend):
    # Given a batch that another was appended after
    backend.events.append("m1", "0001-plan", [event("m1", 0)])
    backend.events.append("m1", "answer-i1", [event("m1", 1)])
    # When the first is appended again (a retry long after) / Then it is a new batch, at the end
    backend.events.append("m1", "0001-plan", [event("m1", 2)])
    events, _ = backend.events.read("m1")
    assert [(e.payload["n"], e.position) for e in events] == [
        (0, event_position(1, 0)),
        (1, event_position(2, 0)),
        (2, event_position(3, 0)),
    ]


def test_a_batch_too_big_for_one_item_reads_as_one(backend, monkeypatch):
    # Given items that hold only a few KB (DynamoDB: so a batch of 40 varied events needs several parts)
    if hasattr(backend.events, "PART_BYTES"):
        monkeypatch.setattr(backend.events, "PART_BYTES", 2048)
    noise = [hashlib.sha256(str(n).encode()).hexdigest() * 4 for n in range(40)]  # barely compressible
    backend.events.append("m1", "0001-big", [event("m1", n, text=noise[n]) for n in range(40)])
    backend.events.append("m1", "0002-next", [event("m1", 40)])
    # When it is read whole, and page by page
    events, _ = backend.events.read("m1")
    paged, cursor = [], None
    while page := backend.events.read("m1", after=cursor, limit=3)[0]:
        paged += page
        cursor = page[-1].position
    # Then it is one batch, in order, its cursors resuming inside it whatever part holds them
    assert [e.payload["n"] for e in events] == list(range(41)) and events[0].payload["text"] == noise[0]
    assert [e.position for e in events[:40]] == [event_position(1, n) for n in range(40)]
    assert events[40].position == event_position(2, 0)
    assert [e.position for e in paged] == [e.position for e in events]
    # and a retry with fewer events leaves none of its parts behind
    backend.events.append("m1", "0002-next", [event("m1", 50)])
    backend.events.append("m1", "0003-small", [event("m1", 60)])
    backend.events.append("m1", "0003-small", [event("m1", 61)])
    assert [e.payload["n"] for e in backend.events.read("m1", after=events[39].position)[0]] == [50, 61]


def test_the_store_orders_the_timeline_not_the_writers(backend):
    # Given writers whose batch names sort in no useful order (a cancel, an answer, a stage)
    backend.events.append("m1", "0007-late-stage", [event("m1", 0)])
    backend.events.append("m1", "answer-i_1", [event("m1", 1)])
    backend.events.append("m1", "0001-early-name", [event("m1", 2)])
    backend.events.append("m1", "cancelled", [event("m1", 3)])
    # When a reader follows the timeline with a cursor between appends
    first, cursor = backend.events.read("m1", limit=2)
    backend.events.append("m1", "0000-first-by-name", [event("m1", 4)])
    rest, _ = backend.events.read("m1", after=cursor)
    # Then it sees every event once, in the order they were appended
    assert [e.payload["n"] for e in first + rest] == [0, 1, 2, 3, 4]


def test_an_empty_batch_writes_nothing(backend):
    backend.events.append("m1", "0001-plan", [])
    assert backend.events.read("m1") == ([], None)


BATCHES = st.lists(
    st.tuples(st.integers(min_value=1, max_value=12), st.booleans()),  # a batch's size; whether it is retried
    min_size=1,
    max_size=8,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=BATCHES, limit=st.integers(min_value=1, max_value=15), resume_at=st.integers(min_value=0))
def test_any_cursor_resumes_exactly_after_its_event(backend, batches, limit, resume_at):
    # Given a fresh mission's timeline of batches of random sizes, some retried as they were
    mission_id = f"m-{uuid.uuid4().hex[:8]}"
    written: list[int] = []
    for number, (size, retried) in enumerate(batches):
        batch = [event(mission_id, len(written) + n) for n in range(size)]
        backend.events.append(mission_id, f"{number:04d}", batch)
        if retried:
            backend.events.append(mission_id, f"{number:04d}", batch)
        written += [e.payload["n"] for e in batch]
    # When it is read page by page with a random limit
    pages: list[Event] = []
    cursor = None
    while page := backend.events.read(mission_id, after=cursor, limit=limit)[0]:
        assert len(page) <= limit
        pages += page
        cursor = page[-1].position
    # Then every event comes once, in order, positions increasing as text and as (batch, index)
    assert [e.payload["n"] for e in pages] == written
    positions = [e.position for e in pages]
    assert positions == sorted(positions) == sorted(positions, key=parse_position)
    assert len(set(positions)) == len(positions)
    # and resuming from any event's cursor gives exactly the events after it
    at = resume_at % len(pages)
    after, last = backend.events.read(mission_id, after=positions[at], limit=len(pages))
    assert [e.payload["n"] for e in after] == written[at + 1 :]
    assert last == (positions[-1] if after else positions[at])
