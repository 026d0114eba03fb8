"""Checkpoint stores, in memory and on DynamoDB (+ S3) in moto: snapshots, deltas and stage records come
back exactly as written, and a mission's checkpoints give back the state at every one of its stages.

(test_store_conformance holds the older cases every store kept: write-once, listing, a whole envelope's
round trip.)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from missions.adapters.memory.store import MemoryBlobStore, MemoryCheckpointStore
from missions.core.envelope import StageRecord
from missions.core.specs import CHECKPOINTS
from missions.ports.store import Checkpoint, CheckpointStore

REGION = "us-east-1"
BUCKET = "missions-checkpoints-test"


@dataclass
class Backend:
    name: str
    checkpoints: CheckpointStore
    blobs: Any


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request, monkeypatch) -> Iterator[Backend]:
    if request.param == "memory":
        yield Backend("memory", MemoryCheckpointStore(), MemoryBlobStore())
        return
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.store import DynamoBlobStore, DynamoCheckpointStore, table_definition

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        ddb.create_table(**table_definition(CHECKPOINTS, "test-checkpoints"))
        s3.create_bucket(Bucket=BUCKET)
        yield Backend(
            "dynamodb",
            DynamoCheckpointStore("test-checkpoints", client=ddb, ttl_seconds=3600),
            DynamoBlobStore("test-checkpoints", BUCKET, client=ddb, s3_client=s3),
        )


def record(stage: str, **fields: Any) -> StageRecord:
    return StageRecord(stage=stage, started_at="2026-01-01T00:00:00.000+00:00", duration_ms=1.5, status="ok", **fields)


# -- what a store keeps ----------------------------------------------------------------------------


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
