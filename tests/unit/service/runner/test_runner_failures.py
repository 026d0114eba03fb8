"""Stages that fail in the stage runner: raised errors, bad answers, and retries after dying mid-way (the
StageRunner, driven stage by stage by the DirectDriver, the state machine's stand-in).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from missions.adapters.memory.events import MemoryEventStore
from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.stages import StageFunction
from missions.core.mission.events import Event, EventType
from missions.core.mission.requests import MissionRequest
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.ports.missions import MissionRecord
from missions.service.launcher import build_envelope
from missions.service.runner import StageRunner
from tests.support.driver import DirectDriver
from tests.support.runner import catalog, event_types, final, make, stages
from tests.support.stages import Answer, Out


def test_a_stage_that_always_raises_ends_through_finalize():
    # Given a stage that always fails
    @stage
    def boom() -> Out:
        raise RuntimeError("kaboom")

    seen: dict[str, Any] = {}

    @stage
    def done(ctx: Ctx) -> Answer:
        seen["failure"] = dict(ctx.failure) if ctx.failure is not None else None
        return Answer(answer="partial")

    cap = make(
        "t_boom",
        [
            AgentConfig(name="ok", default_next="boom"),
            AgentConfig(name="boom", default_next="done"),
            AgentConfig(name="done"),
        ],
        boom,
        done,
    )
    driver = DirectDriver(cap)
    # When
    env = driver.run("fail please")
    # Then
    assert env.terminal_reason == "stage_failed:boom"
    assert stages(driver, env) == ["ok", "done"]
    assert [(s.stage, s.mode) for s in driver.steps] == [("ok", "run"), ("boom", "run"), ("done", "finalize")]
    assert [(e.stage, e.kind, e.message) for e in env.errors] == [("boom", "RuntimeError", "kaboom")]
    assert seen["failure"] == {"reason": "stage_failed", "state": "boom", "error": "RuntimeError", "cause": "kaboom"}
    assert env.outputs["done"] == {"answer": "partial"}
    record = driver.stores.missions.get(env.mission_id)
    assert (record.status, record.terminal_reason) == ("failed", "stage_failed:boom")
    # and the failed attempt's events were kept, under a prefix of their own
    types = event_types(driver, env)
    assert EventType.FLOW_ERROR.value in types
    assert types[-2:] == [EventType.AGENT_COMPLETED.value, EventType.FLOW_COMPLETED.value]


class EventsDown(MemoryEventStore):
    """An events table that cannot be reached."""

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        raise ConnectionError("events table unreachable")


class Warnings(logging.Handler):
    """The warnings the runner's modules log, whatever the process's logging was set to."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_failing_stage_whose_events_cannot_be_kept_says_so_and_raises_its_own_error():
    # Given a stage that fails, run where the events table cannot be reached
    @stage
    def boom() -> Out:
        raise RuntimeError("kaboom")

    cap = make(
        "t_boom_unheard", [AgentConfig(name="boom", default_next="done"), AgentConfig(name="done")], boom, final()
    )
    driver = DirectDriver(cap)
    runner = StageRunner(cap, replace(driver.services, events=EventsDown()))
    start = build_envelope(MissionRequest(capability=cap.name, goal="g"), capabilities=driver.registry)
    runner_log, warnings = logging.getLogger("missions.service.runner"), Warnings()
    level = runner_log.level
    runner_log.addHandler(warnings)
    runner_log.setLevel(logging.WARNING)
    # When the stage runs
    try:
        with pytest.raises(RuntimeError, match="kaboom"):
            runner.handle({"stage": "boom", "mode": "run", "envelope": driver.codec.encode(start)})
    finally:
        runner_log.removeHandler(warnings)
        runner_log.setLevel(level)
    # Then it raised its own error, and the record of it that was lost is logged: the mission, the error, why
    [warning] = warnings.records
    message = warning.getMessage()
    assert start.mission_id in message and "RuntimeError" in message and "events table unreachable" in message
    assert warning.exc_info is not None and isinstance(warning.exc_info[1], ConnectionError)


class Verdict(BaseModel):
    verdict: str


def test_a_model_answer_missing_a_field_of_the_stages_model_fails_the_stage():
    # Given an LLM stage thinking a Verdict, and a model answering without `verdict`
    @stage
    def a(ctx: Ctx) -> Verdict:
        return ctx.think(Verdict)

    cap = make("t_validated", [AgentConfig(name="a", has_llm=True, default_next="done"), AgentConfig(name="done")], a)
    driver = DirectDriver(cap)
    # When
    env = driver.run("go")
    # Then the answer failed the model's validation, asked again twice (the repairs), and the mission ended
    # through finalize with each attempt's errors
    assert env.terminal_reason == "stage_failed:a"
    assert driver.steps[1].mode == "finalize"
    assert "a" not in env.outputs
    assert [e.kind for e in env.errors] == ["RepairsExhausted", "InvalidOutput", "InvalidOutput", "InvalidOutput"]
    assert all("verdict: Field required" in e.message for e in env.errors[1:])


