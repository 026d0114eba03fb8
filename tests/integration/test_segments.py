"""Missions on two levels, on the emulation: the stages run in Express segments, each starting the next,
on behalf of a Standard execution that waits on one task token for the whole chain, waits between
chains for people, and stops when the user cancels.

The pipelines here hand back every 3 stages (`segment_hops=3`), so a mission of a dozen stages
crosses several segments. (Every other mission of the suite runs on two levels too, in segments of
500 stages; the bench runs every capability on both layouts.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.stages import StageFunction
from missions.core.mission.envelope import Bounds, InterruptKind
from missions.core.pipeline.config import AgentConfig, EdgeLimit, RoutingRule
from missions.local.emulation import LocalCloud
from tests.integration.conftest import final_answer, make_capability, with_capabilities
from tests.support.stages import stage_named

LOOPS = 10  # the loop stage runs this many times: four segments of 3 stages, then the final stage
WAIT = 30.0


class Looped(BaseModel):
    again: bool


@stage
def loop(ctx: Ctx) -> Looped:
    return Looped(again=ctx.counters.agent_hops < LOOPS)


def _loop_and_ask(ctx: Ctx) -> Looped:
    if ctx.counters.agent_hops == 4 and ctx.answer is None:  # in the second segment
        ctx.ask(InterruptKind.CLARIFICATION, "which fence?")
    return Looped(again=ctx.counters.agent_hops < LOOPS)


class Held:
    """The loop stage of HELD waits here from its 4th run until the test lets it go."""

    def __init__(self) -> None:
        self.runs = 0
        self.entered = threading.Event()
        self.release = threading.Event()


HOLD = Held()


def _held_loop(ctx: Ctx) -> Looped:
    HOLD.runs += 1
    if HOLD.runs == 4:
        HOLD.entered.set()
        HOLD.release.wait(WAIT)
    return Looped(again=True)


loop_and_ask = stage_named("loop", _loop_and_ask)
held_loop = stage_named("loop", _held_loop)


def _looping(name: str, function: StageFunction, **pipeline: Any) -> Capability:
    agents = [
        AgentConfig(
            name="loop",
            routing_rules=[RoutingRule(field="again", value=True, target="loop")],
            default_next="final",
            max_retries=0,
        ),
        AgentConfig(name="final"),
    ]
    return make_capability(
        name,
        agents,
        function,
        final_answer(),
        edge_limits=[EdgeLimit(from_stage="loop", to_stage="loop", max_count=50)],
        bounds=Bounds(max_agent_hops=60),
        segment_hops=3,
        **pipeline,
    )


LOOPING = _looping("t_segments", loop)
ASKING = _looping("t_segments_ask", loop_and_ask, resume={"clarification": "loop"})
HELD = _looping("t_segments_held", held_loop)


@pytest.fixture(scope="module")
def two() -> Iterator[LocalCloud]:
    names, known = with_capabilities(LOOPING, ASKING, HELD)
    with LocalCloud(names, registry=known) as cloud:
        yield cloud


def stages_run(cloud: LocalCloud, mission_id: str) -> list[str]:
    return [e.stage for e in cloud.events(mission_id)[0] if e.type.value == "agent_started"]


def test_a_mission_crosses_segments_and_ends_as_on_one_machine(two: LocalCloud):
    # When a mission of 11 stages runs in segments of 3
    segmented = two.run(LOOPING.name, "loop ten times")
    # Then it completes with every stage run once in order, as on one machine
    assert segmented.status == "SUCCEEDED"
    assert segmented.envelope.terminal_reason == "completed"
    assert stages_run(two, segmented.mission_id) == ["loop"] * LOOPS + ["final"]
    assert segmented.envelope.counters.agent_hops == LOOPS + 1
    # and the two-level one ran its stages in Express segments of 3 stages each, named after the mission
    segments = two.segments(segmented.mission_id)
    assert len(segments) == 4 and {s["status"] for s in segments} == {"SUCCEEDED"}
    # (the first as the mission's machine started it, the next by their chain, which began at hop 0)
    chain = f"{segmented.mission_id}-0-0"
    assert [s["name"] for s in segments] == [chain, *(f"{chain}-{hops}" for hops in (3, 6, 9))]
    # while its own (Standard) execution ran no stage itself: it started the first segment, the segments
    # chained themselves, and the last answered its token; so it paid 3 transitions for 4 segments, as for one
    own = [e for e in two.history(segmented.mission_id, segments=False) if e["type"].endswith("StateEntered")]
    assert [e["stateEnteredEventDetails"]["name"] for e in own] == ["segment", "segment.exit", "mission.done"]


def test_a_question_in_a_later_segment_waits_on_the_mission_and_the_answer_starts_the_next(two: LocalCloud):
    # Given a mission that asks in its second segment
    mission_id = two.start(ASKING.name, "loop and ask")
    assert two.wait(mission_id, WAIT, until_interrupt=True) == "INTERRUPTED"
    [question] = two.runtime.interrupts.pending(mission_id)
    # Then while it waits, no segment runs: the mission's Standard execution holds the question
    assert {s["status"] for s in two.segments(mission_id)} == {"SUCCEEDED"}
    # When the user answers
    two.answer(mission_id, question.interrupt_id, {"text": "the white one"})
    # Then the next segment starts at the configured resume stage, and the mission completes
    assert two.wait(mission_id, WAIT) == "SUCCEEDED"
    outcome = two.outcome(mission_id)
    assert outcome.envelope.terminal_reason == "completed"
    assert stages_run(two, mission_id).count("final") == 1
    assert two.runtime.missions.get(mission_id).status == "completed"


def test_a_cancelled_mission_runs_no_stage_after_the_one_in_flight(two: LocalCloud):
    # Given a mission whose 4th stage (in its second segment) is in flight
    mission_id = two.start(HELD.name, "loop until cancelled")
    assert HOLD.entered.wait(WAIT)
    # When the user cancels it, and then the stage finishes
    two.runtime.control.cancel(two.runtime.missions.get(mission_id))
    HOLD.release.set()
    # Then the mission stays cancelled, and its segment handed back after that stage: an Express
    # execution cannot be stopped from outside, so the stage that could not record its progress said so
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and any(s["status"] == "RUNNING" for s in two.segments(mission_id)):
        time.sleep(0.05)
    assert not any(s["status"] == "RUNNING" for s in two.segments(mission_id))
    while time.monotonic() < deadline and two.status(mission_id) == "RUNNING":
        time.sleep(0.05)
    assert two.status(mission_id) == "ABORTED"
    assert HOLD.runs == 4
    # and it started no segment after its own (it knew its mission had ended)
    assert len(two.segments(mission_id)) == 2
    assert two.runtime.missions.get(mission_id).status == "cancelled"
