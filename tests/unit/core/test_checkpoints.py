"""Checkpoints keep what changed: diff and fold, snapshots, and reading states and history back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.core.capability import registry as registry
from missions.core.mission.checkpoints import (
    MACHINE_FIELDS,
    SNAPSHOT_EVERY,
    CheckpointChainBroken,
    detached,
    diff,
    fold,
    same,
    snapshot_due,
)
from missions.core.mission.envelope import StageRecord
from missions.core.pipeline.compiler import compile_mission, compile_pipeline
from missions.ports.checkpoints import Checkpoint
from missions.service.checkpoints import records_of, stage_history, state_at, states

# -- JSON values, as encoded envelopes hold them ----------------------------------------------

# (no NaN nor infinity: JSON has neither, and Step Functions carries JSON)
finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | finite | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)
FIELDS = ("outputs", "refs", "counters", "next_stage", "context", "citations", "edge_counts", *MACHINE_FIELDS)
envelopes = st.dictionaries(st.sampled_from(FIELDS), json_values | st.dictionaries(st.text(max_size=3), json_values))


def exactly(a: Any, b: Any) -> bool:
    """Equal as JSON text: 1, 1.0 and true differ, as they do for whoever decodes the state."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# -- diff and fold: the rule for every pair of states ------------------------------------------


@settings(max_examples=150, deadline=None)  # recursive states: 150 cover the shapes in a few seconds
@given(before=envelopes, after=envelopes)
def test_folding_a_diff_gives_the_state_after_exactly(before, after):
    # Given two states / When the second is folded from the first and their diff
    folded = fold(before, diff(before, after))
    # Then it is the second, to the type of every value
    assert exactly(folded, after)


@settings(max_examples=75, deadline=None)  # chains of up to 12 states each
@given(chain=st.lists(envelopes, min_size=1, max_size=12), every=st.integers(1, 5))
def test_folding_a_chain_of_deltas_gives_the_state_at_every_checkpoint(chain, every):
    # Given a thread of states, kept as a snapshot every `every` checkpoints and deltas between
    store = MemoryCheckpointStore()
    parent: str | None = None
    for hop, state in enumerate(chain, 1):
        whole = snapshot_due(parent, hop - 1, hop, every)
        previous = chain[hop - 2] if hop > 1 else {}
        store.put(
            Checkpoint(
                thread_id="t",
                checkpoint_id=f"{hop:04d}-s",
                parent_id=parent,
                stage="s",
                envelope=state if whole else None,
                delta=None if whole else diff(previous, state),
            )
        )
        parent = f"{hop:04d}-s"
    # When each state is read back, one at a time and all from one listing
    one_by_one = [state_at(store, "t", f"{hop:04d}-s") for hop in range(1, len(chain) + 1)]
    listed = [state for _, state in states(store, "t")]
    # Then every one is the state that was checkpointed
    assert all(exactly(got, want) for got, want in zip(one_by_one, chain, strict=True))
    assert all(exactly(got, want) for got, want in zip(listed, chain, strict=True))


@given(before=envelopes, after=envelopes)
def test_a_diff_never_changes_what_it_compares_and_a_fold_never_changes_its_state(before, after):
    kept_before, kept_after = json.dumps(before, sort_keys=True), json.dumps(after, sort_keys=True)
    fold(before, diff(before, after))
    assert json.dumps(before, sort_keys=True) == kept_before and json.dumps(after, sort_keys=True) == kept_after


@given(a=json_values, b=json_values)
def test_same_is_equality_as_json(a, b):
    assert same(a, b) == exactly(a, b)


@given(value=json_values)
def test_a_detached_copy_is_equal_and_shares_nothing(value):
    copy = detached({"v": value})
    assert exactly(copy, {"v": value})
    if isinstance(value, dict | list):
        assert copy["v"] is not value


# -- what a delta holds ---------------------------------------------------------------------------


