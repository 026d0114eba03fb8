"""A stage output leaves the envelope once no stage that may still run reads it (OutputLiveness), and the
runner drops it at the next commit, never from the checkpoint of the stage that wrote it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from missions.core.capability.liveness import OutputLiveness
from missions.core.capability.registry import Capability
from missions.core.capability.stages import StageFunction
from missions.core.mission.envelope import Bounds, InterruptKind
from missions.core.pipeline.config import AgentConfig, EdgeLimit, ParallelGroup, PipelineConfig, RoutingRule
from missions.service.checkpoints import states
from tests.support.driver import DirectDriver


class Out(BaseModel):
    seen: str = ""


def _reading(name: str, *reads: str) -> StageFunction:
    def run(**_: Out) -> Out:
        return Out(seen=name)

    return StageFunction(name, run, Out, dict.fromkeys(reads, Out), frozenset())


def _chain(*reads: tuple[str, ...]) -> tuple[PipelineConfig, dict[str, StageFunction]]:
    names = [f"s{i}" for i in range(len(reads))]
    agents = [
        AgentConfig(name=n, default_next=names[i + 1] if i + 1 < len(names) else None) for i, n in enumerate(names)
    ]
    pipeline = PipelineConfig(name="chain", agents=agents)
    return pipeline, {n: _reading(n, *r) for n, r in zip(names, reads, strict=True)}


def test_in_a_chain_an_output_is_dead_once_the_stage_that_reads_it_has_run():
    # Given s0 -> s1 (reads s0) -> s2 (reads s1) -> s3 (the final stage, reads s0)... and s1 read by s2 only
    pipeline, stages = _chain((), ("s0",), ("s1",), ())
    liveness = OutputLiveness(pipeline, stages)
    # Then s0 is live until s1 has run, s1 until s2 has run
    assert liveness.dead("s1", ["s0"]) == []
    assert liveness.dead("s2", ["s0", "s1"]) == ["s0"]
    assert liveness.dead("s3", ["s1", "s2"]) == ["s1", "s2"]


def test_the_final_stage_reads_and_its_output_are_never_dead():
    # Given a final stage that reads the first stage: a bound or a failure may route there from anywhere
    pipeline, stages = _chain((), ("s0",), ("s0",))
    liveness = OutputLiveness(pipeline, stages)
    assert liveness.dead("s2", ["s0", "s1", "s2"]) == ["s1"]


def test_in_a_loop_every_output_a_stage_of_the_loop_reads_stays():
    # Given a -> b -> c -> a (c reads a): the loop runs a again, so nothing it reads is dead
    agents = [
        AgentConfig(name="a", default_next="b"),
        AgentConfig(name="b", default_next="c"),
        AgentConfig(name="c", default_next="a", routing_rules=[RoutingRule(field="seen", value="x", target="done")]),
        AgentConfig(name="done"),
    ]
    pipeline = PipelineConfig(
        name="loop", agents=agents, edge_limits=[EdgeLimit(from_stage="c", to_stage="a", max_count=5)]
    )
    stages = {"a": _reading("a", "c"), "b": _reading("b", "a"), "c": _reading("c", "b"), "done": _reading("done")}
    liveness = OutputLiveness(pipeline, stages)
    assert liveness.dead("b", ["a", "b", "c"]) == []
    assert liveness.dead("a", ["a", "b", "c"]) == []


def test_a_group_name_enters_its_branches_and_a_wait_for_a_person_drops_nothing():
    agents = [
        AgentConfig(name="start", default_next="both"),
        AgentConfig(name="left", default_next="join"),
        AgentConfig(name="right", default_next="join"),
        AgentConfig(name="join", default_next="done"),
        AgentConfig(name="done"),
    ]
    pipeline = PipelineConfig(
        name="group", agents=agents, parallel=[ParallelGroup(name="both", stages=["left", "right"])]
    )
    stages = {"left": _reading("left", "start"), "join": _reading("join", "left", "right")}
    liveness = OutputLiveness(pipeline, stages)
    assert liveness.dead("both", ["start"]) == []
    assert liveness.dead("join", ["start", "left"]) == ["start"]
    assert liveness.dead("await:clarification", ["start"]) == []  # not a stage: the answer may resume anywhere
    assert liveness.dead(None, ["start"]) == []


def test_a_configured_resume_stage_keeps_what_it_reads():
    # Given clarifications that resume at s0, which reads nothing, and s1 reading s0
    pipeline, stages = _chain((), ("s0",), ())
    pipeline = pipeline.model_copy(update={"resume": {InterruptKind.CLARIFICATION: "s1"}})
    liveness = OutputLiveness(pipeline, stages)
    # Then s0 stays while any stage may still ask: the answer may run s1 again
    assert liveness.dead("s2", ["s0"]) == []


@st.composite
def _graphs(draw: st.DrawFn) -> tuple[PipelineConfig, dict[str, StageFunction]]:
    size = draw(st.integers(2, 7))
    names = [f"n{i}" for i in range(size)]
    agents = []
    for i, name in enumerate(names[:-1]):
        extra = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
        rules = [RoutingRule(field="seen", value=f"to-{t}", target=t) for t in extra if t != names[i + 1]]
        agents.append(AgentConfig(name=name, default_next=names[i + 1], routing_rules=rules, counts_iteration=True))
    agents.append(AgentConfig(name=names[-1]))
    pipeline = PipelineConfig(name="g", agents=agents, bounds=Bounds(max_iterations=3))
    stages = {n: _reading(n, *draw(st.lists(st.sampled_from(names), max_size=3, unique=True))) for n in names}
    return pipeline, stages


@settings(max_examples=150, deadline=None)
@given(_graphs())
def test_an_output_is_dead_exactly_when_no_stage_reachable_from_where_the_mission_goes_reads_it(graph):
    pipeline, stages = graph
    liveness = OutputLiveness(pipeline, stages)
    final = pipeline.final

    def reachable(start: str) -> set[str]:
        seen, frontier = {start}, [start]
        while frontier:
            for target in pipeline.targets_of(frontier.pop()):
                if target not in seen:
                    seen.add(target)
                    frontier.append(target)
        return seen | {final}

    for where in pipeline.stage_names():
        for key in pipeline.stage_names():
            read = key == final or any(key in stages[s].reads for s in reachable(where))
            assert liveness.live(where, key) is read, (where, key)


def test_the_runner_keeps_each_output_in_the_checkpoint_of_the_stage_that_wrote_it():
    # Given a chain whose first output only the second stage reads
    pipeline, stages = _chain((), ("s0",), ("s1",), ())
    capability = Capability(
        name="chain", description="", pipeline=pipeline, stages=stages, offline_policy=lambda request: {}
    )
    driver = DirectDriver(capability)
    envelope = driver.run("go")
    # Then the end holds what the last stage before the final one kept (the final stage drops nothing: the
    # mission is over), and each checkpoint the output its stage wrote
    assert set(envelope.outputs) == {"s2", "s3"}
    kept = {c.stage: set(state["outputs"]) for c, state in states(driver.stores.checkpoints, envelope.mission_id)}
    assert kept == {"s0": {"s0"}, "s1": {"s1"}, "s2": {"s2"}, "s3": {"s2", "s3"}}
    assert driver.outputs(envelope) == {n: {"seen": n} for n in ("s0", "s1", "s2", "s3")}
