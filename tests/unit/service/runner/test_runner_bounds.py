"""The stage runner's bounds: agent hops, edge limits, parallel groups and the stage deadline (the StageRunner,
driven stage by stage by the DirectDriver, the state machine's stand-in).
"""

from __future__ import annotations

import pytest

from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability, stage
from missions.core.llm.provider import LLMRequest
from missions.core.mission.requests import MissionRequest
from missions.core.pipeline.config import AgentConfig, EdgeLimit, ParallelGroup, RoutingRule
from missions.ports.missions import MissionRecord
from missions.service.launcher import build_envelope
from tests.support.driver import DirectDriver
from tests.support.runner import clarifying, final, gather_think_done, make, policy, stages
from tests.support.stages import Out


def ping_pong(max_count: int = 1000, on_exceeded: str | None = None) -> Capability:
    """a -> b -> a ... forever (b never says stop), bounded by an edge limit on b -> a."""

    @stage
    def b() -> Out:
        return Out(stop=False)

    return make(
        "t_loop",
        [
            AgentConfig(name="a", default_next="b"),
            AgentConfig(
                name="b", routing_rules=[RoutingRule(field="stop", value=False, target="a")], default_next="end"
            ),
            AgentConfig(name="end"),
        ],
        b,
        final("end"),
        edge_limits=[EdgeLimit(from_stage="b", to_stage="a", max_count=max_count, on_exceeded=on_exceeded)],
        bounds={"max_agent_hops": 50},
    )


@pytest.mark.parametrize("max_hops", [2, 3, 5, 6, 9])
def test_max_agent_hops_ends_through_the_final_stage(max_hops: int):
    # Given an endless loop
    driver = DirectDriver(ping_pong())
    env = driver.run("loop", bounds={"max_agent_hops": max_hops})
    # Then the hop bound ends it through the final stage, within the bound
    assert env.terminal_reason == "max_agent_hops"
    assert env.counters.agent_hops <= max_hops
    assert env.counters.agent_hops == len(driver.history(env))
    assert driver.history(env)[-1].stage == "end"
    assert env.next_stage is None


def test_max_agent_hops_uses_every_hop_it_may():
    driver = DirectDriver(ping_pong())
    env = driver.run("loop", bounds={"max_agent_hops": 6})
    assert stages(driver, env) == ["a", "b", "a", "b", "a", "end"]


def test_edge_limit_ends_the_loop():
    driver = DirectDriver(ping_pong(max_count=2))
    env = driver.run("loop")
    assert env.terminal_reason == "edge_limit:b->a"
    assert env.edge_counts["b->a"] == 2
    assert stages(driver, env) == ["a", "b", "a", "b", "a", "b", "end"]


def test_edge_limit_on_exceeded_sends_the_runner_to_that_stage():
    # Given b -> a allowed once, after which the limit sends the mission to 'side'
    @stage
    def b() -> Out:
        return Out(again=True)

    cap = make(
        "t_on_exceeded",
        [
            AgentConfig(
                name="a", routing_rules=[RoutingRule(field="aside", value=True, target="side")], default_next="b"
            ),
            AgentConfig(
                name="b", routing_rules=[RoutingRule(field="again", value=True, target="a")], default_next="end"
            ),
            AgentConfig(name="side", default_next="end"),
            AgentConfig(name="end"),
        ],
        b,
        final("end"),
        edge_limits=[EdgeLimit(from_stage="b", to_stage="a", max_count=1, on_exceeded="side")],
    )
    # When
    driver = DirectDriver(cap)
    env = driver.run("loop")
    # Then the runner follows on_exceeded (the compiled ASL has no route for it: see test_compiler)
    assert stages(driver, env) == ["a", "b", "a", "b", "side", "end"]
    assert driver.history(env)[3].next_stage == "side"
    assert env.terminal_reason == "completed"


