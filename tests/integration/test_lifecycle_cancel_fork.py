"""Cancel cancels in every state, every start goes through the dispatcher, and waiting for a human holds
no running slot (on the emulation).

Before the lifecycle owned the status: a queued mission that was cancelled later started and ended
`completed`; a stage finishing after a cancel wrote `running` back over `cancelled`; a fork skipped
the dispatcher, so a user at the limit of 3 running missions had 4; the CLI's emulation started
missions past the limit too; and three unanswered questions held all three of a user's slots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from missions.core.capability.registry import Ctx, stage
from missions.core.errors import ConflictError
from missions.core.mission.envelope import InterruptKind
from missions.core.mission.requests import MissionRequest
from missions.local.emulation import LocalCloud
from tests.integration.conftest import chain, final_answer, make_capability, with_capabilities
from tests.support.stages import Out

WAIT = 30.0


class Gate:
    """Stages in flight until the test opens the gate: each holds its mission's running slot."""

    def __init__(self) -> None:
        self.entered = 0
        self._changed = threading.Condition()
        self._open = threading.Event()

    def hold(self) -> None:
        with self._changed:
            self.entered += 1
            self._changed.notify_all()
        self._open.wait(WAIT)

    def until_entered(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.entered >= count, WAIT), f"{self.entered} of {count} in flight"

    def close(self) -> None:
        self._open.clear()
        with self._changed:
            self.entered = 0

    def open(self) -> None:
        self._open.set()


GATE = Gate()


@stage
def hold() -> Out:
    GATE.hold()
    return Out()


@stage
def ask(ctx: Ctx) -> Out:
    ctx.ask(InterruptKind.CLARIFICATION, "which fence?")  # once resumed, the answer: nothing to ask
    return Out()


SLOW = make_capability("t_slow", chain("hold", "final"), hold, final_answer())
ASKS = make_capability("t_asks", chain("ask", "final"), ask, final_answer())


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    names, known = with_capabilities(SLOW, ASKS)
    with LocalCloud(names, registry=known) as local:
        yield local


@pytest.fixture()
def gate() -> Iterator[Gate]:
    GATE.close()
    yield GATE
    GATE.open()  # whatever the test left in flight may finish


def submit(cloud: LocalCloud, capability: str, user: str) -> str:
    request = MissionRequest.parse(capability=capability, goal="paint the fence", user_id=user)
    return cloud.runtime.launcher.submit(request).mission_id


def until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise TimeoutError(what)


def in_flight(cloud: LocalCloud, gate: Gate, user: str, count: int) -> list[str]:
    """`count` missions of the user whose stage is running: each holds one of the user's slots."""
    ids = [submit(cloud, SLOW.name, user) for _ in range(count)]
    gate.until_entered(count)
    return ids


def waiting_for_a_human(cloud: LocalCloud, user: str, count: int) -> list[str]:
    ids = [submit(cloud, ASKS.name, user) for _ in range(count)]
    for mission_id in ids:
        until(lambda m=mission_id: cloud.runtime.missions.get(m).status == "interrupted", f"{mission_id} waits")
    return ids


def executions_named(cloud: LocalCloud, capability: str, mission_id: str) -> list[dict]:
    arn = cloud.state_machines[capability]
    return [e for e in cloud.sfn.list_executions(stateMachineArn=arn)["executions"] if e["name"] == mission_id]


def cancel_all(cloud: LocalCloud, ids: list[str]) -> None:
    for mission_id in ids:
        record = cloud.runtime.missions.get(mission_id)
        if record.status not in ("completed", "failed", "cancelled"):
            cloud.runtime.control.cancel(record)


def test_a_queued_mission_that_was_cancelled_never_starts(cloud: LocalCloud, gate: Gate):
    # Given a user whose 3 running slots are held by stages in flight, and a 4th mission queued
    holding = in_flight(cloud, gate, "quinn", 3)
    queued = submit(cloud, ASKS.name, "quinn")
    assert cloud.runtime.missions.get(queued).status == "queued"
    # When the user cancels the queued one, then a slot frees up
    cloud.runtime.control.cancel(cloud.runtime.missions.get(queued))
    cloud.runtime.control.cancel(cloud.runtime.missions.get(holding[0]))
    # Then the cancelled mission stays cancelled, never started, and left the queue
    time.sleep(0.3)
    record = cloud.runtime.missions.get(queued)
    assert (record.status, record.terminal_reason, record.execution_arn) == ("cancelled", "cancelled", None)
    assert executions_named(cloud, ASKS.name, queued) == []
    assert cloud.runtime.launcher.dispatcher.queued("quinn") == []
    cancel_all(cloud, holding)


