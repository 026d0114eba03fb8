"""Constant cost per stage: the stage runner alone, at hop 10, 100 and 1,000 of one mission.

What a stage costs the runtime must not depend on how long the mission has run. This measures it on
a trivial pipeline whose stages repeat (a -> b -> c -> a ..., each reading the one before through its
typed view, as capabilities do) until the mission's hop bound sends it to its final stage: a mission
of N hops is N runs of `StageRunner.handle`, as the state machine calls it (decode the envelope, run
the stage function, route, write the checkpoint, the events and the mission's update, encode). No
model, no tool, no Step Functions, no Lambda: the runner and its stores only.

Figures, each named for what it measures:
- `ms_per_stage_at_hop`: the runner's wall time for one stage at hop N: the median over the stages
  just before the final one (the last tenth of the mission, at least 10: hops 1-9, 90-99, 900-999) of
  repeated missions, 1,000 stages timed in all (other processes on the machine move a median little).
  The target: hop 1,000 within 1.5x of hop 10.
- `ms_per_stage_mean`: the mean over the whole mission (every hop, the final stage included).
- `checkpoint_bytes_per_stage`: what the mission's checkpoints hold (each checkpoint item as its store
  keeps it, JSON) plus every blob written for it, divided by its hops. Linear growth means the total
  at 1,000 hops is about 10x the total at 100 (the per-stage figure stays flat).
- `chain`: the same on a chain of N distinct stages (runner_vs_langgraph's pipeline), held to the same
  target. Each stage's output leaves the envelope once no later stage reads it
  (missions.core.capability.liveness), so the envelope does not grow with the pipeline's length.
- `moto`, `moto_chain`: the loop and the chain on the DynamoDB adapters under moto's mock_aws
  (checkpoints, events, mission, blobs), held to the same target: moto's own cost per call dominates
  the figure, but a write or a read that grew with the mission would show.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.capability.registry import Capability
from missions.core.capability.stages import StageFunction
from missions.core.mission.envelope import Bounds, Envelope
from missions.core.mission.offload import EnvelopeCodec
from missions.core.pipeline.config import AgentConfig, EdgeLimit, PipelineConfig, RoutingRule
from missions.ports.checkpoints import CheckpointStore
from missions.ports.events import EventStore
from missions.ports.missions import MissionRecord, MissionStore
from missions.service.runner import StageRunner, StageServices

HOPS = (10, 100, 1000)
REPEATS = 5  # missions at least; more when fewer than STAGES_TIMED stages would be timed
STAGES_TIMED = 1000
MOTO_HOPS = (10, 100, 1000)
MOTO_REPEATS = 1
CHAIN_REPEATS = 3


def window(hops: int) -> int:
    """How many stages are timed "at hop N": the last tenth before the final stage (at least 10)."""
    return max(10, hops // 10)


TARGET_RATIO = 1.5


class Step(BaseModel):
    step: str
    done: bool


def _typed(name: str, previous: str | None, optional: bool = False) -> StageFunction:
    """A trivial stage function reading the one before it (as a typed capability's stages do);
    `optional`: that one may not have run yet (None then)."""

    def step(**reads: Step | None) -> Step:
        return Step(step=name, done=True)

    reads = {previous: Step} if previous else {}
    return StageFunction(name, step, Step, reads, frozenset(), optional=frozenset(reads) if optional else frozenset())


def loop(hops: int) -> Capability:
    """a -> b -> c -> a ... until the hop bound routes to `done`: a mission of `hops` hops."""
    names = ["a", "b", "c"]
    agents = [
        AgentConfig(name="a", default_next="b"),
        AgentConfig(name="b", default_next="c"),
        # a rule that never matches (no stage is ever "done": false): the hop bound ends the mission
        AgentConfig(name="c", default_next="a", routing_rules=[RoutingRule(field="done", value=False, target="done")]),
        AgentConfig(name="done"),
    ]
    pipeline = PipelineConfig(
        name=f"bench_loop_{hops}",
        agents=agents,
        edge_limits=[EdgeLimit(from_stage="c", to_stage="a", max_count=10_000)],
        bounds=Bounds(max_agent_hops=hops, max_iterations=1),
    )
    stages = {name: _typed(name, names[i - 1] if i else "c", optional=not i) for i, name in enumerate(names)}
    stages["done"] = _typed("done", None)
    return Capability(
        name=pipeline.name,
        description="benchmark: three stages repeating",
        pipeline=pipeline,
        stages=stages,
        offline_policy=lambda request: {},
    )


def chain(hops: int) -> Capability:
    """`hops` distinct stages, each reading the one before (runner_vs_langgraph's pipeline). The
    pipeline's validation walks it recursively: 1,000 stages need a deeper stack than Python's default."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * hops + 1000))
    names = [f"s{i:04d}" for i in range(hops)]
    agents = [AgentConfig(name=n, default_next=names[i + 1] if i + 1 < hops else None) for i, n in enumerate(names)]
    pipeline = PipelineConfig(
        name=f"bench_chain_{hops}", agents=agents, bounds=Bounds(max_agent_hops=hops + 1, max_iterations=1)
    )
    return Capability(
        name=pipeline.name,
        description="benchmark: a linear chain",
        pipeline=pipeline,
        stages={n: _typed(n, names[i - 1] if i else None) for i, n in enumerate(names)},
        offline_policy=lambda request: {},
    )


class CountingBlobs:
    """The blob store, counting the bytes written to it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.written = inner, 0

    def put(self, key: str, data: bytes) -> None:
        self.written += len(data)
        self.inner.put(key, data)

    def get(self, key: str) -> bytes:
        data: bytes = self.inner.get(key)
        return data


@dataclass
class Stores:
    checkpoints: CheckpointStore
    events: EventStore
    missions: MissionStore
    blobs: CountingBlobs


def memory_stores() -> Stores:
    return Stores(MemoryCheckpointStore(), MemoryEventStore(), MemoryMissionStore(), CountingBlobs(MemoryBlobStore()))


@dataclass
class Mission:
    stage_seconds: list[float]  # each handle() call, in hop order
    checkpoint_bytes: int  # checkpoint items (as JSON) + blobs written


def mission(capability: Capability, stores: Stores) -> Mission:
    """One mission through the runner, each stage timed."""
    codec = EnvelopeCodec(stores.blobs)
    services = StageServices(
        checkpoints=stores.checkpoints,
        events=stores.events,
        codec=codec,
        llm=lambda c: (_ for _ in ()).throw(AssertionError("no model here")),
        missions=stores.missions,
    )
    runner = StageRunner(capability, services)
    envelope = Envelope(capability=capability.name, user_id="u", raw_input="go", bounds=capability.pipeline.bounds)
    stores.missions.create(
        MissionRecord(
            mission_id=envelope.mission_id, user_id="u", capability=capability.name, goal="go", status="running"
        )
    )
    stage: str | None
    encoded, stage, hop = codec.encode(envelope), capability.pipeline.agents[0].name, 0
    timings: list[float] = []
    clock = time.perf_counter
    while stage is not None:
        started = clock()
        encoded = runner.handle({"stage": stage, "mode": "run", "envelope": encoded, "hop": hop})
        timings.append(clock() - started)
        stage, hop = encoded.get("next_stage"), hop + 1
    kept = stores.checkpoints.list(envelope.mission_id)
    stored = sum(len(c.model_dump_json(exclude_none=True)) for c in kept)
    return Mission(timings, stored + stores.blobs.written)


def measure(make: Callable[[int], Capability], hops: int, repeats: int, stores: Callable[[], Stores]) -> dict[str, Any]:
    runs = []
    for _ in range(repeats):
        gc.collect()  # one mission's garbage is not the next one's cost
        runs.append(mission(make(hops), stores()))
    at_hop = [seconds for r in runs for seconds in r.stage_seconds[-window(hops) - 1 : -1]]
    mean = [sum(r.stage_seconds) / len(r.stage_seconds) for r in runs]
    return {
        "hops": len(runs[0].stage_seconds),
        "missions": repeats,
        "ms_per_stage_at_hop": round(statistics.median(at_hop) * 1000, 4),
        "ms_per_stage_mean": round(statistics.median(mean) * 1000, 4),
        "checkpoint_bytes": runs[0].checkpoint_bytes,
        "checkpoint_bytes_per_stage": round(runs[0].checkpoint_bytes / len(runs[0].stage_seconds), 1),
    }


def _ratios(figures: dict[str, Any]) -> dict[str, Any]:
    first, last = figures[str(HOPS[0])], figures[str(HOPS[-1])]
    middle = figures.get(str(HOPS[1]))
    ratios = {"time_ratio_last_first": round(last["ms_per_stage_at_hop"] / first["ms_per_stage_at_hop"], 2)}
    if middle is not None:
        ratios["bytes_ratio_last_middle"] = round(last["checkpoint_bytes"] / middle["checkpoint_bytes"], 2)
    return ratios


def moto_stores_factory() -> tuple[Callable[[], Stores], Any]:
    """The DynamoDB adapters under moto's mock_aws (started here, stopped by the caller)."""
    import os

    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.blobs import DynamoBlobStore
    from missions.adapters.dynamodb.checkpoints import DynamoCheckpointStore
    from missions.adapters.dynamodb.events import DynamoEventStore
    from missions.adapters.dynamodb.missions import DynamoMissionStore
    from missions.adapters.dynamodb.tables import table_definition
    from missions.core.specs import CHECKPOINTS, EVENTS, MISSIONS

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        os.environ.setdefault(name, "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    mock = mock_aws()
    mock.start()
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="bench-blobs")
    made = [0]

    def stores() -> Stores:
        made[0] += 1
        names = {spec.id: f"bench{made[0]}-{spec.id}" for spec in (CHECKPOINTS, EVENTS, MISSIONS)}
        for spec in (CHECKPOINTS, EVENTS, MISSIONS):
            ddb.create_table(**table_definition(spec, names[spec.id]))
        return Stores(
            DynamoCheckpointStore(names[CHECKPOINTS.id], client=ddb),
            DynamoEventStore(names[EVENTS.id], client=ddb),
            DynamoMissionStore(names[MISSIONS.id], client=ddb),
            CountingBlobs(DynamoBlobStore(names[CHECKPOINTS.id], "bench-blobs", client=ddb, s3_client=s3)),
        )

    return stores, mock


def run(with_moto: bool = True) -> dict[str, Any]:
    results: dict[str, Any] = {"loop": {}, "chain": {}}
    for hops in HOPS:
        repeats = max(REPEATS, -(-STAGES_TIMED // min(window(hops), hops - 1)))
        results["loop"][str(hops)] = measure(loop, hops, repeats, memory_stores)
        results["chain"][str(hops)] = measure(chain, hops, CHAIN_REPEATS, memory_stores)
    results["loop"].update(_ratios(results["loop"]))
    results["chain"].update(_ratios(results["chain"]))
    if with_moto:
        stores, mock = moto_stores_factory()
        try:
            results["moto"] = {str(h): measure(loop, h, MOTO_REPEATS, stores) for h in MOTO_HOPS}
            results["moto"].update(_ratios(results["moto"]))
            results["moto_chain"] = {str(h): measure(chain, h, MOTO_REPEATS, stores) for h in MOTO_HOPS}
            results["moto_chain"].update(_ratios(results["moto_chain"]))
        finally:
            mock.stop()
    return results


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    labels = {
        "loop": "runner alone, stages repeating (in memory)",
        "chain": "runner alone, N distinct stages (in memory)",
        "moto": "runner on DynamoDB adapters (moto), stages repeating",
        "moto_chain": "runner on DynamoDB adapters (moto), N distinct stages",
    }
    for kind, label in labels.items():
        figures = results.get(kind)
        if not figures:
            continue
        per_hop = [figures[str(h)] for h in HOPS if str(h) in figures]
        out.append(
            (
                f"{label}: ms per stage at hop " + " / ".join(str(f["hops"]) for f in per_hop),
                " / ".join(str(f["ms_per_stage_at_hop"]) for f in per_hop)
                + f" ms ({figures['time_ratio_last_first']}x from first to last)",
            )
        )
        out.append(
            (
                f"{label}: checkpoint bytes per stage",
                " / ".join(f"{f['checkpoint_bytes_per_stage']:.0f}" for f in per_hop)
                + (
                    f" B (total x{figures['bytes_ratio_last_middle']} from {HOPS[1]} to {HOPS[-1]} hops)"
                    if "bytes_ratio_last_middle" in figures
                    else " B"
                ),
            )
        )
    return out


def checks(results: dict[str, Any]) -> dict[str, bool]:
    """The targets, for every pipeline shape: the runner alone (in memory), and on moto when measured."""
    first, middle, last = HOPS
    found: dict[str, bool] = {}
    for kind in ("loop", "chain", "moto", "moto_chain"):
        figures = results.get(kind)
        if not figures:
            continue
        found[f"{kind}: per-stage time hop {last} <= {TARGET_RATIO}x hop {first}"] = (
            figures["time_ratio_last_first"] <= TARGET_RATIO
        )
        # linear: 10x the stages, about 10x the bytes (quadratic would be about 100x)
        found[f"{kind}: checkpoint bytes linear in stages ({middle} -> {last} hops <= 11x)"] = (
            figures["bytes_ratio_last_middle"] <= 11
        )
    return found


if __name__ == "__main__":
    measured = run(with_moto="--no-moto" not in sys.argv)
    print(json.dumps(measured, indent=2))
    for measure_, value in rows(measured):
        print(f"{measure_}: {value}")
