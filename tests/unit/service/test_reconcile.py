"""The reconciler: a process that dies anywhere in a submit, a drain or a resume loses nothing.

Each test runs an operation once to count the port calls it makes, then once per call with the
process "dying" at that call (every call from there on fails, as nothing a dead process does
reaches a store), then reconciles in a fresh process and checks that the mission was either never
recorded, or started exactly once, holds exactly its slot, and left nothing in the journal.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from missions.app.runtime import Runtime
from missions.core.errors import NotFound
from missions.core.mission.envelope import InterruptKind, InterruptResponse, Resume
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import MissionStatus
from missions.ports.interrupts import InterruptRecord
from missions.service.lifecycle import Lifecycle
from tests.support.fakes import memory_runtime

FAR_FUTURE = time.time_ns() + 10**15  # every note and claim is stale by then


class Died(BaseException):
    """The process died: not an Exception, so no handler of the code under test catches it."""


class Process:
    """Counts calls to the wrapped ports and dies at call number `die_at` (never, when None)."""

    def __init__(self, die_at: int | None = None):
        self.calls = 0
        self.die_at = die_at
        self.die_after: str | None = None  # or right after the first call of this method
        self.dead = False

    def wrap(self, port: Any) -> Any:
        process = self

        class Port:
            def __getattr__(self, name: str) -> Any:
                target = getattr(port, name)
                if not callable(target):
                    return target

                def call(*args: Any, **kwargs: Any) -> Any:
                    process.calls += 1
                    if process.dead or process.calls == process.die_at:
                        process.dead = True
                        raise Died(f"{name} (call {process.calls})")
                    result = target(*args, **kwargs)
                    if name == process.die_after:
                        process.dead = True
                        raise Died(f"after {name}")
                    return result

                return call

        return Port()


def runtime_dying_at(die_at: int | None, limit: int = 3) -> tuple[Runtime, Runtime, Process]:
    """The runtime whose process may die, and a second one on the same stores (the next process)."""
    first = memory_runtime(concurrency_limit=limit)
    process = Process(die_at)
    survivor = memory_runtime(concurrency_limit=limit)
    for name in ("missions", "dispatch_store", "executions", "checkpoints", "codec", "repository_store"):
        setattr(survivor, name, getattr(first, name))
    for name in ("missions", "dispatch_store", "executions"):
        setattr(first, name, process.wrap(getattr(first, name)))
    return first, survivor, process


def request(goal: str = "explain the dispatcher", user: str = "ann") -> MissionRequest:
    return MissionRequest(capability="shopping", goal=goal, user_id=user)


def crash_points(operation: Any) -> range:
    """1..N: each port call the operation makes when nothing dies."""
    runtime, _, process = runtime_dying_at(None)
    operation(runtime)
    assert process.calls > 0
    return range(1, process.calls + 1)


def reconcile(survivor: Runtime) -> dict[str, Any]:
    return survivor.launcher.reconcile(now=lambda: FAR_FUTURE)


def assert_journal_empty(survivor: Runtime) -> None:
    assert survivor.dispatch_store.stranded(FAR_FUTURE) == []


def submit(runtime: Runtime) -> None:
    runtime.launcher.submit(request().model_copy(update={"mission_id": "m_one"}))


@pytest.mark.parametrize("die_at", crash_points(submit))
def test_a_submit_that_dies_anywhere_is_finished_or_never_happened(die_at):
    # Given a submit whose process dies at one of its port calls
    runtime, survivor, process = runtime_dying_at(die_at)
    with pytest.raises(Died):
        submit(runtime)
    # When the reconciler runs in the next process
    report = reconcile(survivor)
    # Then the mission was never recorded, or it started exactly once and holds exactly its slot
    assert report["failures"] == {}
    started = survivor.executions.started
    try:
        record = survivor.missions.get("m_one")
    except NotFound:
        assert started == [] and survivor.dispatch_store.running("ann") == set()
    else:
        assert started == ["m_one"]
        assert record.status == MissionStatus.RUNNING and record.execution_arn
        assert survivor.dispatch_store.running("ann") == {"m_one"}
    assert survivor.dispatch_store.queued("ann") == []
    assert_journal_empty(survivor)


def finish_first(runtime: Runtime) -> None:
    """With a limit of 1, the first mission ends and the drain starts the queued second."""
    runtime.launcher.finished("m_first")


def queued_behind_one(runtime: Runtime) -> None:
    Lifecycle(runtime.missions).move("m_first", MissionStatus.COMPLETED)


@pytest.mark.parametrize("die_at", range(1, 40))
def test_a_drain_that_dies_anywhere_starts_the_queued_mission_once(die_at):
    # Given one running mission at a limit of 1, and a second one queued behind it
    runtime, survivor, process = runtime_dying_at(None, limit=1)
    runtime.launcher.submit(request("first").model_copy(update={"mission_id": "m_first"}))
    runtime.launcher.submit(request("second").model_copy(update={"mission_id": "m_second"}))
    assert runtime.executions.started == ["m_first"]
    queued_behind_one(runtime)
    # When the first ends and the drain that starts the second dies at a port call
    process.calls, process.die_at = 0, die_at
    try:
        finish_first(runtime)
    except Died:
        pass
    else:
        assert process.calls < die_at  # no crash point left: the drain made fewer calls
    # Then, once the ended execution's event is delivered again (Lambda retries an async event whose
    # invocation failed) and the reconciler ran, the second runs exactly once, in the one slot
    survivor.launcher.finished("m_first")
    report = reconcile(survivor)
    assert report["failures"] == {}
    assert survivor.executions.started == ["m_first", "m_second"]
    assert survivor.missions.get("m_second").status == MissionStatus.RUNNING
    assert survivor.dispatch_store.running("ann") == {"m_second"}
    assert_journal_empty(survivor)


def waiting_mission(runtime: Runtime) -> InterruptRecord:
    """A running mission that asked a question (its slot released), with the interrupt it waits on."""
    runtime.launcher.submit(request().model_copy(update={"mission_id": "m_asks"}))
    interrupt = InterruptRecord(
        mission_id="m_asks",
        interrupt_id="i_1",
        kind=InterruptKind.CONFIRMATION,
        stage="plan",
        question="Go ahead?",
        task_token="token-1",
    )
    Lifecycle(runtime.missions).waiting("m_asks", "i_1")
    runtime.launcher.waiting("m_asks")
    return interrupt


def answer_of() -> str:
    return json.dumps(Resume(interrupt_id="i_1", response=InterruptResponse(approved=True)).model_dump(mode="json"))


@pytest.mark.parametrize("die_at", range(1, 20))
def test_a_resume_that_dies_anywhere_hands_the_answer_over_once(die_at):
    # Given a mission waiting for an answer
    runtime, survivor, process = runtime_dying_at(None)
    interrupt = waiting_mission(runtime)
    # When the answer is given and the process handing it over dies at a port call
    process.calls, process.die_at = 0, die_at
    try:
        runtime.launcher.resume(interrupt, answer_of())
    except Died:
        pass
    # Then after reconciling, the execution got the answer exactly once and the mission runs
    report = reconcile(survivor)
    assert report["failures"] == {}
    answered = [token for token, _ in survivor.executions.answered]
    record = survivor.missions.get("m_asks")
    if answered:
        assert answered == ["token-1"]
        assert record.status == MissionStatus.RUNNING
        assert survivor.dispatch_store.running("ann") == {"m_asks"}
    else:  # it died before the answer was queued: the question is still the user's to answer
        assert record.status == MissionStatus.INTERRUPTED
        assert survivor.dispatch_store.running("ann") == set()
    assert survivor.dispatch_store.queued("ann") == []
    assert_journal_empty(survivor)


def test_a_mission_that_took_its_slot_and_was_cancelled_before_the_reconciler_frees_it():
    # Given a process that died right after its submit took the mission's slot (before marking it running)
    runtime, survivor, process = runtime_dying_at(None)
    process.die_after = "take_slot"
    with pytest.raises(Died):
        runtime.launcher.submit(request().model_copy(update={"mission_id": "m_gone"}))
    assert survivor.dispatch_store.running("ann") == {"m_gone"}
    _cancelled_then_reconciled_frees_its_slot(survivor, "m_gone")


def test_a_claimed_mission_cancelled_before_the_reconciler_frees_its_slot():
    # Given one running mission at a limit of 1 and a second queued, and a process that died right after
    # claiming the second (before marking it running) as the first ended
    runtime, survivor, process = runtime_dying_at(None, limit=1)
    runtime.launcher.submit(request("first").model_copy(update={"mission_id": "m_first"}))
    runtime.launcher.submit(request("second").model_copy(update={"mission_id": "m_gone"}))
    queued_behind_one(runtime)
    process.die_after = "claim"
    with pytest.raises(Died):
        finish_first(runtime)
    assert survivor.dispatch_store.running("ann") == {"m_gone"}
    _cancelled_then_reconciled_frees_its_slot(survivor, "m_gone", started_before=["m_first"])


def _cancelled_then_reconciled_frees_its_slot(
    survivor: Runtime, mission_id: str, started_before: list[str] | None = None
) -> None:
    # When the user cancels it, then the reconciler runs
    survivor.control.cancel(survivor.missions.get(mission_id))
    report = reconcile(survivor)
    # Then it never starts and its slot is free
    assert report["released"] == [mission_id]
    assert survivor.executions.started == (started_before or [])
    assert survivor.dispatch_store.running("ann") == set()
    assert_journal_empty(survivor)


def test_fresh_notes_and_claims_are_left_alone():
    # Given a request noted and recorded just now by a process that may still be queueing it
    runtime, survivor, process = runtime_dying_at(3)
    with pytest.raises(Died):
        submit(runtime)
    assert survivor.missions.get("m_one").status == MissionStatus.QUEUED
    assert [item.kind for item in survivor.dispatch_store.stranded(FAR_FUTURE)] == ["pending"]
    # When the reconciler runs with the real stale-after
    report = survivor.launcher.reconcile()
    # Then it touches nothing younger than that
    assert report == {"queued": [], "started": [], "released": [], "dropped": [], "failures": {}, "held_started": []}
    assert len(survivor.dispatch_store.stranded(FAR_FUTURE)) == 1
