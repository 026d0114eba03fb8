"""The launcher and mission control over in-memory stores: every start goes through the dispatcher,
forks and cancels included, whatever order users and executions act in.

A fake Executions port plays Step Functions: it records what started and what was stopped, and the
test ends executions when it chooses (as the status function would hear of it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from missions.adapters.memory.agents import InMemoryUsageStore
from missions.adapters.memory.interrupts import MemoryInterruptStore
from missions.core.capability import registry as registry
from missions.core.cost.usage import UsageRecord
from missions.core.errors import ConflictError, MissionRequestError, NotFound
from missions.core.mission.checkpoints import diff
from missions.core.mission.envelope import InterruptKind
from missions.core.mission.events import EventType
from missions.core.mission.forks import ForkEdit
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.ports.checkpoints import Checkpoint
from missions.ports.interrupts import InterruptRecord
from missions.service.checkpoints import state_at
from missions.service.control import ExecutionStatus, MissionControl
from missions.service.lifecycle import Lifecycle
from tests.support.launching import LaunchWorld

CAPABILITY = "shopping"  # reads no repository: its requests need no resolver
GOAL = "find the cheapest USB-C charger"


class World(LaunchWorld):
    def __init__(self, limit: int = 3, capabilities: registry.Registry | None = None):
        super().__init__(limit=limit, capabilities=capabilities)
        self.questions: Counter[str] = Counter()  # questions asked, per mission

    def submit(self, user: str = "ann", **fields: Any) -> str:
        request = MissionRequest.parse(capability=CAPABILITY, goal=GOAL, user_id=user, **fields)
        return self.launcher.submit(request).mission_id

    def ask(self, mission_id: str) -> None:
        """A stage asked a question and the interrupt function stored its token: the mission waits.
        Each question has its own id and token, as each waitForTaskToken task has its own."""
        self.questions[mission_id] += 1
        Lifecycle(self.missions).waiting(mission_id, f"q-{mission_id}-{self.questions[mission_id]}")
        self.launcher.waiting(mission_id)

    def answer(self, mission_id: str) -> bool:
        """The user answers: True when the mission resumed at once, False when the answer queued."""
        asked = self.questions[mission_id]
        interrupt = InterruptRecord(
            mission_id=mission_id,
            interrupt_id=f"q-{mission_id}-{asked}",
            kind=InterruptKind.CLARIFICATION,
            stage="present",
            question="which?",
            task_token=f"t-{mission_id}-{asked}",
        )
        return self.launcher.resume(interrupt, "{}")


class CountingRegistry(registry.Registry):
    """The installed capabilities, counting the lookups: building a mission's first envelope is one."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: Counter[str] = Counter()

    def load(self, name: str) -> registry.Capability:
        self.loads[name] += 1
        return super().load(name)


# --------------------------------------------------------------------------- examples


def test_a_missions_first_envelope_is_built_once_per_start():
    # Given a launcher whose registry counts the envelopes built, and one running slot per user
    capabilities = CountingRegistry()
    world = World(limit=1, capabilities=capabilities)
    # When a mission starts at once
    first = world.submit()
    # Then its envelope was built once: as its submit checked it, and handed to its start
    assert world.status(first) == "running" and capabilities.loads[CAPABILITY] == 1
    # When the next one waits in the queue, then starts once the first ends
    second = world.submit()
    assert world.status(second) == "queued" and capabilities.loads[CAPABILITY] == 2
    world.end(first)
    # Then its start built it once more (it waited: its repository and versions are checked again)
    assert world.status(second) == "running" and capabilities.loads[CAPABILITY] == 3


def test_a_request_that_cannot_run_is_refused_before_anything_is_written():
    # Given a world / When a request names a capability that is not installed
    world = World()
    with pytest.raises(MissionRequestError, match="unknown capability"):
        world.launcher.submit(MissionRequest(capability="nope", goal=GOAL, user_id="ann"))
    # Then no mission was recorded and nothing started
    assert world.missions.list_for_user("ann") == [] and world.executions.started == []


def test_an_execution_that_succeeded_without_recording_the_end_fails_its_mission_with_the_reason():
    # Given a user's one running mission whose execution ends without its last stage recording the end (a bug)
    world = World(limit=1)
    mission_id = world.submit()
    arn = world.missions.get(mission_id).execution_arn or f"x:{mission_id}"
    # When Step Functions reports the execution succeeded
    world.control.execution_ended(arn, "SUCCEEDED")
    # Then the mission is not left running for ever: it failed, saying why, and its slot is free
    record = world.missions.get(mission_id)
    assert record.status == MissionStatus.FAILED and record.terminal_reason == "execution_ended_unrecorded"
    assert world.status(world.submit()) == "running"


