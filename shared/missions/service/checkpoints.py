"""Reading a mission's checkpoints: the state at any of them, and the mission's history.

Checkpoints keep what each stage changed (missions.core.mission.checkpoints); these are the reads built on
them, on demand, for whoever needs them: a retried stage (the state its first attempt committed), a
fork (the state it carries on from), the API and the CLI (the checkpoints and the stages' history).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from missions.core.mission.checkpoints import SNAPSHOT_EVERY, CheckpointChainBroken, fold
from missions.core.mission.envelope import StageRecord
from missions.ports.checkpoints import Checkpoint, CheckpointStore

# a chain longer than this between a checkpoint and its snapshot is not one this runtime wrote
MAX_CHAIN = 4 * SNAPSHOT_EVERY


def state_at(checkpoints: CheckpointStore, thread_id: str, checkpoint: str | Checkpoint) -> dict[str, Any]:
    """The encoded envelope at a checkpoint (by id, or the checkpoint itself): its snapshot folded
    with the deltas after it (one read per delta; NotFound when the checkpoint does not exist).
    The result shares values with what the store returned: decode it, do not change it."""
    current = checkpoint if isinstance(checkpoint, Checkpoint) else checkpoints.get(thread_id, checkpoint)
    chain: list[dict[str, Any]] = []
    while current.envelope is None:
        assert current.delta is not None and current.parent_id is not None  # Checkpoint's own rule
        chain.append(current.delta)
        if len(chain) > MAX_CHAIN:
            raise CheckpointChainBroken(f"{thread_id}/{current.checkpoint_id}: no snapshot within {MAX_CHAIN}")
        current = checkpoints.get(thread_id, current.parent_id)
    state = current.envelope
    for delta in reversed(chain):
        state = fold(state, delta)
    return state


def states(checkpoints: CheckpointStore, thread_id: str) -> Iterator[tuple[Checkpoint, dict[str, Any]]]:
    """Every checkpoint of the thread with the state at it, oldest first, from one listing (each delta
    folds onto its parent's state, already read)."""
    known: dict[str, dict[str, Any]] = {}
    for checkpoint in checkpoints.list(thread_id):
        if checkpoint.envelope is not None:
            state = checkpoint.envelope
        elif checkpoint.parent_id in known:
            assert checkpoint.delta is not None
            state = fold(known[checkpoint.parent_id], checkpoint.delta)
        else:  # listed before its parent (ids sort as text): read its chain
            state = state_at(checkpoints, thread_id, checkpoint)
        known[checkpoint.checkpoint_id] = state
        yield checkpoint, state


def with_earlier_outputs(checkpoints: CheckpointStore, thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    """The encoded state at a checkpoint, with every stage output the mission wrote up to it, also those
    that had left the envelope since (no later stage read them: missions.core.capability.liveness), each
    as it was last written. What a fork that resumes at an earlier stage needs, and whoever reads a
    mission's outputs whole. NotFound when the checkpoint does not exist."""
    target = state_at(checkpoints, thread_id, checkpoint_id)
    outputs: dict[str, Any] = {}
    refs: dict[str, str] = {}
    for checkpoint, state in states(checkpoints, thread_id):
        written = state.get("refs") or {}
        for key, value in (state.get("outputs") or {}).items():
            outputs[key] = value
            dotted = f"outputs.{key}"
            if dotted in written:
                refs[dotted] = written[dotted]
            else:
                refs.pop(dotted, None)
        if checkpoint.checkpoint_id == checkpoint_id:
            break
    present = target.get("outputs") or {}
    missing = [key for key in outputs if key not in present]
    if not missing:
        return target
    whole = dict(target)
    whole["outputs"] = {**{key: outputs[key] for key in missing}, **present}
    whole["refs"] = {**{f"outputs.{k}": refs[f"outputs.{k}"] for k in missing if f"outputs.{k}" in refs}}
    whole["refs"].update(target.get("refs") or {})
    return whole


def stage_history(checkpoints: CheckpointStore, thread_id: str) -> list[StageRecord]:
    """The mission's history: every stage run, in order, as its checkpoints recorded them."""
    return [record for checkpoint in checkpoints.list(thread_id) for record in records_of(checkpoint)]


def records_of(checkpoint: Checkpoint) -> list[StageRecord]:
    """A checkpoint's stage records. One written before checkpoints kept them (a whole envelope that
    carried the history) gives the last record of that history, or one saying only which stage ran."""
    if checkpoint.records or checkpoint.envelope is None:
        return list(checkpoint.records)
    carried = checkpoint.envelope.get("history")
    if isinstance(carried, list) and carried and isinstance(carried[-1], dict):
        return [StageRecord.model_validate(carried[-1])]
    return [StageRecord(stage=checkpoint.stage, started_at=checkpoint.created_at, duration_ms=0.0, status="unknown")]


__all__ = ["records_of", "stage_history", "state_at", "states", "with_earlier_outputs"]
