"""What a checkpoint keeps: the change its stage made, not the whole mission again.

Every stage writes a checkpoint (thread = mission id, checkpoint id, parent id). Storing the whole
envelope each time made a mission's checkpoint bytes grow with the square of its length, and carrying
the stages' history in the envelope made every stage re-serialize, hash, compress and rewrite all the
stages before it. Now:

- The envelope carries what the next stages read (outputs, counters, context, state, ...); a stage
  that runs again replaces its output, so the envelope does not grow with hops. The history (one
  `StageRecord` per stage run) is not in it: each checkpoint keeps its own stage's records, and the
  mission's history is read from its checkpoints on demand (missions.service.checkpoints).
- A checkpoint keeps either the whole encoded envelope (a *snapshot*) or a *delta*: `diff` of the
  envelope its stage was given and the one it returned. A mission's first checkpoint (a new mission or
  a fork) is a snapshot, and so is the first one past every multiple of `SNAPSHOT_EVERY` hops.
- The state at any checkpoint is its snapshot folded forward with the deltas after it (`fold`): at
  most SNAPSHOT_EVERY - 1 deltas to read. The trade-off: a larger SNAPSHOT_EVERY stores fewer whole
  envelopes (bytes per stage ~ delta + envelope / SNAPSHOT_EVERY) but reading a state (a retried
  stage, a fork, time travel) reads more items. Both stay constant per stage whatever the mission's
  length; only the total grows, linearly.

Why the delta is taken against the envelope the stage was *given*: that is the parent checkpoint's
state plus what was written into it on the way (`MACHINE_FIELDS`: ResultPaths of the compiled ASL,
the handler's segment_yield), and the runner has it without reading anything. Those fields are put in every delta
whatever their value, so folding the parent's state with the delta is exactly the state the stage
returned. A new ResultPath into the envelope must be listed there (a test compiles every capability
and checks it).

Encoded envelopes are JSON objects. A top-level field that is an object on both sides (`outputs`,
one entry per stage; `edge_counts`, one per edge; `refs`, one per offloaded field; `counters`...) is
diffed key by key: a stage changes its own output, not every stage's. Other fields are replaced whole.
Values are compared strictly (1, 1.0 and true differ) so a fold is the state itself, not one that
merely compares equal.
"""

from __future__ import annotations

import functools
from typing import Any

import pydantic_core

# what is written into the envelope between two stages, outside the stage: the compiled state machine's
# ResultPaths under $.envelope other than the stage's own result (an answer, a failure, branch results,
# the stage a resumed mission goes to, the notes a resume hands over) and the stage's word to its
# segment and its mission's machine (segment_yield, pause, mission_ended) with the notes its record held.
# The delta always names them, so the parent's state with the delta is the stage's, whatever they held.
MACHINE_FIELDS = (
    "resume",
    "failure",
    "branch_results",
    "next_stage",
    "segment_yield",
    "pause",
    "mission_ended",
    "notes",
)
# a snapshot at least every this many hops: reading a state folds at most this many - 1 deltas
SNAPSHOT_EVERY = 32


class CheckpointChainBroken(LookupError):
    """A delta checkpoint whose chain does not reach a snapshot (a parent missing, or a loop)."""


