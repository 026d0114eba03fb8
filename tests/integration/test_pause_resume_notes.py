"""Pause, resume and steer a running mission, on the emulation (moto executing the compiled machines).

A pause ends the stage in flight (its checkpoint written), then the mission's Standard execution waits on
a task token, as for a question: no stage runs, and the mission holds none of its user's running slots.
The resume hands the token back (through the dispatcher: it waits for a slot like an answer does) and
the mission goes on from where the routing had sent it, with its whole envelope and the notes its user
sent meanwhile. Cancel works from paused.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.core.capability.registry import Ctx, stage
from missions.core.errors import ConflictError
from missions.core.mission.requests import MissionRequest
from missions.local.emulation import LocalCloud
from tests.integration.conftest import chain, final_answer, make_capability, with_capabilities
from tests.integration.test_lifecycle_cancel_fork import GATE, Gate, hold, until
from tests.support.stages import Out

WAIT = 30.0


@stage
def work(ctx: Ctx, hold: Out) -> Out:
    """What the stage after the pause received: the notes in its context, and what ran before it."""
    return Out(notes=[n["text"] for n in ctx.context.get("notes", [])], held=hold is not None)


PAUSABLE = make_capability("t_pausable", chain("hold", "work", "final"), hold, work, final_answer())


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    names, known = with_capabilities(PAUSABLE)
    with LocalCloud(names, registry=known) as local:
        yield local


@pytest.fixture()
def gate() -> Iterator[Gate]:
    GATE.close()
    yield GATE
    GATE.open()


def status_of(cloud: LocalCloud, mission_id: str) -> str:
    return cloud.runtime.missions.get(mission_id).status


def paused_mission(cloud: LocalCloud, gate: Gate, user: str) -> str:
    """A mission paused while its first stage ran: that stage ended, and the execution waits."""
    request = MissionRequest.parse(capability=PAUSABLE.name, goal="plan the trip", user_id=user)
    mission_id = cloud.runtime.launcher.submit(request).mission_id
    gate.until_entered(1)
    until(lambda: cloud.runtime.missions.get(mission_id).execution_arn is not None, "the execution started")
    cloud.runtime.control.pause(cloud.runtime.missions.get(mission_id))
    assert status_of(cloud, mission_id) == "pausing"
    gate.open()
    # its pause is recorded in order: the status, the running slot given up, then the event
    until(lambda: "mission.paused" in event_types(cloud, mission_id), "the mission paused")
    assert status_of(cloud, mission_id) == "paused"
    return mission_id


def event_types(cloud: LocalCloud, mission_id: str) -> list[str]:
    events, _ = cloud.events(mission_id)
    return [e.type for e in events]


def test_a_paused_mission_waits_holding_no_slot_and_resumes_with_its_context_and_notes(cloud: LocalCloud, gate: Gate):
    # Given a mission its user paused while its first stage ran
    mission_id = paused_mission(cloud, gate, "pia")
    record = cloud.runtime.missions.get(mission_id)
    # Then the stage in flight ended and checkpointed, and the execution waits (no stage runs) ...
    assert record.stage == "hold" and record.next_stage == "work" and record.paused_at
    assert [c.stage for c in cloud.runtime.checkpoints.list(mission_id)] == ["hold"]
    assert cloud.status(mission_id) == "RUNNING"
    # ... holding none of its user's running slots
    assert mission_id not in cloud.runtime.launcher.dispatcher.running("pia")
    # When the user sends a note while it is paused, then resumes it
    cloud.runtime.control.note(cloud.runtime.missions.get(mission_id), "the budget is 500")
    assert cloud.runtime.control.resume(cloud.runtime.missions.get(mission_id)) is True
    # Then it goes on from where it stopped and completes; the next stage got the note and what ran before
    assert cloud.wait(mission_id, WAIT) == "SUCCEEDED"
    record = cloud.runtime.missions.get(mission_id)
    assert record.status == "completed" and record.pause_token is None
    assert [c.stage for c in cloud.runtime.checkpoints.list(mission_id)] == ["hold", "work", "final"]
    work_output = _output_of(cloud, mission_id, "work")
    assert work_output == {"notes": ["the budget is 500"], "held": True}
    # And the timeline tells the story
    types = event_types(cloud, mission_id)
    for expected in ("mission.pausing", "mission.paused", "note.received", "mission.resumed", "note.delivered"):
        assert expected in types, (expected, types)
    assert types.index("mission.paused") < types.index("mission.resumed") < types.index("note.delivered")


def test_a_note_to_a_running_mission_reaches_the_next_stage(cloud: LocalCloud, gate: Gate):
    # Given a mission whose first stage is in flight
    request = MissionRequest.parse(capability=PAUSABLE.name, goal="plan the trip", user_id="noa")
    mission_id = cloud.runtime.launcher.submit(request).mission_id
    gate.until_entered(1)
    # When its user steers it, and the stage ends
    cloud.runtime.control.note(cloud.runtime.missions.get(mission_id), "skip the museums")
    gate.open()
    # Then the next stage received the note
    assert cloud.wait(mission_id, WAIT) == "SUCCEEDED"
    assert _output_of(cloud, mission_id, "work")["notes"] == ["skip the museums"]
    # And a note to the finished mission is refused, saying why
    with pytest.raises(ConflictError, match="already completed"):
        cloud.runtime.control.note(cloud.runtime.missions.get(mission_id), "too late")


def test_a_paused_mission_is_cancelled(cloud: LocalCloud, gate: Gate):
    # Given a paused mission
    mission_id = paused_mission(cloud, gate, "kai")
    # When its user cancels it
    cloud.runtime.control.cancel(cloud.runtime.missions.get(mission_id))
    # Then it is cancelled, its execution ends, and it can no longer be resumed
    until(lambda: cloud.status(mission_id) != "RUNNING", "the execution ended")
    record = cloud.runtime.missions.get(mission_id)
    assert (record.status, record.pause_token) == ("cancelled", None)
    with pytest.raises(ConflictError):
        cloud.runtime.control.resume(record)


def test_only_a_running_mission_pauses_and_only_a_paused_one_resumes(cloud: LocalCloud, gate: Gate):
    # Given a mission that ended
    gate.open()
    request = MissionRequest.parse(capability=PAUSABLE.name, goal="plan the trip", user_id="ode")
    mission_id = cloud.runtime.launcher.submit(request).mission_id
    assert cloud.wait(mission_id, WAIT) == "SUCCEEDED"
    record = cloud.runtime.missions.get(mission_id)
    # Then pausing or resuming it is a conflict that says why, and changes nothing
    with pytest.raises(ConflictError, match="already completed"):
        cloud.runtime.control.pause(record)
    with pytest.raises(ConflictError, match="already completed"):
        cloud.runtime.control.resume(record)
    assert status_of(cloud, mission_id) == "completed"


def _output_of(cloud: LocalCloud, mission_id: str, stage_name: str) -> dict:
    from missions.service.checkpoints import state_at

    last = cloud.runtime.checkpoints.list(mission_id)[-1]
    envelope = cloud.runtime.codec.decode(state_at(cloud.runtime.checkpoints, mission_id, last))
    return envelope.output(stage_name)
