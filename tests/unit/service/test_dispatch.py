"""The dispatcher over the in-memory stores, with a fake start that only records what it started."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from missions.adapters.memory.dispatch import InMemoryDispatchStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.errors import MissionRequestError, NotFound
from missions.core.mission.envelope import Envelope
from missions.core.mission.requests import MissionRequest
from missions.service.dispatch import Dispatcher, DispatchResult, mission_id_for


class FakeStart:
    """The dispatcher's Starter: records started missions; raises for the mission ids in `failing`."""

    def __init__(self, failing: set[str] | None = None):
        self.started: list[str] = []
        self.failing = failing or set()

    def start(self, request: MissionRequest, prepared: Envelope | None = None) -> None:
        if request.mission_id in self.failing:
            raise RuntimeError("boom")
        self.started.append(request.mission_id)


def make(limit=3, failing=None):
    store, missions, start = InMemoryDispatchStore(), MemoryMissionStore(), FakeStart(failing)
    return Dispatcher(store, missions, start, limit=limit), store, missions, start


def req(goal="g", user="u1", **fields) -> MissionRequest:
    return MissionRequest(capability="code_qa", goal=goal, user_id=user, **fields)


# --------------------------------------------------------------------------- mission ids


def test_mission_id_for():
    assert mission_id_for(req(mission_id="mine", idempotency_key="k")) == "mine"
    keyed = mission_id_for(req(idempotency_key="k"))
    assert keyed == mission_id_for(req(goal="other", idempotency_key="k"))
    assert keyed.startswith("m_") and len(keyed) == 22
    assert mission_id_for(req(user="u2", idempotency_key="k")) != keyed  # keys are per user
    assert mission_id_for(req()) != mission_id_for(req())


# --------------------------------------------------------------------------- submit


def test_same_idempotency_key_twice_is_one_mission():
    dispatcher, store, missions, start = make()
    first = dispatcher.submit(req(idempotency_key="delivery-1"))
    second = dispatcher.submit(req(goal="retried", idempotency_key="delivery-1"))
    assert first.status == "started"
    assert second == DispatchResult(first.mission_id, "duplicate")
    assert start.started == [first.mission_id]
    assert [m.mission_id for m in missions.list_for_user("u1")] == [first.mission_id]
    assert missions.get(first.mission_id).goal == "g"  # the duplicate changed nothing
    assert store.queued("u1") == []


def test_submit_records_the_mission():
    dispatcher, _, missions, _ = make(limit=0)
    result = dispatcher.submit(req(priority="urgent", trigger="webhook"))
    assert result.status == "queued"
    record = missions.get(result.mission_id)
    assert (record.status, record.priority, record.trigger, record.user_id) == ("queued", "urgent", "webhook", "u1")


def test_a_bad_deadline_writes_nothing():
    dispatcher, store, missions, _ = make()
    with pytest.raises(MissionRequestError, match="deadline"):
        dispatcher.submit(req(deadline="next tuesday"))
    assert missions.list_for_user("u1") == []
    assert store.queued("u1") == []


def test_the_limit_is_respected_and_the_rest_queue():
    dispatcher, store, missions, start = make(limit=3)
    results = [dispatcher.submit(req(f"g{i}")) for i in range(5)]
    assert [r.status for r in results] == ["started"] * 3 + ["queued"] * 2
    assert start.started == [r.mission_id for r in results[:3]]
    assert store.running("u1") == set(start.started)
    assert [e.mission_id for e in store.queued("u1")] == [r.mission_id for r in results[3:]]
    assert {missions.get(r.mission_id).status for r in results[:3]} == {"running"}
    assert {missions.get(r.mission_id).status for r in results[3:]} == {"queued"}
    # another user has slots of their own
    assert dispatcher.submit(req(user="u2")).status == "started"


def test_limit_per_user():
    dispatcher, *_ = make(limit=lambda user: 1 if user == "free" else 2)
    assert [dispatcher.submit(req(user="free")).status for _ in range(2)] == ["started", "queued"]
    assert [dispatcher.submit(req(user="pro")).status for _ in range(3)] == ["started", "started", "queued"]


# --------------------------------------------------------------------------- finished


def test_queued_missions_start_in_order_as_others_finish():
    dispatcher, store, _, start = make(limit=1)
    running = dispatcher.submit(req("first")).mission_id
    submitted = {
        "low": dispatcher.submit(req(priority="low")),
        "medium": dispatcher.submit(req(priority="medium")),
        "high-late": dispatcher.submit(req(priority="high", deadline="2031-01-01T00:00:00Z")),
        "high-none": dispatcher.submit(req(priority="high")),
        "high-early": dispatcher.submit(req(priority="high", deadline="2030-01-01T00:00:00Z")),
        "urgent": dispatcher.submit(req(priority="urgent")),
        "medium-2": dispatcher.submit(req(priority="medium")),
    }
    assert {r.status for r in submitted.values()} == {"queued"}
    name = {r.mission_id: n for n, r in submitted.items()}
    order = []
    while True:
        started = dispatcher.finished(running)
        if not started:
            break
        assert len(started) == 1
        running = started[0]
        order.append(name[running])
    assert order == ["urgent", "high-early", "high-late", "high-none", "medium", "medium-2", "low"]
    assert len(start.started) == 8
    assert store.running("u1") == set()


def test_finished_twice_is_harmless():
    dispatcher, store, _, start = make(limit=2)
    a, b, c, d = (dispatcher.submit(req(f"g{i}")).mission_id for i in range(4))
    assert dispatcher.finished(a) == [c]
    assert dispatcher.finished(a) == []  # the second notice frees nothing more
    assert store.running("u1") == {b, c}
    assert [e.mission_id for e in store.queued("u1")] == [d]
    assert dispatcher.finished("never-existed") == []
    assert start.started == [a, b, c]