class Died(BaseException):
    """The stage's Lambda died (a crash, a timeout): nothing of the attempt is committed."""


def dies_after_writing(ran: list[str], deaths: list[type[BaseException]]) -> Capability:
    """A stage that writes (an auto-approved side effect), reads, then dies the first times it runs."""

    @stage
    def apply(ctx: Ctx) -> Out:
        wrote = ctx.tools.execute("fs.write", {"path": "notes.txt"})
        ctx.tools.execute("t.echo", {"path": "notes.txt"})
        if deaths:
            raise deaths.pop(0)("died after its tool calls")
        return Out(status=wrote.status)

    return auto_writer("t_dies", apply, ran)


def auto_writer(name: str, apply: StageFunction, ran: list[str]) -> Capability:
    """apply (may write, with fs.write auto-approved) -> done."""
    return make(
        name,
        [
            AgentConfig(name="apply", has_tools=True, tool_access=ToolAccess.WRITE, default_next="done"),
            AgentConfig(name="done"),
        ],
        apply,
        final(),
        tools=catalog(ran),
        auto_approve=frozenset({"fs.write"}),
    )


def first_state(driver: DirectDriver) -> dict[str, Any]:
    """The first stage's input for a new running mission of the driver's capability."""
    name = driver.capability.name
    state = driver.codec.encode(
        build_envelope(MissionRequest(capability=name, goal="write notes"), None, driver.registry)
    )
    driver.stores.missions.create(
        MissionRecord(mission_id=state["mission_id"], user_id="local", capability=name, goal="g", status="running")
    )
    return state


@pytest.mark.parametrize("death", [Died, RuntimeError])
def test_a_stage_retried_after_dying_mid_way_does_not_repeat_its_side_effects(death):
    # Given a stage whose first attempt wrote, read, and then died (a crash, or an error)
    ran: list[str] = []
    driver = DirectDriver(dies_after_writing(ran, [death]))
    first = first_state(driver)
    with pytest.raises(death):
        driver.runner.handle({"stage": "apply", "mode": "run", "envelope": first})
    assert ran == ["write:notes.txt", "echo:notes.txt"]
    # When the stage is run again on the same input (the state machine's retry)
    again = driver.runner.handle({"stage": "apply", "mode": "run", "envelope": first})
    # Then the write is not made again (its recorded result is replayed); the read-only call runs again
    assert ran == ["write:notes.txt", "echo:notes.txt", "echo:notes.txt"]
    assert driver.codec.decode(again).outputs["apply"] == {"status": "success"}
    assert driver.codec.decode(again).counters.tool_calls == 2
    # and the committed stage tells of one write, marked as replayed
    events, _ = driver.stores.events.read(first["mission_id"], limit=1000)
    committed = [e for e in events if e.type is EventType.TOOL_COMPLETED and e.payload["tool"] == "fs.write"]
    failed_attempts = 1 if death is RuntimeError else 0  # an error records its attempt's events; a crash cannot
    assert len(committed) == 1 + failed_attempts
    assert committed[-1].payload.get("replayed") is True
    # and running it a third time changes nothing (the stored checkpoint is the answer)
    assert driver.runner.handle({"stage": "apply", "mode": "run", "envelope": first}) == again
    assert ran.count("write:notes.txt") == 1


def test_the_same_call_twice_in_a_stage_is_two_calls_each_replayed_once():
    # Given a stage that makes the same write twice, then dies
    ran: list[str] = []
    deaths: list[type[BaseException]] = [Died]

    @stage
    def apply(ctx: Ctx) -> Out:
        ctx.tools.execute("fs.write", {"path": "a"})
        ctx.tools.execute("fs.write", {"path": "a"})
        if deaths:
            raise deaths.pop(0)("died")
        return Out()

    driver = DirectDriver(auto_writer("t_twice", apply, ran))
    state = first_state(driver)
    with pytest.raises(Died):
        driver.runner.handle({"stage": "apply", "mode": "run", "envelope": state})
    # When it is retried
    driver.runner.handle({"stage": "apply", "mode": "run", "envelope": state})
    # Then both writes happened once each: two, not four, and not one
    assert ran == ["write:a", "write:a"]