def diff(before: dict[str, Any], after: dict[str, Any], always: tuple[str, ...] = MACHINE_FIELDS) -> dict[str, Any]:
    """What turns `before` into `after`: {"set": {field: value}, "unset": [field], "keyed": {field:
    {"set": {key: value}, "unset": [key]}}, "extend": {field: [items]}}, each part only when not empty. A
    field that is an object on both sides is diffed key by key (one output among all the stages', one edge
    count, one offloaded field's reference); a list that only grew keeps just its new items (the
    citations, the answers, the errors: a stage adds to them, and storing the whole list again made the
    checkpoint of every stage that cited grow with all the citations before); fields in `always` are set
    (or unset) whatever `before` holds. Values are shared with `after`, not copied."""
    changed: dict[str, Any] = {}
    keyed: dict[str, Any] = {}
    extended: dict[str, Any] = {}
    forced = _as_set(always)
    for name, value in after.items():
        old = before.get(name, _MISSING)
        kind = type(value)
        if name in forced:
            changed[name] = value
        elif kind in _SCALARS and type(old) is kind:  # most fields: compared here, without a call
            if old != value:
                changed[name] = value
        elif kind is dict and type(old) is dict:
            part = _keyed(old, value)
            if part:
                keyed[name] = part
        elif kind is list and type(old) is list and len(value) > len(old) and same(old, value[: len(old)]):
            extended[name] = value[len(old) :]
        elif not same(old, value):
            changed[name] = value
    removed = [name for name in before if name not in after]
    removed += [name for name in always if name not in after and name not in before]
    delta: dict[str, Any] = {}
    if changed:
        delta["set"] = changed
    if removed:
        delta["unset"] = removed
    if keyed:
        delta["keyed"] = keyed
    if extended:
        delta["extend"] = extended
    return delta


_SCALARS = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _as_set(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(names)


def fold(state: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """`state` with `delta` applied, as a new object (`state` is not changed; unchanged values are shared)."""
    folded = dict(state)
    for name, part in delta.get("keyed", {}).items():
        inner = dict(folded.get(name) or {})
        inner.update(part.get("set", {}))
        for key in part.get("unset", ()):
            inner.pop(key, None)
        folded[name] = inner
    folded.update(delta.get("set", {}))
    for name in delta.get("unset", ()):
        folded.pop(name, None)
    for name, items in delta.get("extend", {}).items():
        folded[name] = [*folded.get(name, ()), *items]
    return folded


def detached(value: Any) -> Any:
    """A deep copy of a JSON value, sharing nothing with it (through pydantic-core's JSON: about twice
    as fast as the standard library's round trip, and much faster than copy.deepcopy). A stage is given
    a detached envelope, so what it changes in place cannot change the one its delta is taken against."""
    return pydantic_core.from_json(pydantic_core.to_json(value, inf_nan_mode="constants"), cache_strings=False)


def snapshot_due(parent_id: str | None, hops_before: int, hops_after: int, every: int = SNAPSHOT_EVERY) -> bool:
    """Whether a stage's checkpoint keeps the whole envelope: the first of a mission (or of a fork,
    whose parent is in another mission), and the first past each multiple of `every` hops. Every
    stage adds at least one hop, so at most `every` - 1 deltas follow a snapshot."""
    return parent_id is None or hops_after // every > hops_before // every


def same(a: Any, b: Any) -> bool:
    """Equal as JSON: the same types all the way down (Python's == takes 1, 1.0 and True for equal)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        if len(a) != len(b):
            return False
        for key, value in a.items():
            other = b.get(key, _MISSING)
            if not (value is other or (type(value) is type(other) and _same_inside(value, other))):
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        for value, other in zip(a, b, strict=True):
            if not (value is other or (type(value) is type(other) and _same_inside(value, other))):
                return False
        return True
    return bool(a == b)


def _same_inside(a: Any, b: Any) -> bool:
    """`same` for two values of one type: containers walk on, scalars compare (no call per leaf)."""
    if type(a) is dict or type(a) is list:
        return same(a, b)
    return bool(a == b)


def _keyed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    if not before and not after:
        return {}
    changed = {}
    for key, value in after.items():
        old = before.get(key, _MISSING)
        kind = type(value)
        if kind is type(old) and (old == value if kind in _SCALARS else _same_inside(old, value)):
            continue
        changed[key] = value
    removed = [key for key in before if key not in after] if len(before) > len(after) - len(changed) else []
    part: dict[str, Any] = {}
    if changed:
        part["set"] = changed
    if removed:
        part["unset"] = removed
    return part


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
