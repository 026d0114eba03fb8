"""A compiled state machine as a graph to draw (missions.core.pipeline.graph), for every installed capability."""

from __future__ import annotations

import pytest

from missions.core.capability import registry as registry
from missions.core.pipeline.compiler import SEGMENT_BEGIN, SEGMENT_START, START, compile_mission, compile_pipeline
from missions.core.pipeline.graph import mission_graph, state_graph

NAMES = registry.default_registry().available()


@pytest.mark.parametrize("name", NAMES)
def test_every_state_is_a_node_every_edge_joins_two_and_every_stage_is_drawn(name: str):
    pipeline = registry.default_registry().load(name).pipeline
    definition = compile_pipeline(pipeline)
    graph = state_graph(definition)
    ids = [n["id"] for n in graph["nodes"]]
    assert len(ids) == len(set(ids)) and set(definition["States"]) <= set(ids)
    assert all(e["from"] in ids and e["to"] in ids for e in graph["edges"]), name
    assert set(pipeline.stage_names()) <= {n["stage"] for n in graph["nodes"] if n["kind"] == "stage"}
    # everything is reachable from the start, inside branches too
    seen, frontier = {graph["start"]}, [graph["start"]]
    while frontier:
        node = frontier.pop()
        for edge in graph["edges"]:
            if edge["from"] == node and edge["to"] not in seen:
                seen.add(edge["to"])
                frontier.append(edge["to"])
    assert seen == set(ids), set(ids) - seen


def test_a_parallel_state_draws_its_branches_and_joins_after_them():
    pipeline = registry.default_registry().load("home_assistant").pipeline
    graph = state_graph(compile_pipeline(pipeline))
    parallel = next(n for n in graph["nodes"] if n["kind"] == "parallel")
    branches = [e["to"] for e in graph["edges"] if e["from"] == parallel["id"] and e["label"] == "branch"]
    assert len(branches) >= 2 and all(b.startswith(parallel["id"] + "/") for b in branches)


@pytest.mark.parametrize("name", NAMES)
def test_a_missions_graph_starts_at_the_stage_router_and_draws_no_segment_plumbing(name: str):
    # Given the two levels as they run (the segment computes its own end in a Pass before its router)
    machines = compile_mission(registry.default_registry().load(name).pipeline)
    graph = mission_graph(machines)
    # Then the drawing starts where a mission begins, with the plumbing of both levels left out
    ids = {n["id"] for n in graph["nodes"]}
    assert graph["start"] == START
    assert not ids & {SEGMENT_START, SEGMENT_BEGIN, "segment", "segment.exit", "segment.end"}
    assert all(e["from"] in ids and e["to"] in ids for e in graph["edges"]), name