def test_a_failing_start_marks_the_mission_failed_and_frees_its_slot():
    dispatcher, store, missions, start = make(limit=1)
    first = dispatcher.submit(req("first", mission_id="first")).mission_id
    bad = dispatcher.submit(req("bad", mission_id="bad", priority="urgent"))
    good = dispatcher.submit(req("good", mission_id="good"))
    start.failing.add("bad")
    assert dispatcher.finished(first) == ["good"]  # "bad" failed to start; the drain went on
    assert bad.status == "queued"
    record = missions.get("bad")
    assert (record.status, record.terminal_reason) == ("failed", "start_failed: boom")
    assert store.running("u1") == {good.mission_id}
    assert start.started == ["first", "good"]


def test_a_queued_mission_whose_start_failed_is_told_to_whom_it_concerns():
    # Given a dispatcher that tells of failed starts (a sub-mission's parent waits for that), one slot
    told = []
    store, missions, start = InMemoryDispatchStore(), MemoryMissionStore(), FakeStart({"child"})
    dispatcher = Dispatcher(store, missions, start, limit=1, start_failed=told.append)
    first = dispatcher.submit(req("first", mission_id="first")).mission_id
    dispatcher.submit(req("child", mission_id="child"))
    # When the queued one's start fails, as the slot frees
    dispatcher.finished(first)
    # Then its failed record is handed on: no execution will ever report its end
    assert [(r.mission_id, r.status, r.terminal_reason) for r in told] == [("child", "failed", "start_failed: boom")]


def test_a_failing_start_on_submit_keeps_nothing_and_tells_the_submitter():
    # Given a start that fails (Step Functions refused it) / When the mission is submitted
    dispatcher, store, missions, _ = make(failing={"bad"})
    with pytest.raises(RuntimeError, match="boom"):
        dispatcher.submit(req(mission_id="bad"))
    # Then nothing of it is kept: no record, no slot, no queue entry; the submitter may retry
    with pytest.raises(NotFound):
        missions.get("bad")
    assert store.running("u1") == set() and store.queued("u1") == []


@pytest.mark.parametrize(("failing", "limit"), [("enqueue", 0), ("take_slot", 3)])
def test_a_failing_enqueue_or_slot_keeps_no_record(failing, limit):
    # Given a store whose queue (the user has no free slot) or whose running set refuses writes
    class Refusing(InMemoryDispatchStore):
        pass

    def refuse(*args):
        raise RuntimeError("throttled")

    setattr(Refusing, failing, refuse)
    missions, store = MemoryMissionStore(), Refusing()
    dispatcher = Dispatcher(store, missions, FakeStart(), limit=limit)
    # When a mission is submitted / Then the failure reaches the caller, and neither its record nor its note is kept
    with pytest.raises(RuntimeError, match="throttled"):
        dispatcher.submit(req(mission_id="m1"))
    with pytest.raises(NotFound):
        missions.get("m1")
    assert store.stranded(time.time_ns() + 1) == []


def test_a_mission_that_ends_during_its_own_start():
    store, missions = InMemoryDispatchStore(), MemoryMissionStore()
    started: list[str] = []

    class EndsAtOnce:
        def start(self, request: MissionRequest, prepared: Envelope | None = None) -> None:
            started.append(request.mission_id)  # the execution ends before start() returns
            dispatcher.finished(request.mission_id)

    dispatcher = Dispatcher(store, missions, EndsAtOnce(), limit=1)
    results = [dispatcher.submit(req(f"g{i}")) for i in range(3)]
    assert started == [r.mission_id for r in results]
    assert store.running("u1") == set() and store.queued("u1") == []


# --------------------------------------------------------------------------- property

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("submit"),
            st.sampled_from(["a", "b"]),
            st.sampled_from(["urgent", "high", "medium", "low"]),
            st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3", "k4"])),
        ),
        st.tuples(st.just("finish"), st.integers(0, 10)),
        st.tuples(st.just("finish_again"), st.integers(0, 10)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, limit=st.integers(1, 3))
def test_property_never_over_the_limit_and_everything_starts_once(ops, limit):
    dispatcher, store, _, start = make(limit=limit)
    owner: dict[str, str] = {}
    submitted: set[str] = set()
    keys: set[tuple[str, str]] = set()
    finished: list[str] = []

    def live(user: str) -> set[str]:
        done = set(finished)
        return {m for m in start.started if owner[m] == user and m not in done}

    def check() -> None:
        for user in ("a", "b"):
            assert len(live(user)) <= limit
            assert store.running(user) == live(user)
            if store.queued(user):  # a queued mission only waits for a full user
                assert len(live(user)) == limit

    for op in ops:
        if op[0] == "submit":
            _, user, priority, key = op
            result = dispatcher.submit(req(user=user, priority=priority, idempotency_key=key))
            duplicate = key is not None and (user, key) in keys
            assert (result.status == "duplicate") == duplicate
            if key is not None:
                keys.add((user, key))
            owner[result.mission_id] = user
            submitted.add(result.mission_id)
        else:
            pool = sorted(live("a") | live("b")) if op[0] == "finish" else finished
            if pool:
                mission_id = pool[op[1] % len(pool)]
                finished.append(mission_id)
                dispatcher.finished(mission_id)
        check()

    while live("a") | live("b"):  # let everything run to its end
        for mission_id in sorted(live("a") | live("b")):
            finished.append(mission_id)
            dispatcher.finished(mission_id)
            check()
    assert Counter(start.started) == Counter(submitted)  # all started, each exactly once
    assert store.queued("a") == store.queued("b") == []