def test_a_delta_names_only_what_changed_key_by_key_and_always_the_machines_fields():
    # Given a stage that wrote its output and counted a hop
    before = {
        "outputs": {"plan": {"steps": [1, 2]}, "research": {"notes": "x" * 1000}},
        "counters": {"agent_hops": 3, "llm_calls": 1},
        "context": {"repo": "."},
        "resume": {"interrupt_id": "i1"},
        **{name: None for name in MACHINE_FIELDS if name != "resume"},
    }
    after = {
        "outputs": {"plan": {"steps": [1, 2]}, "research": {"notes": "x" * 1000}, "draft": {"text": "hi"}},
        "counters": {"agent_hops": 4, "llm_calls": 1},
        "context": {"repo": "."},
        "resume": None,
        **{name: None for name in MACHINE_FIELDS if name != "resume"},
    }
    # When it is diffed
    delta = diff(before, after)
    # Then the delta holds the new output and the changed counter, not what stayed (and the machine's fields)
    assert delta == {
        "set": dict.fromkeys(MACHINE_FIELDS),
        "keyed": {"outputs": {"set": {"draft": {"text": "hi"}}}, "counters": {"set": {"agent_hops": 4}}},
    }


def test_a_field_the_state_machine_writes_is_in_every_delta_even_unchanged():
    # Given the machine's fields, the same before and after (the stage left them as the machine wrote them)
    state = {
        "failure": None,
        "resume": None,
        "branch_results": None,
        "next_stage": "b",
        "segment_yield": False,
        "pause": False,
        "mission_ended": False,
        "notes": None,
    }
    # Then the delta still sets them: the parent's state may hold other values there (an ended failure, the
    # await state a resumed mission left, a segment told to hand back)
    assert diff(state, dict(state)) == {"set": state}
    parent = {
        "failure": {"Error": "x"},
        "next_stage": "await:clarification",
        "segment_yield": True,
        "pause": True,
        "notes": [{"note_id": "note_1", "text": "t", "at": "x"}],
    }
    assert fold(parent, diff(state, dict(state))) == state


@settings(max_examples=100, deadline=None)
@given(kept=st.lists(json_values, max_size=5), added=st.lists(json_values, min_size=1, max_size=5))
def test_a_list_that_only_grew_keeps_just_its_new_items_and_folds_back_exactly(kept, added):
    # Given the citations a stage added to those before it
    before, after = {"citations": kept}, {"citations": [*kept, *added]}
    # When diffed
    delta = diff(before, after, always=())
    # Then only the new ones are stored, and the fold gives the whole list back
    assert delta == {"extend": {"citations": added}}
    assert exactly(fold(before, delta), after)


def test_a_list_that_changed_otherwise_is_stored_whole():
    before, after = {"citations": [1, 2, 3]}, {"citations": [1, 3, 4, 5]}
    assert diff(before, after, always=()) == {"set": {"citations": [1, 3, 4, 5]}}
    assert diff({"citations": [1, 2]}, {"citations": [1.0, 2, 3]}, always=()) == {"set": {"citations": [1.0, 2, 3]}}


def test_removed_fields_and_keys_are_removed_by_the_fold():
    before = {"refs": {"outputs.a": "k1", "context": "k2"}, "history": [1, 2]}
    after = {"refs": {"context": "k2"}}
    delta = diff(before, after, always=())
    assert delta == {"unset": ["history"], "keyed": {"refs": {"unset": ["outputs.a"]}}}
    assert fold(before, delta) == after


@pytest.mark.parametrize(
    ("parent", "before", "after", "due"),
    [
        (None, 0, 1, True),  # a mission's first checkpoint
        (None, 7, 8, True),  # a fork's first: its parent is in another mission
        ("0007-a", 7, 8, False),
        ("0031-a", SNAPSHOT_EVERY - 1, SNAPSHOT_EVERY, True),
        ("0032-a", SNAPSHOT_EVERY, SNAPSHOT_EVERY + 1, False),
        ("0030-a", SNAPSHOT_EVERY - 2, SNAPSHOT_EVERY + 1, True),  # a join that counted its branches
    ],
)
def test_a_snapshot_is_due_first_and_past_every_multiple_of_the_period(parent, before, after, due):
    assert snapshot_due(parent, before, after) is due


@given(steps=st.lists(st.integers(1, 4), min_size=1, max_size=200))
def test_at_most_a_period_minus_one_deltas_follow_a_snapshot(steps):
    # Given stages adding 1 to 4 hops each (a join adds its branches)
    hops, parent, since = 0, None, 0
    for added in steps:
        # When each checkpoints
        whole = snapshot_due(parent, hops, hops + added)
        since = 0 if whole else since + 1
        hops, parent = hops + added, "p"
        # Then the chain back to a snapshot is never longer than the period
        assert since <= SNAPSHOT_EVERY - 1


# -- the checkpoint record ------------------------------------------------------------------------


