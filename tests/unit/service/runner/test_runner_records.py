"""What the stage runner records and refuses: checkpoints, events and bad requests (the StageRunner, driven stage by
stage by the DirectDriver, the state machine's stand-in).
"""

from __future__ import annotations

from typing import Any

import pytest

from missions.core.capability import registry as registry
from missions.core.capability.registry import Ctx, stage
from missions.core.errors import StageRequestError
from missions.core.mission.events import EventType
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.service.checkpoints import state_at, states
from tests.support.driver import DirectDriver
from tests.support.runner import catalog, clarifying, event_types, final, gather_think_done, make
from tests.support.stages import Out


def test_one_checkpoint_per_stage_chained_to_its_parent():
    driver = DirectDriver(gather_think_done([]))
    env = driver.run("checkpoint me")
    checkpoints = driver.stores.checkpoints.list(env.mission_id)
    assert [c.checkpoint_id for c in checkpoints] == ["0001-gather", "0002-think", "0003-done"]
    assert [c.stage for c in checkpoints] == ["gather", "think", "done"]
    assert [c.parent_id for c in checkpoints] == [None, "0001-gather", "0002-think"]
    assert [state["next_stage"] for _, state in states(driver.stores.checkpoints, env.mission_id)] == [
        "think",
        "done",
        None,
    ]
    assert env.checkpoint_id == "0003-done"
    # and the first keeps the whole envelope, the others what their stage changed, each its stage's record
    assert checkpoints[0].envelope is not None and checkpoints[0].delta is None
    assert all(c.envelope is None and c.delta is not None for c in checkpoints[1:])
    assert [[r.stage for r in c.records] for c in checkpoints] == [["gather"], ["think"], ["done"]]


def test_a_stage_keeps_the_missions_progress_in_its_checkpoint_and_only_the_end_writes_the_record():
    # Given a mission of three stages, started, whose record is watched for writes
    driver = DirectDriver(gather_think_done([]))
    missions = driver.stores.missions
    written: list[str] = []
    transition = missions.transition

    def watched(mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> Any:
        written.append(status)
        return transition(mission_id, status, allowed_from, **fields)

    missions.transition = watched  # type: ignore[method-assign]
    # When it runs
    env = driver.run("where am I")
    # Then each stage's checkpoint says where the mission stood after it
    progress = [c.progress or {} for c in driver.stores.checkpoints.list(env.mission_id)]
    assert [(p["stage"], p["next_stage"], p["counters"]["agent_hops"]) for p in progress] == [
        ("gather", "think", 1),
        ("think", "done", 2),
        ("done", None, 3),
    ]
    # and of the three stages only the last wrote the record (its end), which says where it ended
    assert written == ["completed"]
    record = missions.get(env.mission_id)
    assert (record.stage, record.agent_hops, record.next_stage) == ("done", 3, None)


def test_rerunning_a_stage_with_the_same_input_returns_the_stored_checkpoint():
    # Given a finished mission
    ran: list[str] = []
    driver = DirectDriver(gather_think_done(ran))
    env = driver.run("idempotent")
    checkpoints = driver.stores.checkpoints.list(env.mission_id)
    events_before = event_types(driver, env)
    record_before = driver.stores.missions.get(env.mission_id)
    # When 'think' runs again on the very input it had (a retried Lambda)
    given = state_at(driver.stores.checkpoints, env.mission_id, checkpoints[0])
    again = driver.runner.handle({"stage": "think", "mode": "run", "envelope": given})
    # Then the stored result comes back: no fork, no extra events, no mission update
    assert again == state_at(driver.stores.checkpoints, env.mission_id, checkpoints[1]) == driver.returned["0002-think"]
    assert driver.stores.checkpoints.list(env.mission_id) == checkpoints
    assert event_types(driver, env) == events_before
    assert driver.stores.missions.get(env.mission_id) == record_before


def test_events_tell_the_story_in_order():
    # Given tools, a judging stage with a decision, and the final stage
    @stage
    def gather(ctx: Ctx) -> Out:
        ctx.tools.execute("t.echo", {"path": "x"})
        return Out()

    @stage
    def judge() -> Out:
        return Out(decision="ACCEPT", reason="looks right")

    cap = make(
        "t_events",
        [
            AgentConfig(name="gather", has_tools=True, tool_access=ToolAccess.READ, default_next="judge"),
            AgentConfig(name="judge", default_next="done"),
            AgentConfig(name="done"),
        ],
        gather,
        judge,
        final(),
        tools=catalog([]),
    )
    driver = DirectDriver(cap)
    env = driver.run("tell me")
    # Then
    assert event_types(driver, env) == [
        "orchestrator.started",
        "agent_started",
        "executor.tool_started",
        "executor.tool_completed",
        "orchestrator.stage_transition",
        "agent_completed",
        "agent_started",
        "critic.decision",
        "orchestrator.stage_transition",
        "agent_completed",
        "agent_started",
        "agent_completed",
        "orchestrator.completed",
    ]
    events, _ = driver.stores.events.read(env.mission_id, limit=100)
    transitions = [
        (e.payload["from_stage"], e.payload["to_stage"]) for e in events if e.type is EventType.STAGE_TRANSITION
    ]
    assert transitions == [("gather", "judge"), ("judge", "done")]
    decision = next(e for e in events if e.type is EventType.CRITIC_DECISION)
    assert decision.payload == {"decision": "ACCEPT", "reason": "looks right"}
    assert all(e.mission_id == env.mission_id and e.position for e in events)


def test_interrupt_is_an_event():
    driver = DirectDriver(clarifying("intake"))
    env = driver.run("ask me", answers=[{"text": "x"}])
    assert event_types(driver, env).count("interrupt.raised") == 1


@pytest.fixture
def started() -> tuple[DirectDriver, dict[str, Any]]:
    driver = DirectDriver(gather_think_done([]))
    env = driver.run("requests")
    return driver, state_at(driver.stores.checkpoints, env.mission_id, "0001-gather")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"stage": "nope", "mode": "run"}, "has no stage 'nope'"),
        ({"stage": "think", "mode": "sideways"}, "unknown mode 'sideways'"),
        ({"stage": "think", "mode": "run", "envelope": None}, "request has no envelope"),
    ],
)
def test_bad_requests_are_stage_request_errors(started, request_, message):
    driver, envelope = started
    with pytest.raises(StageRequestError, match=message):
        driver.runner.handle({"envelope": envelope, **request_})


