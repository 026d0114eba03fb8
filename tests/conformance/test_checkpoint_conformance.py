"""Checkpoint stores, in memory and on DynamoDB (+ S3) in moto: snapshots, deltas and stage records come
back exactly as written (write-once, listed oldest first, deleted by thread), and a mission's checkpoints give
back the state at every one of its stages.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import BaseModel

from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.capability.registry import Capability, Ctx
from missions.core.errors import NotFound
from missions.core.mission.checkpoints import SNAPSHOT_EVERY
from missions.core.mission.envelope import Envelope, StageRecord
from missions.core.mission.offload import EnvelopeCodec
from missions.core.pipeline.config import AgentConfig, EdgeLimit
from missions.core.specs import CHECKPOINTS
from missions.ports.checkpoints import Checkpoint, CheckpointStore
from missions.ports.missions import MissionRecord
from missions.service.checkpoints import stage_history, state_at, states
from missions.service.runner import StageRunner, StageServices
from tests.support.stages import answering, stage_named, typed_capability

if TYPE_CHECKING:
    from tests.conformance.conftest import Moto


@dataclass
class Backend:
    name: str
    checkpoints: CheckpointStore
    blobs: Any


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        yield Backend("memory", MemoryCheckpointStore(), MemoryBlobStore())
        return
    from missions.adapters.dynamodb.blobs import DynamoBlobStore
    from missions.adapters.dynamodb.checkpoints import DynamoCheckpointStore

    aws: Moto = request.getfixturevalue("aws")
    table = aws.table(CHECKPOINTS)
    yield Backend(
        "dynamodb",
        DynamoCheckpointStore(table, client=aws.ddb, ttl_seconds=3600),
        DynamoBlobStore(table, aws.bucket, client=aws.ddb, s3_client=aws.s3),
    )


def record(stage: str, **fields: Any) -> StageRecord:
    return StageRecord(stage=stage, started_at="2026-01-01T00:00:00.000+00:00", duration_ms=1.5, status="ok", **fields)


# -- what a store keeps ----------------------------------------------------------------------------


def checkpoint(thread_id: str, checkpoint_id: str, parent_id: str | None = None, **envelope: Any) -> Checkpoint:
    return Checkpoint(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        parent_id=parent_id,
        stage="plan",
        envelope=envelope or {"goal": "g", "outputs": {}},
    )


def test_checkpoint_put_is_write_once(backend):
    first = checkpoint("t1", "0001", goal="first")
    assert backend.checkpoints.put(first) == first
    retried = checkpoint("t1", "0001", goal="forked?")
    stored = backend.checkpoints.put(retried)
    assert stored == first
    assert backend.checkpoints.get("t1", "0001") == first
    assert backend.checkpoints.list("t1") == [first]


def test_checkpoint_list_latest_oldest_first(backend):
    assert backend.checkpoints.list("t1") == []
    assert backend.checkpoints.latest("t1") is None
    c2 = checkpoint("t1", "0002", parent_id="0001", step=2)
    c1 = checkpoint("t1", "0001", step=1)
    c3 = checkpoint("t1", "0003", parent_id="0002", step=3)
    other = checkpoint("t2", "0009", step=9)
    for c in (c2, c1, c3, other):
        backend.checkpoints.put(c)
    assert backend.checkpoints.list("t1") == [c1, c2, c3]
    assert backend.checkpoints.latest("t1") == c3
    assert backend.checkpoints.latest("t2") == other
    assert backend.checkpoints.get("t1", "0002").parent_id == "0001"


def test_a_stages_progress_comes_back_with_its_checkpoint_and_as_the_latest(backend):
    # Given two stages' checkpoints, each with the mission's progress after it (the newest one asking)
    counters = {"agent_hops": 2, "cost_usd": 0.1 + 0.2, "llm_calls": 1}
    first = checkpoint("t1", "0001").model_copy(update={"progress": {"stage": "plan", "counters": {"agent_hops": 1}}})
    asking = {"stage": "ask", "next_stage": "await:clarification", "phase": "planning", "counters": counters}
    second = checkpoint("t1", "0002", parent_id="0001").model_copy(update={"progress": {**asking, "asking": "i_1"}})
    for c in (second, first):
        backend.checkpoints.put(c)
    # Then each comes back with its progress exactly (a float's digits too), and the latest is the newest
    assert backend.checkpoints.get("t1", "0001") == first
    assert backend.checkpoints.latest("t1") == second
    assert backend.checkpoints.latest("t1").progress["counters"]["cost_usd"] == 0.1 + 0.2
    # and one written before checkpoints kept progress reads as having none
    assert backend.checkpoints.put(checkpoint("t2", "0001")).progress is None
    assert backend.checkpoints.latest("t2").progress is None


def test_checkpoint_get_missing(backend):
    with pytest.raises(NotFound):
        backend.checkpoints.get("t1", "0001")
    backend.checkpoints.put(checkpoint("t1", "0001"))
    with pytest.raises(NotFound):
        backend.checkpoints.get("t1", "0002")


def test_checkpoint_envelope_round_trip(backend):
    envelope = {
        "goal": "naïve ✓",
        "counters": {"cost_usd": 0.1 + 0.2, "llm_calls": 7, "whole_float": 2.0, "tiny": 5e-324, "big": 1e300},
        "outputs": {"plan": {"steps": [1, 2.25, None, True, ""]}},
        "refs": {"context": "ab" * 32},
        "history": [{"$ref": "cd" * 32, "bytes": 1234}],
        "empty": {},
    }
    c = Checkpoint(thread_id="t1", checkpoint_id="0001", parent_id=None, stage="s", envelope=envelope)
    backend.checkpoints.put(c)
    got = backend.checkpoints.get("t1", "0001")
    assert got.envelope == envelope
    assert isinstance(got.envelope["counters"]["whole_float"], float)
    assert got.envelope["counters"]["cost_usd"] == 0.1 + 0.2
    assert got == c


def test_delete_thread_removes_every_checkpoint_of_that_thread_only(backend):
    for index in range(30):  # more than one DynamoDB batch
        backend.checkpoints.put(checkpoint("t1", f"{index:04d}-plan"))
    backend.checkpoints.put(checkpoint("t2", "0001-plan"))
    assert backend.checkpoints.delete_thread("t1") == 30
    assert backend.checkpoints.list("t1") == [] and backend.checkpoints.latest("t1") is None
    assert len(backend.checkpoints.list("t2")) == 1
    assert backend.checkpoints.delete_thread("t1") == 0


def test_a_delta_and_its_records_come_back_exactly(backend: Backend):
    # Given a delta with floats, whole numbers, text, emptiness and removals, and two stage records
    delta = {
        "set": {"next_stage": "critic", "resume": None, "failure": None, "ratio": 2.0, "naïve": "✓"},
        "unset": ["history"],
        "keyed": {
            "outputs": {"set": {"plan": {"steps": [1, 2.25, None, True, ""], "empty": {}}}, "unset": ["old"]},
            "counters": {"set": {"agent_hops": 33, "cost_usd": 0.1 + 0.2}},
        },
    }
    records = [record("b", llm_calls=2), record("join", next_stage="critic")]
    written = Checkpoint(
        thread_id="m1", checkpoint_id="0033-join", parent_id="0032-a", stage="join", delta=delta, records=records
    )
    # When it is written and read back
    assert backend.checkpoints.put(written) == written
    got = backend.checkpoints.get("m1", "0033-join")
    # Then it is the very checkpoint: each number of the type it was written
    assert got == written and got.envelope is None
    assert isinstance(got.delta["set"]["ratio"], float) and isinstance(
        got.delta["keyed"]["counters"]["set"]["agent_hops"], int
    )
    assert got.delta["keyed"]["counters"]["set"]["cost_usd"] == 0.1 + 0.2
    assert backend.checkpoints.list("m1") == [written]


def test_a_delta_checkpoint_is_written_once(backend: Backend):
    # Given a stage's checkpoint
    first = Checkpoint(thread_id="m1", checkpoint_id="0002-b", parent_id="0001-a", stage="b", delta={"set": {"x": 1}})
    backend.checkpoints.put(first)
    # When a second attempt of that stage writes another
    again = Checkpoint(thread_id="m1", checkpoint_id="0002-b", parent_id="0001-a", stage="b", delta={"set": {"x": 2}})
    # Then the first stands, and is what the second attempt is told
    assert backend.checkpoints.put(again) == first
    assert backend.checkpoints.get("m1", "0002-b") == first


def test_a_snapshot_without_records_comes_back_without_them(backend: Backend):
    # Given a whole envelope and no record (a journal entry, a checkpoint written before records)
    written = Checkpoint(thread_id="m1#tools", checkpoint_id="a@1#k", parent_id=None, stage="a", envelope={"call": {}})
    backend.checkpoints.put(written)
    # Then it comes back as written
    assert backend.checkpoints.get("m1#tools", "a@1#k") == written


# -- a mission's checkpoints, written by the runner --------------------------------------------------


class Tick(BaseModel):
    hop: int
    text: str


def ticking(name: str) -> Any:
    """A stage whose output changes at every run, and grows past the codec's threshold (offloaded)."""

    def tick(ctx: Ctx) -> Tick:
        return Tick(hop=ctx.counters.agent_hops, text=f"{name}:" + "x" * (40 * ctx.counters.agent_hops))

    return stage_named(name, tick)


