"""One conformance suite for every storage backend: in memory, and DynamoDB (+ S3) in moto.

Every case runs against each backend; a backend conforms when it behaves exactly like the
in-memory reference adapters.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from missions.adapters.memory.artifacts import MemoryArtifactStore
from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.interrupts import MemoryInterruptStore
from missions.adapters.memory.missions import InMemoryMissionsByCapability, MemoryMissionStore
from missions.core.envelope import InterruptKind, InterruptResponse
from missions.core.errors import ConflictError, NotFound, TransitionRefused
from missions.core.events import Event, EventType
from missions.core.specs import BLOB_INLINE_LIMIT, CHECKPOINTS, TABLES
from missions.ports.checkpoints import Checkpoint
from missions.ports.events import event_position, parse_position
from missions.ports.interrupts import InterruptRecord
from missions.ports.missions import MissionRecord, MissionSummary
from missions.service.lifecycle import ALLOWED_FROM

REGION = "us-east-1"
BUCKET = "missions-blobs-test"


@dataclass
class Backend:
    name: str
    missions: Any
    checkpoints: Any
    events: Any
    interrupts: Any
    blobs: Any
    s3: Any = None
    artifacts: Any = None
    by_capability: Any = None


def _table_name(spec_id: str) -> str:
    return f"test-{spec_id}"


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request, monkeypatch):
    if request.param == "memory":
        missions = MemoryMissionStore()
        yield Backend(
            "memory",
            missions,
            MemoryCheckpointStore(),
            MemoryEventStore(),
            MemoryInterruptStore(),
            MemoryBlobStore(),
            artifacts=MemoryArtifactStore(),
            by_capability=InMemoryMissionsByCapability(missions),
        )
        return

    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.artifacts import DynamoArtifactStore
    from missions.adapters.dynamodb.blobs import DynamoBlobStore
    from missions.adapters.dynamodb.checkpoints import DynamoCheckpointStore
    from missions.adapters.dynamodb.events import DynamoEventStore
    from missions.adapters.dynamodb.interrupts import DynamoInterruptStore
    from missions.adapters.dynamodb.missions import DynamoMissionsByCapability, DynamoMissionStore
    from missions.adapters.dynamodb.tables import table_definition, time_to_live

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        for spec in TABLES:
            ddb.create_table(**table_definition(spec, _table_name(spec.id)))
            ttl = time_to_live(spec, _table_name(spec.id))
            if ttl:
                ddb.update_time_to_live(**ttl)
        s3.create_bucket(Bucket=BUCKET)
        yield Backend(
            "dynamodb",
            DynamoMissionStore(_table_name("missions"), client=ddb),
            DynamoCheckpointStore(_table_name("checkpoints"), client=ddb, ttl_seconds=3600),
            DynamoEventStore(_table_name("events"), client=ddb, ttl_seconds=3600),
            DynamoInterruptStore(_table_name("interrupts"), client=ddb),
            DynamoBlobStore(_table_name(CHECKPOINTS.id), BUCKET, client=ddb, s3_client=s3),
            s3=s3,
            artifacts=DynamoArtifactStore(_table_name("artifacts"), client=ddb, ttl_seconds=3600),
            by_capability=DynamoMissionsByCapability(_table_name("missions"), client=ddb),
        )


# --------------------------------------------------------------------------- helpers


def mission(mission_id: str, user_id: str = "u1", created_at: str = "2025-01-01T00:00:00.000+00:00") -> MissionRecord:
    return MissionRecord(
        mission_id=mission_id,
        user_id=user_id,
        capability="code_qa",
        goal="explain the repo",
        created_at=created_at,
        updated_at=created_at,
    )


def checkpoint(thread_id: str, checkpoint_id: str, parent_id: str | None = None, **envelope: Any) -> Checkpoint:
    return Checkpoint(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        parent_id=parent_id,
        stage="plan",
        envelope=envelope or {"goal": "g", "outputs": {}},
    )


def event(mission_id: str, n: int, **payload: Any) -> Event:
    return Event(type=EventType.AGENT_COMPLETED, mission_id=mission_id, stage="plan", payload={"n": n, **payload})


def interrupt(mission_id: str, interrupt_id: str, token: str = "token-1") -> InterruptRecord:
    return InterruptRecord(
        mission_id=mission_id,
        interrupt_id=interrupt_id,
        kind=InterruptKind.CHOICE,
        stage="review",
        question="which one?",
        options=["a", "b"],
        data={"score": 0.75, "nested": {"items": [1, 2.5, "x"], "flag": True, "none": None}},
        task_token=token,
    )


# --------------------------------------------------------------------------- missions


def test_mission_create_get(backend):
    record = mission("m1")
    backend.missions.create(record)
    assert backend.missions.get("m1") == record


def test_mission_duplicate_create_conflicts(backend):
    backend.missions.create(mission("m1"))
    with pytest.raises(ConflictError):
        backend.missions.create(mission("m1", user_id="someone-else"))
    assert backend.missions.get("m1").user_id == "u1"


def test_mission_get_missing(backend):
    with pytest.raises(NotFound):
        backend.missions.get("nope")


def test_mission_update(backend):
    record = mission("m1")
    backend.missions.create(record)
    counters = {"llm_calls": 3, "tokens_in": 1200, "cost_usd": 0.1 + 0.2, "tiny": 1.5e-7}
    result = {"answer": "42", "confidence": 0.875, "citations": [{"file": "a.py", "line": 3}], "empty": {}}
    backend.missions.transition(
        "m1",
        "running",
        frozenset({"created"}),
        stage="analyze",
        counters=counters,
        result=result,
        execution_arn="arn:x",
    )
    got = backend.missions.get("m1")
    assert got.status == "running"
    assert got.stage == "analyze"
    assert got.execution_arn == "arn:x"
    assert got.counters == counters
    assert got.counters["cost_usd"] == 0.1 + 0.2  # exact, not approximately
    assert isinstance(got.counters["llm_calls"], int)
    assert got.result == result
    assert got.updated_at > record.updated_at
    assert got.created_at == record.created_at
    assert (got.user_id, got.capability, got.goal) == (record.user_id, record.capability, record.goal)

    backend.missions.transition("m1", "completed", frozenset({"running"}), stage=None)
    got = backend.missions.get("m1")
    assert got.stage is None
    assert got.status == "completed"
    assert got.counters == counters


def test_a_transition_the_current_status_does_not_allow_is_refused_and_changes_nothing(backend):
    # Given a mission that was cancelled
    backend.missions.create(mission("m1"))
    backend.missions.transition("m1", "cancelled", frozenset({"created", "queued"}), terminal_reason="cancelled")
    # When a late stage tries to write it back to running (allowed only from running or interrupted)
    with pytest.raises(TransitionRefused) as refused:
        backend.missions.transition("m1", "running", frozenset({"running", "interrupted"}), stage="late")
    # Then it is refused with the current status, and nothing changed
    assert refused.value.current == "cancelled" and isinstance(refused.value, ConflictError)
    got = backend.missions.get("m1")
    assert (got.status, got.stage, got.terminal_reason) == ("cancelled", None, "cancelled")
    with pytest.raises(NotFound):
        backend.missions.transition("nope", "running", frozenset({"created"}))


def test_a_transition_returns_the_record_as_written(backend):
    # Given a mission with a note its user sent
    backend.missions.create(mission("m1"))
    backend.missions.add_note("m1", {"note_id": "note_1", "text": "skip the museums", "at": "t"}, ALLOWED, 20)
    # When a stage records its progress
    written = backend.missions.transition("m1", "running", frozenset({"created"}), stage="plan")
    # Then the write itself returns the whole record, the notes with it
    assert written == backend.missions.get("m1")
    assert (written.status, written.stage, written.notes[0]["text"]) == ("running", "plan", "skip the museums")


def test_notes_are_appended_while_the_status_allows_and_up_to_the_limit(backend):
    backend.missions.create(mission("m1"))
    for index in range(3):
        backend.missions.add_note("m1", {"note_id": f"note_{index}", "text": f"n{index}", "at": "t"}, ALLOWED, 3)
    assert [n["text"] for n in backend.missions.get("m1").notes] == ["n0", "n1", "n2"]
    # a fourth is over the limit: a conflict, nothing added
    with pytest.raises(ConflictError, match="3 notes"):
        backend.missions.add_note("m1", {"note_id": "note_3", "text": "n3", "at": "t"}, ALLOWED, 3)
    # a mission in a status that takes none (it ended) refuses with its status, nothing added
    backend.missions.create(mission("m2"))
    backend.missions.transition("m2", "cancelled", frozenset({"created"}))
    with pytest.raises(TransitionRefused) as refused:
        backend.missions.add_note("m2", {"note_id": "note_x", "text": "late", "at": "t"}, ALLOWED, 3)
    assert refused.value.current == "cancelled" and backend.missions.get("m2").notes == []
    assert len(backend.missions.get("m1").notes) == 3
    with pytest.raises(NotFound):
        backend.missions.add_note("nope", {"note_id": "n", "text": "t", "at": "t"}, ALLOWED, 3)


ALLOWED = frozenset({"created", "queued", "running", "interrupted", "pausing", "paused"})


def test_plain_updates_cannot_change_a_status(backend):
    backend.missions.create(mission("m1"))
    with pytest.raises(ValueError, match="lifecycle"):
        backend.missions.update("m1", status="completed")
    assert backend.missions.get("m1").status == "created"


def test_mission_update_missing_is_not_found(backend):
    with pytest.raises(NotFound):
        backend.missions.update("nope", stage="x")
    with pytest.raises(NotFound):
        backend.missions.get("nope")  # and the update did not create it


def test_mission_list_for_user_newest_first(backend):
    backend.missions.create(mission("m-old", created_at="2025-01-01T00:00:00.000+00:00"))
    backend.missions.create(mission("m-new", created_at="2025-03-01T00:00:00.000+00:00"))
    backend.missions.create(mission("m-mid", created_at="2025-02-01T00:00:00.000+00:00"))
    backend.missions.create(mission("m-other", user_id="u2", created_at="2025-02-15T00:00:00.000+00:00"))

    found = backend.missions.list_for_user("u1")
    assert [m.mission_id for m in found] == ["m-new", "m-mid", "m-old"]
    assert [m.mission_id for m in backend.missions.list_for_user("u1", limit=2)] == ["m-new", "m-mid"]
    assert [m.mission_id for m in backend.missions.list_for_user("u2")] == ["m-other"]
    assert backend.missions.list_for_user("nobody") == []


def _listed(backend: Backend, user_id: str = "u1") -> list[MissionSummary]:
    """What both listings show of the user's missions (the capability's listing is oldest first)."""
    by_user = backend.missions.list_for_user(user_id)
    by_capability = [m for m in backend.by_capability.list("code_qa", "2000") if m.user_id == user_id]
    assert by_user == list(reversed(by_capability))
    return by_user


def test_a_listing_shows_a_running_mission_where_it_is_and_a_stopped_one_where_it_stopped(backend):
    # Given a mission that runs two stages, waits for an answer, runs on and completes
    backend.missions.create(mission("m1"))
    backend.missions.transition("m1", "running", frozenset({"created"}), execution_arn="arn:m1")
    backend.missions.transition(
        "m1",
        "running",
        frozenset({"running", "interrupted"}),
        stage="plan",
        next_stage="analyze",
        phase="planning",
        counters={"agent_hops": 1, "cost_usd": 0.5},
    )
    # When it is listed while it runs / Then it is where its record says, with its cost so far
    (running,) = _listed(backend)
    assert (running.status, running.stage, running.next_stage, running.phase) == (
        "running",
        "plan",
        "analyze",
        "planning",
    )
    assert (running.agent_hops, running.cost_usd) == (1, 0.5)
    # When it waits for an answer (a move that names no stage) / Then it shows the stage it stopped at
    backend.missions.transition("m1", "interrupted", frozenset({"running"}), pending_interrupt="i1")
    (waiting,) = _listed(backend)
    assert (waiting.status, waiting.stage, waiting.cost_usd, waiting.pending_interrupt) == (
        "interrupted",
        "plan",
        0.5,
        "i1",
    )
    assert (waiting.next_stage, waiting.phase, waiting.agent_hops) == (None, None, 0)
    # When it runs on and ends
    backend.missions.transition("m1", "running", frozenset({"interrupted"}), pending_interrupt=None)
    backend.missions.transition(
        "m1", "running", frozenset({"running"}), stage="analyze", counters={"agent_hops": 2, "cost_usd": 0.75}
    )
    backend.missions.transition(
        "m1",
        "completed",
        frozenset({"running"}),
        stage="final",
        counters={"agent_hops": 3, "cost_usd": 1.25},
        completed_at="2025-01-02T00:00:00.000+00:00",
        terminal_reason="done",
        result={"answer": "42"},
    )
    # Then its listing is its record's summary: its last stage and what it cost in all
    (done,) = _listed(backend)
    assert done == MissionSummary.of(backend.missions.get("m1"))
    assert (done.status, done.stage, done.cost_usd, done.terminal_reason) == ("completed", "final", 1.25, "done")
    assert done.completed_at == "2025-01-02T00:00:00.000+00:00" and done.pending_interrupt is None


def test_a_mission_cancelled_while_it_ran_is_listed_where_it_stopped(backend):
    # Given a mission cancelled after a stage (the cancel names neither a stage nor counters)
    backend.missions.create(mission("m1"))
    backend.missions.transition("m1", "running", frozenset({"created"}))
    backend.missions.transition("m1", "running", frozenset({"running"}), stage="plan", counters={"cost_usd": 0.2})
    backend.missions.transition("m1", "cancelling", frozenset({"running"}), terminal_reason="stop")
    backend.missions.transition(
        "m1", "cancelled", frozenset({"cancelling"}), completed_at="2025-01-03T00:00:00.000+00:00"
    )
    # and one cancelled before it ran (no stage, no cost)
    backend.missions.create(mission("m2", created_at="2025-01-05T00:00:00.000+00:00"))
    backend.missions.transition("m2", "cancelled", frozenset({"created"}), terminal_reason="stop")
    # When they are listed / Then each shows what its record says
    never, cancelled = _listed(backend)
    assert (cancelled.mission_id, cancelled.status, cancelled.stage, cancelled.cost_usd) == (
        "m1",
        "cancelled",
        "plan",
        0.2,
    )
    assert (never.mission_id, never.stage, never.cost_usd) == ("m2", None, 0.0)
    assert [never, cancelled] == [MissionSummary.of(backend.missions.get(m)) for m in ("m2", "m1")]


def test_a_plain_update_of_a_stopped_missions_stage_shows_in_its_listing(backend):
    # Given a failed mission
    backend.missions.create(mission("m1"))
    backend.missions.transition("m1", "failed", frozenset({"created"}), terminal_reason="start_failed")
    # When its stage and counters are set by a plain update / Then its listing shows them
    backend.missions.update("m1", stage="repair", counters={"cost_usd": 0.01})
    assert _listed(backend) == [MissionSummary.of(backend.missions.get("m1"))]
    assert _listed(backend)[0].stage == "repair"


# a step of a mission's life: (the status it moves to, or None for a plain update; the fields written)
STEPS = st.lists(
    st.tuples(
        st.sampled_from([None, *ALLOWED_FROM]),
        st.fixed_dictionaries(
            {},
            optional={
                "stage": st.sampled_from([None, "plan", "analyze", "final"]),
                "next_stage": st.sampled_from([None, "analyze", "await:clarification"]),
                "phase": st.sampled_from([None, "planning", "executing"]),
                "counters": st.fixed_dictionaries(
                    {"agent_hops": st.integers(0, 9), "cost_usd": st.integers(0, 5_000_000).map(lambda n: n / 1e6)}
                ),
                "pending_interrupt": st.sampled_from([None, "i1"]),
                "terminal_reason": st.sampled_from([None, "done", "max_agent_hops"]),
            },
        ),
    ),
    max_size=12,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_a_listing_is_always_the_summary_of_the_record(backend, steps):
    # Given a fresh mission taken through random transitions and updates (refused ones change nothing)
    user = f"u-{uuid.uuid4().hex[:8]}"
    backend.missions.create(mission("m1-" + user, user_id=user))
    for status, fields in steps:
        try:
            if status is None:
                backend.missions.update("m1-" + user, **fields)
            else:
                backend.missions.transition("m1-" + user, status, ALLOWED_FROM[status], **fields)
        except TransitionRefused:
            pass
    # When it is listed / Then the listing is exactly the summary of its record, whatever its status
    assert backend.missions.list_for_user(user) == [MissionSummary.of(backend.missions.get("m1-" + user))]


def test_ended_before_reads_the_missions_whole_oldest_first(backend):
    # Given missions that completed at different times, one failed, one still running
    for n, day in enumerate(("05", "02", "09")):
        backend.missions.create(mission(f"done-{n}"))
        backend.missions.transition(
            f"done-{n}",
            "completed",
            frozenset({"created"}),
            completed_at=f"2025-01-{day}T00:00:00.000+00:00",
            result={"answer": n},
            counters={"cost_usd": 0.5},
        )
    backend.missions.create(mission("failed"))
    backend.missions.transition(
        "failed", "failed", frozenset({"created"}), completed_at="2025-01-01T00:00:00.000+00:00"
    )
    backend.missions.create(mission("running"))
    backend.missions.transition("running", "running", frozenset({"created"}))
    # When the completed ones that ended before the 6th are asked for
    found = backend.missions.ended_before("completed", "2025-01-06T00:00:00.000+00:00")
    # Then they come whole (their results), oldest first, and a limit takes the oldest
    assert [(m.mission_id, m.result) for m in found] == [("done-1", {"answer": 1}), ("done-0", {"answer": 0})]
    assert found == [backend.missions.get("done-1"), backend.missions.get("done-0")]
    assert [m.mission_id for m in backend.missions.ended_before("completed", "2025-02-01", limit=1)] == ["done-1"]
    assert [m.mission_id for m in backend.missions.ended_before("failed", "2025-02-01")] == ["failed"]


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_put_is_write_once(backend):
    first = checkpoint("t1", "0001", goal="first")
    assert backend.checkpoints.put(first) == first
    retried = checkpoint("t1", "0001", goal="forked?")
    stored = backend.checkpoints.put(retried)
    assert stored == first
    assert backend.checkpoints.get("t1", "0001") == first
    assert backend.checkpoints.list("t1") == [first]


def test_checkpoint_list_latest_oldest_first(backend):
    assert backend.checkpoints.list("t1") == []
    assert backend.checkpoints.latest("t1") is None
    c2 = checkpoint("t1", "0002", parent_id="0001", step=2)
    c1 = checkpoint("t1", "0001", step=1)
    c3 = checkpoint("t1", "0003", parent_id="0002", step=3)
    other = checkpoint("t2", "0009", step=9)
    for c in (c2, c1, c3, other):
        backend.checkpoints.put(c)
    assert backend.checkpoints.list("t1") == [c1, c2, c3]
    assert backend.checkpoints.latest("t1") == c3
    assert backend.checkpoints.latest("t2") == other
    assert backend.checkpoints.get("t1", "0002").parent_id == "0001"


def test_checkpoint_get_missing(backend):
    with pytest.raises(NotFound):
        backend.checkpoints.get("t1", "0001")
    backend.checkpoints.put(checkpoint("t1", "0001"))
    with pytest.raises(NotFound):
        backend.checkpoints.get("t1", "0002")


def test_checkpoint_envelope_round_trip(backend):
    envelope = {
        "goal": "naïve ✓",
        "counters": {"cost_usd": 0.1 + 0.2, "llm_calls": 7, "whole_float": 2.0, "tiny": 5e-324, "big": 1e300},
        "outputs": {"plan": {"steps": [1, 2.25, None, True, ""]}},
        "refs": {"context": "ab" * 32},
        "history": [{"$ref": "cd" * 32, "bytes": 1234}],
        "empty": {},
    }
    c = Checkpoint(thread_id="t1", checkpoint_id="0001", parent_id=None, stage="s", envelope=envelope)
    backend.checkpoints.put(c)
    got = backend.checkpoints.get("t1", "0001")
    assert got.envelope == envelope
    assert isinstance(got.envelope["counters"]["whole_float"], float)
    assert got.envelope["counters"]["cost_usd"] == 0.1 + 0.2
    assert got == c


# --------------------------------------------------------------------------- events


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


# --------------------------------------------------------------------------- interrupts


def test_an_answer_that_was_not_delivered_can_be_reopened(backend):
    # Given an answered question
    backend.interrupts.put(
        InterruptRecord(
            mission_id="m1", interrupt_id="i1", kind="clarification", stage="s", question="q?", task_token="t"
        )
    )
    backend.interrupts.answer("m1", "i1", InterruptResponse(text="a"))
    # When its answer could not be handed over / Then it is pending again, waiting, and takes a new answer
    backend.interrupts.reopen("m1", "i1")
    record = backend.interrupts.get("m1", "i1")
    assert (record.status, record.response, record.answered_at) == ("pending", None, None)
    assert [r.interrupt_id for r in backend.interrupts.pending("m1")] == ["i1"]
    assert backend.interrupts.answer("m1", "i1", InterruptResponse(text="b")).response.text == "b"
    # and only an answered question reopens
    backend.interrupts.expire("m1", "i1")
    with pytest.raises(ConflictError):
        backend.interrupts.reopen("m1", "i1")
    with pytest.raises(NotFound):
        backend.interrupts.reopen("m1", "nope")


def test_interrupt_put_get(backend):
    record = interrupt("m1", "int_1")
    backend.interrupts.put(record)
    assert backend.interrupts.get("m1", "int_1") == record
    with pytest.raises(NotFound):
        backend.interrupts.get("m1", "int_2")
    # a retried put while pending keeps the newest token
    backend.interrupts.put(interrupt("m1", "int_1", token="token-2"))
    assert backend.interrupts.get("m1", "int_1").task_token == "token-2"


def test_interrupt_answer_exactly_once(backend):
    backend.interrupts.put(interrupt("m1", "int_1"))
    response = InterruptResponse(decision="a", data={"weight": 0.5})
    answered = backend.interrupts.answer("m1", "int_1", response)
    assert answered.status == "answered"
    assert answered.response == response
    assert answered.answered_at
    assert answered.task_token == "token-1"
    assert backend.interrupts.get("m1", "int_1") == answered

    with pytest.raises(ConflictError):
        backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="b"))
    assert backend.interrupts.get("m1", "int_1").response == response


def test_interrupt_answer_missing_is_not_found(backend):
    with pytest.raises(NotFound):
        backend.interrupts.answer("m1", "nope", InterruptResponse(decision="a"))


def test_interrupt_put_after_answer_conflicts(backend):
    backend.interrupts.put(interrupt("m1", "int_1"))
    backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="a"))
    with pytest.raises(ConflictError):
        backend.interrupts.put(interrupt("m1", "int_1", token="late-retry"))
    got = backend.interrupts.get("m1", "int_1")
    assert got.status == "answered"
    assert got.task_token == "token-1"


def test_interrupt_expire_drops_an_undelivered_answer(backend):
    # Given an answer that Step Functions then refused (the token had timed out)
    backend.interrupts.put(interrupt("m1", "int_1"))
    backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="late"))
    # When it is expired
    backend.interrupts.expire("m1", "int_1")
    # Then it is neither pending nor answered, and cannot be answered again
    got = backend.interrupts.get("m1", "int_1")
    assert (got.status, got.response, got.answered_at) == ("expired", None, None)
    assert backend.interrupts.pending("m1") == []
    with pytest.raises(ConflictError):
        backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="again"))
    with pytest.raises(NotFound):
        backend.interrupts.expire("m1", "missing")


def test_interrupt_pending(backend):
    backend.interrupts.put(interrupt("m1", "int_1"))
    backend.interrupts.put(interrupt("m1", "int_2"))
    backend.interrupts.put(interrupt("m1", "int_3"))
    backend.interrupts.put(interrupt("m2", "int_9"))
    backend.interrupts.answer("m1", "int_2", InterruptResponse(decision="a"))
    pending = backend.interrupts.pending("m1")
    assert sorted(r.interrupt_id for r in pending) == ["int_1", "int_3"]
    assert all(r.status == "pending" and r.mission_id == "m1" for r in pending)
    assert backend.interrupts.pending("nobody") == []


# --------------------------------------------------------------------------- blobs


def _key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_blob_small_round_trip(backend):
    data = b"x\x00\xff" * 100
    key = _key(data)
    backend.blobs.put(key, data)
    backend.blobs.put(key, data)  # same key, same content: harmless
    assert backend.blobs.get(key) == data


def test_blob_large_round_trip(backend):
    data = os.urandom(400 * 1024)  # incompressible and over DynamoDB's item cap
    key = _key(data)
    backend.blobs.put(key, data)
    backend.blobs.put(key, data)
    assert backend.blobs.get(key) == data
    if backend.name == "dynamodb":
        obj = backend.s3.get_object(Bucket=BUCKET, Key=f"blobs/{key[:2]}/{key}")
        assert obj["Body"].read() == data


def test_blob_at_inline_limit_stays_inline(backend):
    data = os.urandom(BLOB_INLINE_LIMIT)
    key = _key(data)
    backend.blobs.put(key, data)
    assert backend.blobs.get(key) == data
    if backend.name == "dynamodb":
        listed = backend.s3.list_objects_v2(Bucket=BUCKET)
        assert listed.get("KeyCount", 0) == 0


def test_blob_missing(backend):
    with pytest.raises(KeyError):
        backend.blobs.get(_key(b"never written"))


def test_feedback_is_set_exactly_once_even_when_requests_race(backend):
    # Given a finished mission
    backend.missions.create(MissionRecord(mission_id="m9", user_id="u", capability="c", goal="g", status="completed"))
    # When twenty requests race to give feedback (threads only in memory: moto itself is not
    # thread-safe for conditional writes, DynamoDB is; there the attempts come one after another)
    import concurrent.futures

    def give(n: int) -> str:
        try:
            backend.missions.set_feedback("m9", {"quality": n % 5 + 1})
            return "ok"
        except ConflictError:
            return "conflict"

    if backend.name == "memory":
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(give, range(20)))
    else:
        outcomes = [give(n) for n in range(20)]
    # Then exactly one wins and the stored feedback is the winner's
    assert outcomes.count("ok") == 1 and outcomes.count("conflict") == 19
    assert backend.missions.get("m9").feedback is not None
    with pytest.raises(NotFound):
        backend.missions.set_feedback("missing", {"quality": 1})


def test_interrupt_overdue_lists_only_old_unanswered_questions_oldest_first(backend):
    # Given questions asked at different times, one answered and one expired since
    for interrupt_id, asked in [
        ("old", "2026-01-01T00:00:00.000+00:00"),
        ("older", "2025-12-31T00:00:00.000+00:00"),
        ("new", "2026-01-03T00:00:00.000+00:00"),
        ("done", "2025-12-01T00:00:00.000+00:00"),
        ("gone", "2025-12-02T00:00:00.000+00:00"),
    ]:
        backend.interrupts.put(interrupt(f"m-{interrupt_id}", interrupt_id).model_copy(update={"created_at": asked}))
    backend.interrupts.answer("m-done", "done", InterruptResponse(decision="a"))
    backend.interrupts.expire("m-gone", "gone")
    # When asking for those asked before Jan 2nd
    overdue = backend.interrupts.overdue("2026-01-02T00:00:00.000+00:00")
    # Then only the two pending older ones come back, oldest first, across missions
    assert [r.interrupt_id for r in overdue] == ["older", "old"]
    assert backend.interrupts.overdue("2026-01-02T00:00:00.000+00:00", limit=1)[0].interrupt_id == "older"
    assert backend.interrupts.get("m-old", "old") == overdue[1]  # the index attribute never leaks


# --------------------------------------------------------------------------- artifacts


def test_artifacts_are_versioned_per_path_and_listed_in_order(backend):
    # Given a plan written once and an itinerary draft written twice
    backend.artifacts.put("m1", "plan", {"steps": ["flights", "hotels"]}, stage="planner", written_by="planner@1")
    first = backend.artifacts.put("m1", "drafts/itinerary", {"days": 3}, stage="synthesis", written_by="synthesis@5")
    second = backend.artifacts.put("m1", "drafts/itinerary", {"days": 4}, stage="synthesis", written_by="synthesis@9")
    backend.artifacts.put("m2", "plan", "another mission's", written_by="planner@1")
    # Then versions count per path, users see names like drafts/itinerary_v2, and reads pick versions
    assert (first.version, second.version, second.name) == (1, 2, "drafts/itinerary_v2")
    assert backend.artifacts.get("m1", "drafts/itinerary").content == {"days": 4}
    assert backend.artifacts.get("m1", "drafts/itinerary", version=1).content == {"days": 3}
    assert [a.name for a in backend.artifacts.list("m1")] == ["drafts/itinerary_v1", "drafts/itinerary_v2", "plan_v1"]
    with pytest.raises(NotFound):
        backend.artifacts.get("m1", "drafts/itinerary", version=3)
    with pytest.raises(NotFound):
        backend.artifacts.get("m1", "final")


def test_a_retried_stage_finds_its_own_artifact_instead_of_adding_a_version(backend):
    once = backend.artifacts.put("m1", "plan", {"v": 1}, written_by="planner@3")
    again = backend.artifacts.put("m1", "plan", {"v": 1}, written_by="planner@3")
    assert once.version == again.version == 1 and len(backend.artifacts.list("m1")) == 1


def test_malformed_artifacts_are_rejected_and_nothing_is_written(backend):
    from missions.core.artifacts import ArtifactRejected

    with pytest.raises(ArtifactRejected, match="segments"):
        backend.artifacts.put("m1", "../etc/passwd", {})
    with pytest.raises(ArtifactRejected, match="limit"):
        backend.artifacts.put("m1", "plan", "x" * 400_000)
    assert backend.artifacts.list("m1") == []


# --------------------------------------------------------------------------- retention queries


def test_ended_before_finds_missions_of_a_status_that_ended_before_a_time_oldest_first(backend):
    for mission_id, status, ended in [
        ("old", "completed", "2026-01-01T00:00:00.000+00:00"),
        ("older", "completed", "2025-12-01T00:00:00.000+00:00"),
        ("recent", "completed", "2026-03-01T00:00:00.000+00:00"),
        ("failed", "failed", "2025-11-01T00:00:00.000+00:00"),
        ("running", "running", None),
    ]:
        backend.missions.create(mission(mission_id).model_copy(update={"status": status, "completed_at": ended}))
    found = backend.missions.ended_before("completed", "2026-02-01T00:00:00.000+00:00")
    assert [m.mission_id for m in found] == ["older", "old"]
    assert [m.mission_id for m in backend.missions.ended_before("failed", "2026-02-01")] == ["failed"]
    assert backend.missions.ended_before("completed", "2026-02-01T00:00:00.000+00:00", limit=1)[0].mission_id == "older"


def test_delete_thread_removes_every_checkpoint_of_that_thread_only(backend):
    for index in range(30):  # more than one DynamoDB batch
        backend.checkpoints.put(checkpoint("t1", f"{index:04d}-plan"))
    backend.checkpoints.put(checkpoint("t2", "0001-plan"))
    assert backend.checkpoints.delete_thread("t1") == 30
    assert backend.checkpoints.list("t1") == [] and backend.checkpoints.latest("t1") is None
    assert len(backend.checkpoints.list("t2")) == 1
    assert backend.checkpoints.delete_thread("t1") == 0
