"""A compiled state machine as a graph to draw: nodes (states, by kind) and edges (every way out of each).

The dashboard draws a mission's machine from this and highlights the stage the mission is at, so the
graph is the definition as Step Functions runs it (missions.core.pipeline.compiler), not a second description
of the pipeline. States inside a Parallel branch or a Map's item processor are nodes too, named
`<parent>/<state>`, with an edge from the parent to each branch's start and from each branch's end
back to the parent's next state.
"""

from __future__ import annotations

import copy
from typing import Any

from missions.core.pipeline.compiler import (
    DONE,
    FAILED,
    SEGMENT_BEGIN,
    SEGMENT_CHAIN,
    SEGMENT_END,
    SEGMENT_FAIL,
    SEGMENT_HANDED,
    SEGMENT_HEARTBEAT,
    SEGMENT_REPORT,
    SEGMENT_START,
    START,
    MissionMachines,
)

_KINDS = {"Choice": "choice", "Pass": "pass", "Succeed": "end", "Fail": "fail", "Parallel": "parallel", "Map": "map"}


def _kind(name: str, state: dict[str, Any]) -> str:
    if state.get("Type") == "Task":
        return "await" if str(state.get("Resource", "")).endswith("waitForTaskToken") else "stage"
    if name.startswith("guard."):
        return "guard"
    return _KINDS.get(str(state.get("Type")), "pass")


def _stage(state: dict[str, Any]) -> str | None:
    parameters = state.get("Parameters") or {}
    stage = parameters.get("stage") if isinstance(parameters, dict) else None
    return stage if isinstance(stage, str) else None


def _exits(state: dict[str, Any]) -> list[tuple[str, str]]:
    """(target, label) for every transition out of a state."""
    out: list[tuple[str, str]] = []
    for choice in state.get("Choices") or []:
        condition = next((str(v) for k, v in choice.items() if k not in ("Variable", "Next")), "")
        out.append((choice["Next"], condition[:40]))
    if "Default" in state:
        out.append((state["Default"], "otherwise"))
    if "Next" in state:
        out.append((state["Next"], ""))
    out += [(catch["Next"], "on error") for catch in state.get("Catch") or []]
    return out


def state_graph(definition: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"nodes": [...], "edges": [...], "start": id} of an ASL definition (see the module's docstring)."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    states: dict[str, dict[str, Any]] = definition["States"]
    for name, state in states.items():
        node_id = prefix + name
        stage = _stage(state)
        kind = _kind(name, state)
        nodes.append({"id": node_id, "kind": kind, "stage": stage, "label": stage or name})
        for target, label in _exits(state):
            edges.append({"from": node_id, "to": prefix + target, "label": label})
        inner = list(state.get("Branches") or [])
        if state.get("ItemProcessor"):
            inner.append(state["ItemProcessor"])
        for index, branch in enumerate(inner):
            nested = state_graph(branch, f"{node_id}/{index}/" if len(inner) > 1 else f"{node_id}/")
            nodes += nested["nodes"]
            edges += nested["edges"]
            edges.append({"from": node_id, "to": nested["start"], "label": "branch"})
            ends = [n["id"] for n in nested["nodes"] if n["kind"] == "end" or _is_last(branch, n["id"])]
            for end in ends:
                edges += [{"from": end, "to": prefix + target, "label": ""} for target, _ in _exits(state)[:1]]
    return {"nodes": nodes, "edges": edges, "start": prefix + definition["StartAt"]}


def _is_last(branch: dict[str, Any], node_id: str) -> bool:
    name = node_id.rsplit("/", 1)[-1]
    state = branch["States"].get(name) or {}
    return bool(state.get("End"))


def mission_graph(machines: MissionMachines) -> dict[str, Any]:
    """The graph of a mission as it runs, over both levels: a segment's states, and the mission's waits
    for people in place of the segment's hand-backs (a segment that hands back to wait goes to the
    await states; one that is done ends the mission; the answer enters the segment's start again).
    States both levels have (finalize, the guards) are drawn once: they do the same thing."""
    if machines.segment is None:
        return state_graph(machines.mission)
    states = copy.deepcopy(machines.segment["States"])
    plumbing = {SEGMENT_BEGIN, "segment", "segment.exit", "segment.failed", "segment.retry", "segment.lost"}
    awaits = []
    for name, state in machines.mission["States"].items():
        if name in plumbing or name in states:
            continue
        state = copy.deepcopy(state)
        if state.get("Next") == SEGMENT_BEGIN:  # an answer: the next segment starts where it says
            state["Next"] = START
        if name.startswith("await.") and name.count(".") == 1:
            awaits.append(name)
        states[name] = state
    # the segment's own plumbing (its heartbeat and end, its chaining, its report on the token), as the
    # mission's segment states
    for name in (SEGMENT_END, SEGMENT_START, SEGMENT_HEARTBEAT, SEGMENT_CHAIN, SEGMENT_REPORT, SEGMENT_HANDED):
        states.pop(name, None)
    if SEGMENT_FAIL in states:  # the segment reports the mission's failure: the mission's machine fails it
        states[FAILED] = states.pop(SEGMENT_FAIL)
    if "segment.await" in states:
        states["segment.await"] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.envelope.next_stage", "StringEquals": a.replace(".", ":", 1), "Next": a} for a in awaits
            ],
        }
    if "segment.done" in states:
        states["segment.done"] = {"Type": "Pass", "Next": DONE}
    if "segment.continue" in states:
        states["segment.continue"] = {"Type": "Pass", "Next": START}
    start = machines.segment["StartAt"]
    return state_graph({"StartAt": START if start == SEGMENT_START else start, "States": states})