def looping(hops: int) -> Capability:
    """a -> b -> a ... until the hop bound sends it to `done`."""
    return typed_capability(
        "t_checkpoint_loop",
        [
            AgentConfig(name="a", default_next="b"),
            AgentConfig(name="b", default_next="a", routing_rules=[{"field": "hop", "value": -1, "target": "done"}]),
            AgentConfig(name="done"),
        ],
        ticking("a"),
        ticking("b"),
        answering("done"),
        pipeline={
            "bounds": {"max_agent_hops": hops, "max_iterations": 1},
            "edge_limits": [EdgeLimit(from_stage="b", to_stage="a", max_count=1000)],
        },
    )


@dataclass
class Ran:
    runner: StageRunner
    mission_id: str
    given: dict[str, dict[str, Any]]  # checkpoint id -> the envelope its stage was given
    returned: dict[str, dict[str, Any]]  # checkpoint id -> the envelope its stage returned


def run_mission(backend: Backend, hops: int) -> Ran:
    capability = looping(hops)
    missions = MemoryMissionStore()
    codec = EnvelopeCodec(backend.blobs, threshold=2048)  # small: outputs move to blobs as they grow
    runner = StageRunner(
        capability,
        StageServices(
            checkpoints=backend.checkpoints,
            events=MemoryEventStore(),
            codec=codec,
            llm=lambda c: (_ for _ in ()).throw(AssertionError("no model here")),
            missions=missions,
        ),
    )
    envelope = Envelope(capability=capability.name, raw_input="tick", bounds=capability.pipeline.bounds)
    missions.create(
        MissionRecord(
            mission_id=envelope.mission_id, user_id="local", capability=capability.name, goal="tick", status="running"
        )
    )
    state, stage, hop = codec.encode(envelope), "a", 0
    ran = Ran(runner, envelope.mission_id, {}, {})
    while stage is not None:
        result = runner.handle({"stage": stage, "mode": "run", "envelope": state, "hop": hop})
        ran.given[result["checkpoint_id"]], ran.returned[result["checkpoint_id"]] = state, result
        state, stage, hop = result, result.get("next_stage"), hop + 1
    return ran


