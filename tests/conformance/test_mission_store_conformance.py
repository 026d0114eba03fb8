"""Mission stores, in memory and on DynamoDB in moto: a backend conforms when it behaves
exactly like the in-memory reference adapter."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from missions.core.errors import ConflictError, NotFound, TransitionRefused
from missions.core.specs import MISSIONS
from missions.ports.missions import MissionRecord, MissionSummary
from missions.service.lifecycle import ALLOWED_FROM

if TYPE_CHECKING:
    from tests.conformance.conftest import Moto


@dataclass
class Backend:
    name: str
    missions: Any
    by_capability: Any


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        from missions.adapters.memory.missions import InMemoryMissionsByCapability, MemoryMissionStore

        missions = MemoryMissionStore()
        yield Backend("memory", missions, InMemoryMissionsByCapability(missions))
        return
    from missions.adapters.dynamodb.missions import DynamoMissionsByCapability, DynamoMissionStore

    aws: Moto = request.getfixturevalue("aws")
    table = aws.table(MISSIONS)
    yield Backend(
        "dynamodb", DynamoMissionStore(table, client=aws.ddb), DynamoMissionsByCapability(table, client=aws.ddb)
    )


def mission(mission_id: str, user_id: str = "u1", created_at: str = "2025-01-01T00:00:00.000+00:00") -> MissionRecord:
    return MissionRecord(
        mission_id=mission_id,
        user_id=user_id,
        capability="code_qa",
        goal="explain the repo",
        created_at=created_at,
        updated_at=created_at,
    )


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


def test_questions_asked_together_are_dropped_one_by_one_and_exactly_one_answer_sees_none_left(backend):
    # Given a mission waiting on three questions its parallel branches asked
    backend.missions.create(mission("m1"))
    backend.missions.transition(
        "m1", "interrupted", frozenset({"created"}), pending_interrupt="i1", pending_interrupts=["i1", "i2", "i3"]
    )
    # When they are answered in reverse order, two of them at the same time
    assert backend.missions.drop_pending("m1", "i3").pending_interrupts == ["i1", "i2"]
    with ThreadPoolExecutor(2) as pool:
        left = list(pool.map(lambda i: backend.missions.drop_pending("m1", i).pending_interrupts or [], ["i2", "i1"]))
    # Then exactly one answer found none left, and the first question still names the wait
    assert sorted(map(len, left)) == [0, 1]
    got = backend.missions.get("m1")
    assert not got.pending_interrupts and got.pending_interrupt == "i1" and got.status == "interrupted"
    # And a question answered already, or a mission not waiting, is refused
    with pytest.raises(ConflictError):
        backend.missions.drop_pending("m1", "i2")
    with pytest.raises(NotFound):
        backend.missions.drop_pending("nope", "i1")


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