def _control(world: World, **collaborators: Any) -> MissionControl:
    """A mission control over the world's stores, with these collaborators of its own."""
    return MissionControl(
        missions=world.missions,
        events=world.events,
        interrupts=MemoryInterruptStore(),
        executions=world.executions,
        launcher=world.launcher,
        **collaborators,
    )


class _Told:
    """Notifications that keep what they were told (missions.service.notifications.NotificationService)."""

    def __init__(self) -> None:
        self.ended: list[Any] = []

    def mission_ended(self, record: Any) -> None:
        self.ended.append(record)


def test_an_ended_execution_reads_its_mission_once_and_tells_the_user_how_it_ended(
    monkeypatch: pytest.MonkeyPatch,
):
    # Given a user's one running mission whose last stage recorded its end, notifications, and reads counted
    world, told = World(limit=1), _Told()
    control = _control(world, notifications=lambda: told)
    mission_id = world.submit()
    arn = world.missions.get(mission_id).execution_arn or f"x:{mission_id}"
    Lifecycle(world.missions).end(mission_id, MissionStatus.COMPLETED, terminal_reason="completed")
    reads: list[str] = []
    real_get = world.missions.get
    monkeypatch.setattr(world.missions, "get", lambda m: reads.append(m) or real_get(m))
    # When Step Functions reports the execution's end
    control.execution_changed(ExecutionStatus(execution_arn=arn, name=mission_id, status="SUCCEEDED"))
    # Then its record was read once, its slot is free, and the user was told it completed
    assert reads == [mission_id]
    assert [(r.mission_id, r.status) for r in told.ended] == [(mission_id, MissionStatus.COMPLETED)]
    assert world.status(world.submit()) == "running"


def test_an_answer_given_with_the_missions_record_resumes_it_without_reading_it_again(
    monkeypatch: pytest.MonkeyPatch,
):
    # Given a mission waiting for its user's answer, its record as the answer route read it, reads counted
    world = World(limit=1)
    mission_id = world.submit()
    world.ask(mission_id)
    record = world.missions.get(mission_id)
    reads: list[str] = []
    real_get = world.missions.get
    monkeypatch.setattr(world.missions, "get", lambda m: reads.append(m) or real_get(m))
    interrupt = InterruptRecord(
        mission_id=mission_id,
        interrupt_id=f"q-{mission_id}-1",
        kind=InterruptKind.CLARIFICATION,
        stage="present",
        question="which?",
        task_token=f"t-{mission_id}-1",
    )
    # When the answer is handed over with that record
    resumed = world.launcher.resume(interrupt, "{}", record)
    # Then its record was not read again to queue the answer, and the mission runs again
    assert resumed and reads == []
    assert world.status(mission_id) == "running"


def test_a_fork_of_a_missing_checkpoint_is_refused_and_writes_nothing():
    world = World()
    source = world.submit()
    with pytest.raises(NotFound):
        world.launcher.fork(source, "9999-nowhere", "ann")
    assert [m.mission_id for m in world.missions.list_for_user("ann")] == [source]


def test_a_fork_carries_on_from_its_checkpoint_through_the_dispatcher():
    # Given a user at the limit of 1
    world = World(limit=1)
    source = world.submit()
    # When she forks her running mission
    fork = world.launcher.fork(source, "0001-start", "ann")
    # Then the fork is queued, marked as a fork, and starts once the source ends
    assert fork.status == "queued" and world.missions.get(fork.mission_id).trigger == "fork"
    world.end(source)
    assert world.status(fork.mission_id) == MissionStatus.RUNNING
    assert world.executions.started == [source, fork.mission_id]


def test_a_fork_from_a_checkpoint_that_kept_a_delta_starts_from_the_whole_state_at_it():
    # Given a running mission whose second checkpoint kept only what its stage changed
    world = World()
    source = world.submit()
    first = state_at(world.checkpoints, source, "0001-start")
    second = {
        **first,
        "outputs": {**first["outputs"], "present": {"options": ["amazon", "bh"]}},
        "counters": {**first["counters"], "agent_hops": 2},
        "next_stage": "complete",
        "checkpoint_id": "0002-present",
    }
    delta = diff(first, second)
    assert "context" not in delta.get("set", {})  # (what did not change is not in it)
    world.checkpoints.put(
        Checkpoint(thread_id=source, checkpoint_id="0002-present", parent_id="0001-start", stage="present", delta=delta)
    )
    # When she forks from it
    fork = world.launcher.fork(source, "0002-present", "ann")
    # Then the fork starts, as a mission of its own, with everything the source had at that checkpoint
    started = world.codec.decode(state_at(world.checkpoints, fork.mission_id, "0001-start"))
    assert started.mission_id == fork.mission_id != source
    assert started.outputs["present"] == {"options": ["amazon", "bh"]} and started.counters.agent_hops == 2
    assert started.context == world.codec.decode(first).context