def test_every_checkpoint_of_a_mission_gives_back_the_state_its_stage_returned(backend: Backend):
    # Given a mission longer than the snapshot period, whose outputs change and move to blobs as they grow
    ran = run_mission(backend, SNAPSHOT_EVERY + 8)
    assert any(state["refs"] for state in ran.returned.values())  # (outputs moved to blobs along the way)
    checkpoints = backend.checkpoints.list(ran.mission_id)
    # Then it kept whole envelopes only at its start and past the period, deltas otherwise
    whole = [c.checkpoint_id for c in checkpoints if c.envelope is not None]
    assert whole == ["0001-a", f"{SNAPSHOT_EVERY:04d}-{'a' if SNAPSHOT_EVERY % 2 else 'b'}"]
    # And each checkpoint's state, read one by one or all at once, is what its stage returned
    assert {c.checkpoint_id: state_at(backend.checkpoints, ran.mission_id, c.checkpoint_id) for c in checkpoints} == (
        ran.returned
    )
    assert {c.checkpoint_id: state for c, state in states(backend.checkpoints, ran.mission_id)} == ran.returned
    # And the history lists every stage run, in order
    history = stage_history(backend.checkpoints, ran.mission_id)
    assert [r.stage for r in history] == [c.stage for c in checkpoints]
    assert history[-1].stage == "done" and len(history) == SNAPSHOT_EVERY + 8


def test_a_retried_stage_returns_what_its_committed_checkpoint_holds(backend: Backend):
    # Given a mission that ran (its checkpoints past a snapshot, so the state is folded from deltas)
    ran = run_mission(backend, SNAPSHOT_EVERY + 8)
    retried = f"{SNAPSHOT_EVERY + 3:04d}-" + ("a" if (SNAPSHOT_EVERY + 3) % 2 else "b")
    stage, hop = retried.split("-")[1], int(retried.split("-")[0]) - 1
    listed = backend.checkpoints.list(ran.mission_id)
    # When that stage runs again on the very envelope it was given (a retried Lambda)
    again = ran.runner.handle({"stage": stage, "mode": "run", "envelope": ran.given[retried], "hop": hop})
    # Then it returns what it returned the first time, and writes no checkpoint
    assert again == ran.returned[retried]
    assert backend.checkpoints.list(ran.mission_id) == listed
