"""The stage runner alone against LangGraph with its InMemorySaver, on the same linear pipeline.

Both run N trivial stages in-process on in-memory storage: ours through `StageRunner.handle` as the
state machine would call it (decode the envelope, run the stage function, route, write a checkpoint and the
stage's events, update the mission, encode), LangGraph through a compiled `StateGraph` whose
checkpointer saves after every node. Neither calls a model or a tool: this is what each runtime
costs per step. Times are medians of repeated runs in one process; the report is the ratio of ours
to LangGraph's per stage, so the machine's speed cancels out.

This is the runner alone: no Step Functions, no Lambda, no DynamoDB (the emulation and AWS add their
own costs; see the demo's stage overhead and `infra_cost`). It is also measured doing only what a
LangGraph step does (run the node, route, checkpoint): without the mission's record, which a stage
updates with its progress, and with an event store that keeps nothing; what those two add is what
the runner does that LangGraph's step does not (a status any client can read, an event stream).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel

from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.capability.registry import Capability
from missions.core.capability.stages import StageFunction
from missions.core.mission.envelope import Bounds, Envelope
from missions.core.mission.events import Event
from missions.core.mission.offload import EnvelopeCodec
from missions.core.pipeline.config import AgentConfig, PipelineConfig
from missions.ports.missions import MissionRecord
from missions.service.runner import StageRunner, StageServices, StageTimings

SIZES = (10, 100)
REPEATS = 7
ROUNDS = 21


class Step(BaseModel):
    step: str
    done: bool


def _typed(name: str, previous: str | None) -> StageFunction:
    """A trivial stage function reading the one before (as a typed capability's stages do)."""

    def step(**reads: Step) -> Step:
        return Step(step=name, done=True)

    reads = {previous: Step} if previous else {}
    return StageFunction(name, step, Step, reads, frozenset())


def _merge(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    return {**left, **right}


class _State(TypedDict):
    """LangGraph's state for the chain: the goal, and each node's output (as our envelope's outputs)."""

    goal: str
    outputs: Annotated[dict[str, Any], _merge]


def _capability(stages: int) -> Capability:
    names = [f"s{i:04d}" for i in range(stages)]
    agents = [
        AgentConfig(name=name, default_next=names[i + 1] if i + 1 < stages else None) for i, name in enumerate(names)
    ]
    bounds = Bounds(max_agent_hops=stages + 1, max_iterations=stages + 1)
    pipeline = PipelineConfig(name=f"bench_chain_{stages}", agents=agents, bounds=bounds)
    return Capability(
        name=pipeline.name,
        description="benchmark: a linear chain",
        pipeline=pipeline,
        stages={name: _typed(name, names[i - 1] if i else None) for i, name in enumerate(names)},
        offline_policy=lambda request: {},
    )


class _Unwatched(MemoryEventStore):
    """An event store that keeps nothing: a mission nobody can watch."""

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        return None


def ours(
    stages: int, on_timings: Callable[[str, StageTimings], None] | None = None, *, watchable: bool = True
) -> float:
    """Seconds for one mission of `stages` stages through the runner (`on_timings`: each stage's timings;
    `watchable=False`: without the mission's record and its events, as a LangGraph step)."""
    capability = _capability(stages)
    missions = MemoryMissionStore()
    codec = EnvelopeCodec(MemoryBlobStore())
    services = StageServices(
        checkpoints=MemoryCheckpointStore(),
        events=MemoryEventStore() if watchable else _Unwatched(),
        codec=codec,
        llm=lambda c: (_ for _ in ()).throw(AssertionError("no model here")),
        missions=missions if watchable else None,
        on_timings=on_timings,
    )
    runner = StageRunner(capability, services)
    envelope = Envelope(
        mission_id="m_bench", capability=capability.name, user_id="u", raw_input="go", bounds=capability.pipeline.bounds
    )
    missions.create(
        MissionRecord(mission_id="m_bench", user_id="u", capability=capability.name, goal="go", status="running")
    )
    stage: str | None
    encoded, stage, hop = codec.encode(envelope), capability.pipeline.agents[0].name, 0
    started = time.perf_counter()
    while stage is not None:
        encoded = runner.handle({"stage": stage, "mode": "run", "envelope": encoded, "hop": hop})
        stage, hop = encoded.get("next_stage"), hop + 1
    return time.perf_counter() - started


def boundary(stages: int) -> float:
    """Seconds to carry the same chain's envelope across `stages` stage boundaries, and nothing else: each
    stage's Lambda decodes the envelope it is given and encodes the one it hands on (with the output it
    wrote). A LangGraph step, in one process, never pays this."""
    capability = _capability(stages)
    codec = EnvelopeCodec(MemoryBlobStore())
    names = capability.pipeline.stage_names()
    encoded = codec.encode(
        Envelope(
            mission_id="m_bench",
            capability=capability.name,
            user_id="u",
            raw_input="go",
            bounds=capability.pipeline.bounds,
        )
    )
    started = time.perf_counter()
    for i, name in enumerate(names):
        envelope = codec.decode(encoded, detach=True)
        envelope.outputs = {name: Step(step=name, done=True).model_dump()}  # what the next stage reads
        envelope.counters.agent_hops += 1
        envelope.next_stage = names[i + 1] if i + 1 < stages else None
        encoded = codec.encode(envelope)
    return time.perf_counter() - started


def langgraph(stages: int) -> float:
    """Seconds for the same chain in LangGraph, checkpointed after every node."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    def node(name: str) -> Any:
        def step(state: _State) -> dict[str, Any]:
            return {"outputs": {name: {"step": name, "done": True}}}

        return step

    graph = StateGraph(_State)
    names = [f"s{i:04d}" for i in range(stages)]
    for name in names:
        graph.add_node(name, node(name))
    graph.add_edge(START, names[0])
    for a, b in zip(names, names[1:], strict=False):
        graph.add_edge(a, b)
    graph.add_edge(names[-1], END)
    app = graph.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "bench"}, "recursion_limit": stages + 10}
    started = time.perf_counter()
    app.invoke(_State(goal="go", outputs={}), config)
    return time.perf_counter() - started


def commit_share(stages: int) -> float:
    """The part of the runner's stage time spent committing what the stage did (StageTimings.commit_ms: its
    envelope encoded, its events, its checkpoint, the mission's progress), over runs of its own so the timed
    ones pay for no callback."""
    total = commit = 0.0

    def record(stage: str, timings: StageTimings) -> None:
        nonlocal total, commit
        total, commit = total + timings.total_ms, commit + timings.commit_ms

    for _ in range(REPEATS):
        ours(stages, on_timings=record)
    return commit / total


def run() -> dict[str, Any]:
    results: dict[str, Any] = {}
    for stages in SIZES:
        # the four are interleaved, round by round, so whatever else the machine does falls on all of them
        timed: dict[str, list[float]] = {"mine": [], "theirs": [], "unwatched": [], "crossing": []}
        for _ in range(ROUNDS):
            timed["mine"].append(ours(stages))
            timed["theirs"].append(langgraph(stages))
            timed["unwatched"].append(ours(stages, watchable=False))
            timed["crossing"].append(boundary(stages))
        mine, theirs, unwatched, crossing = (statistics.median(timed[name]) for name in timed)
        results[str(stages)] = {
            "runner_ms_per_stage": round(mine * 1000 / stages, 3),
            "langgraph_ms_per_stage": round(theirs * 1000 / stages, 3),
            "ratio": round(mine / theirs, 2),
            "unwatched_ms_per_stage": round(unwatched * 1000 / stages, 3),
            "unwatched_ratio": round(unwatched / theirs, 2),
            "boundary_ms_per_stage": round(crossing * 1000 / stages, 3),
            "in_process_ratio": round((unwatched - crossing) / theirs, 2),
            "commit_share": round(commit_share(stages), 2),
        }
    return results


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (
            f"runner alone vs LangGraph InMemorySaver, {stages} stages",
            f"{r['runner_ms_per_stage']} vs {r['langgraph_ms_per_stage']} ms per stage ({r['ratio']}x); "
            f"the runner's commit path {r['commit_share']:.0%} of it; without the mission's record and "
            f"events (a LangGraph step's work) {r['unwatched_ms_per_stage']} ms ({r['unwatched_ratio']}x), of "
            f"which the envelope's crossing of the stage's Lambda boundary {r['boundary_ms_per_stage']} ms "
            f"(the rest {r['in_process_ratio']}x)",
        )
        for stages, r in results.items()
    ]


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