def test_a_mission_cancelled_while_a_stage_runs_stays_cancelled(cloud: LocalCloud, gate: Gate):
    # Given a mission whose stage is in flight
    [mission_id] = in_flight(cloud, gate, "rita", 1)
    until(lambda: cloud.runtime.missions.get(mission_id).execution_arn is not None, "the execution started")
    # When the user cancels it, and only then the stage finishes and reports its progress
    cloud.runtime.control.cancel(cloud.runtime.missions.get(mission_id))
    gate.open()
    # Then the execution was stopped and the late stage could not write the mission back to running
    until(lambda: cloud.status(mission_id) != "RUNNING", "the execution ended")
    time.sleep(0.3)
    record = cloud.runtime.missions.get(mission_id)
    assert cloud.status(mission_id) == "ABORTED"
    assert (record.status, record.terminal_reason) == ("cancelled", "cancelled")
    # and cancelling again is a conflict, not a second cancel
    with pytest.raises(ConflictError):
        cloud.runtime.control.cancel(record)


def test_a_mission_waiting_for_a_human_is_cancelled_and_its_question_can_no_longer_be_answered(cloud: LocalCloud):
    [mission_id] = waiting_for_a_human(cloud, "sam", 1)
    [question] = cloud.runtime.interrupts.pending(mission_id)
    cloud.runtime.control.cancel(cloud.runtime.missions.get(mission_id))
    until(lambda: cloud.status(mission_id) != "RUNNING", "the execution ended")
    record = cloud.runtime.missions.get(mission_id)
    assert (record.status, record.pending_interrupt) == ("cancelled", None)
    assert cloud.runtime.interrupts.get(mission_id, question.interrupt_id).status == "expired"
    with pytest.raises(ConflictError):
        cloud.answer(mission_id, question.interrupt_id, {"text": "the white one"})
    assert cloud.runtime.missions.get(mission_id).status == "cancelled"


def test_a_fork_at_the_limit_is_queued_not_a_fourth_running_mission(cloud: LocalCloud, gate: Gate):
    # Given a user with a mission waiting for an answer, and 3 missions running (their stages in flight)
    [asking] = waiting_for_a_human(cloud, "tara", 1)
    checkpoint = cloud.runtime.checkpoints.list(asking)[0]
    holding = in_flight(cloud, gate, "tara", 3)
    # When the user forks the waiting one
    forked = cloud.runtime.launcher.fork(asking, checkpoint.checkpoint_id, "tara")
    # Then the fork waits in the queue: never more than 3 running for that user
    assert forked.status == "queued"
    assert cloud.runtime.missions.get(forked.mission_id).status == "queued"
    assert executions_named(cloud, ASKS.name, forked.mission_id) == []
    assert len(cloud.runtime.launcher.dispatcher.running("tara")) == 3
    # and once a slot frees, it starts from the checkpoint (and asks its question again)
    cloud.runtime.control.cancel(cloud.runtime.missions.get(holding[0]))
    until(lambda: cloud.runtime.missions.get(forked.mission_id).status == "interrupted", "the fork started")
    assert len(executions_named(cloud, ASKS.name, forked.mission_id)) == 1
    cancel_all(cloud, [*holding, asking, forked.mission_id])


def test_the_cli_emulation_starts_through_the_dispatcher(cloud: LocalCloud, gate: Gate):
    # Given a user of the CLI's emulation whose 3 running slots are held by stages in flight
    holding = [cloud.start(SLOW.name, "paint the fence", user_id="uma") for _ in range(3)]
    gate.until_entered(3)
    # When a 4th starts the way `missions run` starts one
    fourth = cloud.start(ASKS.name, "paint the fence", user_id="uma")
    # Then it waits in the queue, and starts as soon as a slot frees
    assert cloud.status(fourth) == "QUEUED" and cloud.runtime.missions.get(fourth).trigger == "cli"
    cloud.runtime.control.cancel(cloud.runtime.missions.get(holding[0]))
    assert cloud.wait(fourth, WAIT, until_interrupt=True) == "INTERRUPTED"
    cancel_all(cloud, [*holding, fourth])


def test_questions_waiting_for_answers_do_not_block_the_next_mission(cloud: LocalCloud, gate: Gate):
    # Given a user whose three missions all wait for an answer (they used to hold all three slots)
    asking = waiting_for_a_human(cloud, "vic", 3)
    # When the user starts another one / Then it runs at once
    [running] = in_flight(cloud, gate, "vic", 1)
    assert cloud.runtime.missions.get(running).status == "running"
    # And answers then wait for slots: with 3 stages in flight, an answer is queued, not a 4th running mission
    more = in_flight(cloud, gate, "vic", 2)
    [question] = cloud.runtime.interrupts.pending(asking[0])
    _, resumed_now = cloud.runtime.interrupt_service.answer(asking[0], question.interrupt_id, {"text": "the white one"})
    assert not resumed_now and len(cloud.runtime.launcher.dispatcher.running("vic")) == 3
    # And once a slot frees, the answer is handed over first and the mission completes
    gate.open()
    assert cloud.wait(asking[0], WAIT) == "SUCCEEDED"
    assert cloud.runtime.missions.get(asking[0]).status == "completed"
    cancel_all(cloud, [*asking, running, *more])