def test_a_checkpoint_keeps_a_whole_envelope_or_a_delta_on_a_parent():
    with pytest.raises(ValidationError, match="either"):
        Checkpoint(thread_id="t", checkpoint_id="1", parent_id=None, stage="s")
    with pytest.raises(ValidationError, match="either"):
        Checkpoint(thread_id="t", checkpoint_id="1", parent_id="0", stage="s", envelope={}, delta={})
    with pytest.raises(ValidationError, match="parent"):
        Checkpoint(thread_id="t", checkpoint_id="1", parent_id=None, stage="s", delta={})


def test_a_delta_whose_chain_has_no_snapshot_is_refused():
    # Given deltas whose parents loop (no runtime writes that; a hand-made or damaged thread)
    store = MemoryCheckpointStore()
    store.put(Checkpoint(thread_id="t", checkpoint_id="a", parent_id="b", stage="s", delta={}))
    store.put(Checkpoint(thread_id="t", checkpoint_id="b", parent_id="a", stage="s", delta={}))
    # Then reading its state says so rather than looping
    with pytest.raises(CheckpointChainBroken):
        state_at(store, "t", "a")


# -- the mission's history, from its checkpoints ---------------------------------------------------


def record(stage: str, status: str = "ok") -> StageRecord:
    return StageRecord(stage=stage, started_at="2026-01-01T00:00:00.000+00:00", duration_ms=1.0, status=status)


def test_the_history_is_every_checkpoints_records_in_order():
    # Given a snapshot, a delta, and a join's checkpoint recording its two branches and itself
    store = MemoryCheckpointStore()
    store.put(
        Checkpoint(thread_id="m", checkpoint_id="0001-a", parent_id=None, stage="a", envelope={}, records=[record("a")])
    )
    store.put(
        Checkpoint(
            thread_id="m",
            checkpoint_id="0002-ask",
            parent_id="0001-a",
            stage="ask",
            delta={},
            records=[record("ask", "interrupted")],
        )
    )
    store.put(
        Checkpoint(
            thread_id="m",
            checkpoint_id="0005-join",
            parent_id="0002-ask",
            stage="join",
            delta={},
            records=[record("b"), record("c"), record("join")],
        )
    )
    # When the history is read
    history = stage_history(store, "m")
    # Then it lists every stage run, in order
    assert [(r.stage, r.status) for r in history] == [
        ("a", "ok"),
        ("ask", "interrupted"),
        ("b", "ok"),
        ("c", "ok"),
        ("join", "ok"),
    ]


def test_a_checkpoint_written_before_records_gives_the_last_of_the_history_it_carried():
    # Given checkpoints an earlier version wrote: the whole envelope, its history inside
    carried = {"history": [record("a").model_dump(), record("b").model_dump()]}
    older = Checkpoint(thread_id="m", checkpoint_id="0002-b", parent_id="0001-a", stage="b", envelope=carried)
    offloaded = Checkpoint(
        thread_id="m", checkpoint_id="0003-c", parent_id="0002-b", stage="c", envelope={"history": []}
    )
    # Then each gives its own stage's record (or, the history gone, which stage it was)
    assert [r.stage for r in records_of(older)] == ["b"]
    assert [(r.stage, r.status) for r in records_of(offloaded)] == [("c", "unknown")]


# -- the state machine writes only the fields every delta names -------------------------------------


def _result_paths(node: Any) -> Iterator[str]:
    """Every ResultPath in a state machine, nested Parallel branches and Map iterators included."""
    if isinstance(node, dict):
        if isinstance(node.get("ResultPath"), str):
            yield node["ResultPath"]
        for value in node.values():
            yield from _result_paths(value)
    elif isinstance(node, list):
        for value in node:
            yield from _result_paths(value)


@pytest.mark.parametrize("capability", registry.load_all(), ids=lambda c: c.name)
def test_the_state_machine_writes_into_the_envelope_only_what_every_delta_names(capability):
    # Given a capability's compiled state machines (what it deploys, and the single-level layout)
    definition = [compile_mission(capability.pipeline).as_dict(), compile_pipeline(capability.pipeline)]
    # When it writes a task's result into the envelope, other than a stage's whole envelope
    written = {path for path in _result_paths(definition) if path.startswith("$.envelope.")}
    # Then it writes one of the fields a checkpoint's delta always names (or inside one): a stage's
    # delta is taken against the envelope it was given, which is its parent's plus these
    assert {path.split(".")[2] for path in written} <= set(MACHINE_FIELDS), written