def test_a_fork_that_resumes_at_an_earlier_stage_gets_back_the_outputs_that_had_left_the_envelope():
    # Given a mission whose first stage's output left the envelope at the second checkpoint (no later stage read it)
    world = World()
    source = world.submit()
    first = state_at(world.checkpoints, source, "0001-start")
    written = {**first, "outputs": {**first["outputs"], "start": {"seen": "the first"}}}
    dropped = {**written, "outputs": {"present": {"options": ["amazon"]}}, "next_stage": "complete"}
    for parent, (checkpoint, stage), before, after in (
        ("0001-start", ("0002-start", "start"), first, written),
        ("0002-start", ("0003-present", "present"), written, dropped),
    ):
        world.checkpoints.put(
            Checkpoint(
                thread_id=source, checkpoint_id=checkpoint, parent_id=parent, stage=stage, delta=diff(before, after)
            )
        )
    assert "start" not in state_at(world.checkpoints, source, "0003-present")["outputs"]
    # When she forks from the last checkpoint, resuming at the stage before
    fork = world.launcher.fork(source, "0003-present", "ann", ForkEdit(resume_from="present"))
    # Then the fork carries every output as it was last written: the dropped one from its checkpoint
    started = world.codec.decode(state_at(world.checkpoints, fork.mission_id, "0001-start"))
    assert started.outputs["start"] == {"seen": "the first"}
    assert started.outputs["present"] == {"options": ["amazon"]}


def test_cancelling_a_queued_mission_removes_it_from_the_queue_and_says_so():
    world = World(limit=1)
    running, queued = world.submit(), world.submit()
    world.control.cancel(world.missions.get(queued))
    world.end(running)
    assert world.status(queued) == MissionStatus.CANCELLED
    assert queued not in world.executions.started
    assert world.launcher.dispatcher.queued("ann") == []
    events, _ = world.events.read(queued)
    assert [e.type for e in events] == [EventType.MISSION_CANCELLED]


def test_cancelling_a_running_mission_stops_its_execution_and_frees_its_slot():
    world = World(limit=1)
    running, queued = world.submit(), world.submit()
    world.control.cancel(world.missions.get(running))
    assert world.executions.stopped == [running]
    assert world.status(running) == MissionStatus.CANCELLED
    assert world.status(queued) == MissionStatus.RUNNING  # the freed slot went to the next one
    with pytest.raises(ConflictError):
        world.control.cancel(world.missions.get(running))


# --------------------------------------------------------------------------- property

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("submit"),
            st.sampled_from(["a", "b"]),
            st.sampled_from(["urgent", "high", "medium", "low"]),
            st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3"])),
        ),
        st.tuples(st.just("fork"), st.integers(0, 20)),
        st.tuples(st.just("cancel"), st.integers(0, 20)),
        st.tuples(st.just("end"), st.integers(0, 20)),
        st.tuples(st.just("ask"), st.integers(0, 20)),
        st.tuples(st.just("answer"), st.integers(0, 20)),
        st.tuples(st.just("end_again"), st.integers(0, 20)),
    ),
    max_size=50,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, limit=st.integers(1, 3))