def test_a_timed_out_interrupt_is_not_left_pending_on_the_finished_mission():
    # Given a question nobody answers
    driver = DirectDriver(clarifying("intake"))
    env = driver.run("do the thing", answers=[])
    # Then the failed mission has no pending interrupt
    record = driver.stores.missions.get(env.mission_id)
    assert record.status == "failed"
    assert record.pending_interrupt is None


def _parallel_capability():
    return make(
        "t_parallel_hops",
        [
            AgentConfig(name="a", default_next="bc"),
            AgentConfig(name="b", default_next="d"),
            AgentConfig(name="c", default_next="d"),
            AgentConfig(name="d"),
        ],
        final("d"),
        parallel=[ParallelGroup(name="bc", stages=["b", "c"])],
    )


def _start(driver, cap, max_hops):
    request = MissionRequest(capability=cap.name, goal="g", bounds={"max_agent_hops": max_hops})
    start = build_envelope(request, capabilities=driver.registry)
    driver.stores.missions.create(
        MissionRecord(mission_id=start.mission_id, user_id="u", capability=cap.name, goal="g")
    )
    return driver.runner.handle({"stage": "a", "mode": "run", "envelope": driver.codec.encode(start)})


@pytest.mark.parametrize("max_hops", [3, 4])
def test_a_parallel_group_stays_within_max_agent_hops(max_hops):
    # Given a -> {b, c} -> d (final): the whole mission needs 4 hops
    cap = _parallel_capability()
    driver = DirectDriver(cap)
    # When a has run (the driver has no Parallel state: the test plays the state machine itself)
    state = _start(driver, cap, max_hops)
    if max_hops == 3:
        # Then with too few hops left the group does not start: the mission goes to its final stage
        assert state["next_stage"] == "d" and state["terminal_reason"] == "max_agent_hops"
        return
    assert state["next_stage"] == "bc"
    deltas = [driver.runner.handle({"stage": m, "mode": "branch", "envelope": state}) for m in ("b", "c")]
    state = driver.runner.handle({"stage": "d", "mode": "run", "envelope": {**state, "branch_results": deltas}})
    env = driver.codec.decode(state)
    # Then with enough hops the group and its join run, within the bound
    assert [r.stage for r in driver.history(env)] == ["a", "b", "c", "d"]
    assert env.counters.agent_hops <= env.bounds.max_agent_hops


def test_the_model_gets_the_stage_deadline_from_the_lambda_context():
    # Given a stage function with 10 s left, and a model that notes each request's deadline
    import time

    from missions.adapters.llm.scripted import ScriptedProvider
    from missions.core.llm.provider import LLMResult
    from missions.local.moto import LocalContext

    seen: list[float | None] = []
    scripted = ScriptedProvider(policy)

    class Noting:
        name = "noting"

        def complete(self, request: LLMRequest) -> LLMResult:
            seen.append(request.deadline)
            return scripted.complete(request)

    from tests.support.fakes import memory_runtime

    capability = gather_think_done([])
    runtime = memory_runtime(llm=Noting(), capabilities=registry.Registry().including(capability))
    envelope = build_envelope(
        MissionRequest(capability=capability.name, goal="count things"), None, runtime.capabilities
    )
    runtime.missions.create(
        MissionRecord(
            mission_id=envelope.mission_id, user_id="u", capability=capability.name, goal="g", status="running"
        )
    )

    class TenSecondsLeft(LocalContext):
        def get_remaining_time_in_millis(self) -> int:
            return 10_000

    # When the LLM stage runs
    before = time.monotonic()
    request = {"stage": "think", "mode": "run", "envelope": runtime.codec.encode(envelope), "hop": 1}
    runtime.stages.handle(request, TenSecondsLeft("stage-think"))
    # Then the model call carried the stage's deadline: 10 s less the margin to commit
    [deadline] = seen
    assert deadline is not None and before + 6.0 < deadline < time.monotonic() + 7.0