def test_an_envelope_of_another_capability_is_refused(started):
    driver, envelope = started
    with pytest.raises(StageRequestError, match="envelope belongs to 'someone_else'"):
        driver.runner.handle({"stage": "think", "mode": "run", "envelope": {**envelope, "capability": "someone_else"}})


def test_the_state_machines_hop_count_names_the_checkpoint(started):
    # Given a stage request carrying the state machine's own hop count (a stage cannot change it)
    driver, envelope = started
    tampered = {**envelope, "counters": {**envelope["counters"], "agent_hops": 0}}
    # When the stage runs
    result = driver.runner.handle({"stage": "think", "mode": "run", "hop": 41, "envelope": tampered})
    # Then its checkpoint is named after that count, not after the envelope's counters
    assert result["checkpoint_id"] == "0042-think"
    assert driver.stores.checkpoints.get(envelope["mission_id"], "0042-think").parent_id == envelope["checkpoint_id"]


def test_a_stages_timings_say_how_long_writing_what_it_did_took():
    # Given a clock that moves only while a checkpoint is written, 30 ms each time
    driver = DirectDriver(gather_think_done([]))
    now = [0.0]
    driver.services.clock = lambda: now[0]
    put = driver.stores.checkpoints.put

    def slow_put(checkpoint: Any) -> Any:
        now[0] += 0.030
        return put(checkpoint)

    driver.stores.checkpoints.put = slow_put  # type: ignore[method-assign]
    seen: list[tuple[str, float, float, float]] = []
    driver.services.on_timings = lambda stage, t: seen.append((stage, t.total_ms, t.commit_ms, t.overhead_ms))
    # When the mission runs
    driver.run("time me")
    # Then each stage's commit took the write's 30 ms, all of its time, and all of it is the runtime's overhead
    assert [(stage, round(total), round(commit), round(overhead)) for stage, total, commit, overhead in seen] == [
        ("gather", 30, 30, 30),
        ("think", 30, 30, 30),
        ("done", 30, 30, 30),
    ]