@example(ops=[("submit", "a", "urgent", None), ("ask", 0), ("answer", 0), ("ask", 0)], limit=1)  # asks again
def test_property_never_over_the_limit_nothing_cancelled_starts_the_rest_start_once(ops, limit):
    # Given users who submit, fork, cancel and answer missions while executions ask and end, in any order
    world = World(limit=limit)
    note(f"ops={ops} limit={limit}")
    owner: dict[str, str] = {}
    cancelled_before_start: set[str] = set()
    ended: list[str] = []
    keys: set[tuple[str, str]] = set()
    answered: set[str] = set()

    def running(user: str) -> set[str]:
        return {m for m in set(world.executions.started) if owner[m] == user and world.status(m) == "running"}

    def check() -> None:
        started = Counter(world.executions.started)
        assert all(count == 1 for count in started.values()), started  # nothing starts twice
        assert not cancelled_before_start & set(started)  # nothing cancelled while queued ever starts
        for user in ("a", "b"):
            assert len(running(user)) <= limit  # never over the limit
            if world.launcher.dispatcher.queued(user):  # a queued mission only waits for a full user
                assert len(world.launcher.dispatcher.running(user)) == limit

    for op in ops:
        known = sorted(owner)
        if op[0] == "submit":
            _, user, priority, key = op
            mission_id = world.submit(user, priority=priority, idempotency_key=key)
            assert (key is not None and (user, key) in keys) == (mission_id in owner)
            if key is not None:
                keys.add((user, key))
            owner[mission_id] = user
        elif op[0] == "fork" and known:
            source = known[op[1] % len(known)]
            try:
                result = world.launcher.fork(source, "0001-start", owner[source])
            except NotFound:  # never started: there is no checkpoint to carry on from
                assert source not in world.executions.started
            else:
                owner[result.mission_id] = owner[source]
        elif op[0] == "cancel" and known:
            mission_id = known[op[1] % len(known)]
            before = world.status(mission_id)
            try:
                world.control.cancel(world.missions.get(mission_id))
            except ConflictError:
                assert before in TERMINAL
            else:
                if mission_id not in world.executions.started:
                    cancelled_before_start.add(mission_id)
                else:  # Step Functions reports the stopped execution later, as it does in AWS
                    arn = world.missions.get(mission_id).execution_arn
                    world.control.execution_ended(arn or mission_id, "ABORTED")
                assert world.status(mission_id) == MissionStatus.CANCELLED
        elif op[0] == "ask":
            pool = sorted(running("a") | running("b"))
            if pool:
                mission_id = pool[op[1] % len(pool)]
                answered.discard(mission_id)  # a new question
                world.ask(mission_id)
        elif op[0] == "answer":
            asking = sorted(m for m in owner if world.status(m) == "interrupted" and m not in answered)
            if asking:
                mission_id = asking[op[1] % len(asking)]
                answered.add(mission_id)  # until it asks again
                resumed = world.answer(mission_id)
                assert resumed == (world.status(mission_id) == "running")
        elif op[0] in ("end", "end_again"):
            pool = sorted(running("a") | running("b")) if op[0] == "end" else sorted(ended)
            if pool:
                mission_id = pool[op[1] % len(pool)]
                ended.append(mission_id)
                world.end(mission_id)
        check()

    # When every question is answered and every execution runs to its end
    while True:
        for mission_id in sorted(m for m in owner if world.status(m) == "interrupted" and m not in answered):
            answered.add(mission_id)
            world.answer(mission_id)
            check()
        if not running("a") | running("b"):
            break
        for mission_id in sorted(running("a") | running("b")):
            world.end(mission_id)
            check()
    # Then every mission not cancelled before its start started exactly once, and none is left waiting
    assert set(world.executions.started) == set(owner) - cancelled_before_start
    assert not world.launcher.dispatcher.queued("a") and not world.launcher.dispatcher.queued("b")
    assert all(world.status(m) in TERMINAL for m in owner), {m: world.status(m) for m in owner}


def test_whoever_ends_a_mission_adds_its_calls_to_the_usage_totals_once():
    # Given a world whose control keeps usage, and three running missions, each with two model calls
    world = World(limit=3)
    usage = InMemoryUsageStore()
    control = _control(world, usage=lambda: usage)
    cancelled, timed_out, ended_by_stage = (world.submit() for _ in range(3))
    for mission_id in (cancelled, timed_out, ended_by_stage):
        for _ in range(2):
            usage.record(UsageRecord(mission_id=mission_id, user_id="ann", capability="cap", stage="s", agent="s",
                                     provider="scripted", model="scripted"))  # fmt: skip
    # When one is cancelled (its stopped execution's end reported after), one's execution times out, and one
    # was ended by its final stage before its execution's end came
    control.cancel(world.missions.get(cancelled))
    control.execution_ended(world.missions.get(cancelled).execution_arn or f"x:{cancelled}", "ABORTED")
    control.execution_ended(world.missions.get(timed_out).execution_arn or f"x:{timed_out}", "TIMED_OUT")
    Lifecycle(world.missions).end(ended_by_stage, MissionStatus.COMPLETED, terminal_reason="completed")
    control.execution_ended(world.missions.get(ended_by_stage).execution_arn or f"x:{ended_by_stage}", "SUCCEEDED")
    # Then the two this control ended are counted, once each; the stage's own end is the stage's to count
    assert [(t.agent, t.calls) for t in usage.totals("cap", "ann")] == [("s", 4)]
    assert world.status(cancelled) == MissionStatus.CANCELLED and world.status(timed_out) == MissionStatus.FAILED
