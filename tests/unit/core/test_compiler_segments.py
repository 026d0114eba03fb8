"""Two levels: the mission's Standard machine waits for people and runs the stages in Express segments."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.core.capability import registry as registry
from missions.core.pipeline.compiler import (
    DONE,
    EXPRESS_SECONDS,
    FAILED,
    FINALIZE,
    MAX_SEGMENT_RESTARTS,
    SEGMENT,
    SEGMENT_BEGIN,
    SEGMENT_CHAIN,
    SEGMENT_END,
    SEGMENT_EXIT,
    SEGMENT_HEARTBEAT,
    SEGMENT_HEARTBEAT_SECONDS,
    SEGMENT_REPORT,
    SEGMENT_START,
    START,
    UNROUTABLE,
    compile_mission,
    compile_pipeline,
    initial_state,
    placeholders,
    segment_seconds,
    segment_spent,
    two_level,
)
from missions.core.pipeline.config import AgentConfig, EdgeLimit, PipelineConfig, RoutingRule
from missions.core.pipeline.graph import mission_graph
from tests.unit.core.test_compiler import FAN_OUT, PARALLEL

LOOP = PipelineConfig(
    name="loop",
    agents=[
        AgentConfig(
            name="work",
            routing_rules=[RoutingRule(field="done", value=False, target="work")],
            default_next="report",
        ),
        AgentConfig(name="report"),
    ],
    edge_limits=[EdgeLimit(from_stage="work", to_stage="work", max_count=20)],
    resume={"clarification": "work"},
    segment_hops=3,
)
PIPELINES = {
    "code_analysis": registry.load("code_analysis").pipeline,
    "loop": LOOP,
    "parallel": PARALLEL,
    "fan_out": FAN_OUT,
}


@pytest.fixture(params=list(PIPELINES), scope="module")
def machines(request) -> tuple[PipelineConfig, dict[str, Any], dict[str, Any]]:
    pipeline = PIPELINES[request.param]
    compiled = compile_mission(pipeline)
    assert compiled.segment is not None
    return pipeline, compiled.mission, compiled.segment


def scopes(definition: dict[str, Any]):
    yield definition
    for state in definition["States"].values():
        for branch in state.get("Branches", []):
            yield from scopes(branch)
        if "ItemProcessor" in state:
            yield from scopes(state["ItemProcessor"])


def transitions(state: dict[str, Any]) -> list[str]:
    out = [state.get("Next"), state.get("Default")]
    out += [c.get("Next") for c in state.get("Choices", []) + state.get("Catch", [])]
    return [t for t in out if t]


def test_a_pipeline_whose_stages_fit_a_segment_compiles_to_two_levels():
    # Given stages of at most 120 s (code_analysis) / a stage that may run 280 s
    slow = PipelineConfig(
        name="slow",
        agents=[AgentConfig(name="think", timeout_seconds=280, default_next="end"), AgentConfig(name="end")],
    )
    # Then the first runs in segments with the time Express leaves after its longest stage
    assert two_level(PIPELINES["code_analysis"]) and segment_seconds(PIPELINES["code_analysis"]) == 150
    # and the second stays one Standard machine, exactly the single-level layout
    compiled = compile_mission(slow)
    assert not two_level(slow) and compiled.segment is None
    assert compiled.mission == compile_pipeline(slow)
    assert "segment" not in placeholders(slow)


def test_a_segment_holds_nothing_express_cannot_run(machines):
    _, _, segment = machines
    # Then no task waits for a token or for another execution (a task runs a stage, starts the next segment
    # without waiting for it, or speaks on the mission's token), and a segment ends within Express's limit
    for scope in scopes(segment):
        for state in scope["States"].values():
            if state["Type"] == "Task":
                assert re.fullmatch(
                    r"\$\{fn_\w+\}|arn:aws:states:::states:startExecution"
                    r"|arn:aws:states:::aws-sdk:sfn:sendTask(Heartbeat|Success|Failure)",
                    state["Resource"],
                ), state["Resource"]
    assert segment["TimeoutSeconds"] == EXPRESS_SECONDS
    text = json.dumps(segment)
    assert "waitForTaskToken" not in text and ".sync" not in text and "${fn_interrupt}" not in text


def test_every_stage_of_a_segment_is_told_when_its_segment_started(machines):
    pipeline, _, segment = machines
    for name in pipeline.stage_names():
        state = segment["States"].get(name)
        if state is None or state["Type"] != "Task":
            continue  # a parallel member runs in its group's branch
        assert state["Parameters"]["segment_started.$"] == "$$.Execution.StartTime"
        assert state["Parameters"]["segment_seconds"] == segment_seconds(pipeline)
    # except the failure path, which ends the mission whatever the time
    assert "segment_started.$" not in segment["States"][FINALIZE]["Parameters"]


def test_hop_counts_carry_the_segments_end(machines):
    _, _, segment = machines
    counts = [s for n, s in segment["States"].items() if n.endswith(".count") or ".asks." in n]
    assert counts
    for state in counts:
        assert state["Parameters"]["segment_end.$"] == "$.asl.segment_end"
        assert state["Parameters"]["max_hops.$"] == "$.asl.max_hops"


def test_a_route_hands_back_only_after_the_guards_and_only_for_a_route_the_stage_may_take():
    # Given the looping stage of LOOP
    segment = compile_mission(LOOP).segment
    assert segment is not None
    choices = segment["States"]["work.route"]["Choices"]
    nexts = [c["Next"] for c in choices]
    # Then the final stage, the hop guard and the counter guards come first, then the questions
    assert nexts[0] == "report" and nexts[1] == "guard.max_agent_hops"
    assert nexts.index("segment.await") < nexts.index("segment.continue") < nexts.index("work")
    # and the hand-back names the routes it may hand back on: a wrong route still meets the unroutable guard
    (handback,) = [c for c in choices if c["Next"] == "segment.continue"]
    spent, chosen = handback["And"]
    assert chosen == {"Variable": "$.envelope.next_stage", "StringEquals": "work"}
    conditions = json.dumps(spent)
    assert "$.asl.segment_end" in conditions and "$.envelope.segment_yield" in conditions
    assert segment["States"]["work.route"]["Default"] == UNROUTABLE


def test_a_segment_says_why_it_ended(machines):
    _, _, segment = machines
    states = segment["States"]
    for how in ("done", "await"):
        if f"segment.{how}" in states:
            assert states[f"segment.{how}"] == {
                "Type": "Pass",
                "Result": how,
                "ResultPath": "$.asl.exit",
                "Next": "segment.end",
            }
    # continue also gives the next segment a fresh restart count: the mission's machine starts it at once
    if "segment.continue" in states:
        assert states["segment.continue"] == {
            "Type": "Pass",
            "Parameters": {"hops.$": "$.asl.hops", "max_hops.$": "$.asl.max_hops", "restarts": 0, "exit": "continue"},
            "ResultPath": "$.asl",
            "Next": "segment.end",
        }
    assert states[FINALIZE]["Next"] == "segment.done"


def test_a_segment_that_continues_starts_the_next_and_any_other_reports_on_the_missions_token(machines):
    _, _, segment = machines
    states = segment["States"]
    # Given a segment's end: it continues (and its mission is neither paused nor ended), or it does not
    (chain,) = states[SEGMENT_END]["Choices"]
    rule = json.dumps(chain, sort_keys=True)
    assert '"StringEquals": "continue"' in rule and "$.envelope.pause" in rule and "$.envelope.mission_ended" in rule
    # Then one that continues tells the mission's machine its chain goes on (the heartbeat the machine waits
    # for), then starts the next segment of its own machine, handing on the token; without waiting for it
    assert chain["Next"] == SEGMENT_HEARTBEAT
    assert states[SEGMENT_HEARTBEAT]["Resource"] == "arn:aws:states:::aws-sdk:sfn:sendTaskHeartbeat"
    assert states[SEGMENT_HEARTBEAT]["Next"] == SEGMENT_CHAIN
    started = states[SEGMENT_CHAIN]
    assert started["Resource"] == "arn:aws:states:::states:startExecution"
    assert started["Parameters"]["StateMachineArn.$"] == "$$.StateMachine.Id"
    assert started["Parameters"]["Input"]["token.$"] == "$.token"
    # (named after its chain and its hop: a chain started again after a failure names its segments anew)
    assert "$.chain" in started["Parameters"]["Name.$"] and "$.asl.hops" in started["Parameters"]["Name.$"]
    # and one that cannot start its next reports instead (the mission's machine starts it)
    assert started["Catch"][0]["Next"] == SEGMENT_REPORT
    # any other end reports its state on the token, and the mission's failure fails the token
    assert states[SEGMENT_END]["Default"] == SEGMENT_REPORT
    assert states[SEGMENT_REPORT]["Resource"] == "arn:aws:states:::aws-sdk:sfn:sendTaskSuccess"
    assert states[SEGMENT_REPORT]["Parameters"] == {"TaskToken.$": "$.token", "Output.$": "States.JsonToString($)"}
    assert states[FAILED]["Resource"] == "arn:aws:states:::aws-sdk:sfn:sendTaskFailure"
    assert states[states[FAILED]["Next"]]["Type"] == "Fail"
    # and a segment begins with its stages (the first needs no heartbeat: the machine's wait has just begun)
    assert segment["StartAt"] == SEGMENT_START


def test_the_mission_runs_segments_and_takes_each_back_by_its_exit(machines):
    pipeline, mission, segment = machines
    states = mission["States"]
    # Given the mission's machine: it starts its first segment at once (the input's restart count is 0),
    # a wait for a person resets the count, and each segment computes its own end in Express
    assert mission["StartAt"] == SEGMENT
    assert initial_state({}, 10)["asl"]["restarts"] == 0
    assert states[SEGMENT_BEGIN]["Parameters"]["restarts"] == 0
    assert "segment_end.$" not in states[SEGMENT_BEGIN]["Parameters"]
    start = segment["States"][SEGMENT_START]
    assert start["Parameters"]["segment_end.$"] == f"States.MathAdd($.asl.hops, {pipeline.segment_hops})"
    assert start["Next"] == START
    # When it starts one: an Express child named uniquely per segment and per restart, given the task's token,
    # which the last segment of its chain answers; a chain silent for longer than a segment runs was lost
    task = states[SEGMENT]
    assert task["Resource"] == "arn:aws:states:::states:startExecution.waitForTaskToken"
    assert task["HeartbeatSeconds"] == SEGMENT_HEARTBEAT_SECONDS > EXPRESS_SECONDS
    assert task["Parameters"]["StateMachineArn"] == "${segment}"
    assert task["Parameters"]["Input"]["token.$"] == "$$.Task.Token"
    assert task["Parameters"]["Input"]["chain.$"] == "States.Format('{}-{}', $.asl.hops, $.asl.restarts)"
    assert task["TimeoutSeconds"] == mission["TimeoutSeconds"]  # the chain may run as long as the mission
    assert "$.asl.hops" in task["Parameters"]["Name.$"] and "$.asl.restarts" in task["Parameters"]["Name.$"]
    assert task["ResultSelector"] == {"envelope.$": "$.envelope", "asl.$": "$.asl"}
    # Then done ends the mission, continue starts the next (unless its user paused it: then it waits for
    # the resume first), await waits for the question of that kind
    exits = {json.dumps(c, sort_keys=True): c["Next"] for c in states[SEGMENT_EXIT]["Choices"]}
    assert list(exits.values())[:3] == [DONE, "await.pause", SEGMENT]
    assert states["await.pause.resume"]["Next"] == SEGMENT_BEGIN
    for kind in pipeline.awaited():
        assert f"await.{kind.value}" in exits.values()
    assert states[SEGMENT_EXIT]["Default"] == UNROUTABLE


def test_the_answer_names_where_the_next_segment_starts():
    states = compile_mission(LOOP).mission["States"]
    # Given a configured resume stage for clarifications, none for the other kinds
    clarified = states["await.clarification.resume"]
    assert clarified == {"Type": "Pass", "ResultPath": "$.envelope.next_stage", "Next": SEGMENT_BEGIN, "Result": "work"}
    asked_again = states["await.choice.resume"]
    assert asked_again["InputPath"] == "$.envelope.interrupt.stage"
    assert asked_again["ResultPath"] == "$.envelope.next_stage"
    # and the segment's start enters any stage by name (a parallel member through its group)
    segment = compile_mission(PARALLEL).segment
    assert segment is not None
    routes = {c["StringEquals"]: c["Next"] for c in segment["States"][START]["Choices"]}
    assert routes["b"] == routes["bc"] == "parallel.b+c"


def test_the_mission_waits_for_people_on_a_task_token(machines):
    pipeline, mission, _ = machines
    assert pipeline.awaited(), "no interrupt kind"
    for kind in pipeline.awaited():
        state = mission["States"][f"await.{kind.value}"]
        assert state["Resource"] == "arn:aws:states:::lambda:invoke.waitForTaskToken"
        assert state["TimeoutSeconds"] == pipeline.interrupt_timeout_seconds
        assert {c["Next"] for c in state["Catch"]} == {f"await.{kind.value}.timeout", f"await.{kind.value}.failed"}


def test_a_failed_segment_is_started_again_a_bounded_number_of_times_then_the_mission_ends_through_finalize(machines):
    pipeline, mission, _ = machines
    states = mission["States"]
    assert states[SEGMENT]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.segment_failure", "Next": "segment.failed"}
    ]
    (bound,) = states["segment.failed"]["Choices"]
    assert bound["NumericGreaterThanEquals"] == MAX_SEGMENT_RESTARTS and bound["Next"] == "segment.lost"
    retry = states["segment.retry"]["Parameters"]
    assert retry["restarts.$"] == "States.MathAdd($.asl.restarts, 1)" and retry["hops.$"] == "$.asl.hops"
    assert "segment_end.$" not in retry  # the restarted segment computes the same end from the same hop
    assert states["segment.lost"]["Next"] == FINALIZE
    assert states["segment.lost"]["Parameters"]["at"] == {"state": SEGMENT, "reason": "segment_failed"}
    finalize = states[FINALIZE]
    assert finalize["Resource"] == f"${{fn_{pipeline.final}}}" and finalize["Parameters"]["mode"] == "finalize"


def test_both_machines_are_well_formed(machines):
    pipeline, mission, segment = machines
    used = set()
    for definition in (mission, segment):
        text = json.dumps(definition)
        assert "JSONata" not in text and '"Assign"' not in text
        assert not re.search(r"\$[\w.]*\[\d+\]", text)
        used |= set(re.findall(r"\$\{(\w+)\}", text))
        for scope in scopes(definition):
            seen, frontier = {scope["StartAt"]}, [scope["StartAt"]]
            while frontier:
                for target in transitions(scope["States"][frontier.pop()]):
                    assert target in scope["States"], target
                    if target not in seen:
                        seen.add(target)
                        frontier.append(target)
            assert set(scope["States"]) == seen
    assert used == set(placeholders(pipeline))


def test_the_drawn_graph_spans_both_levels():
    graph = mission_graph(compile_mission(LOOP))
    kinds = {n["id"]: n["kind"] for n in graph["nodes"]}
    # Then stages, the waits for people and the end are drawn; the segment plumbing is not
    assert kinds["work"] == "stage" and kinds["await.clarification"] == "await" and kinds[DONE] == "end"
    assert SEGMENT not in kinds and SEGMENT_BEGIN not in kinds
    edges = {(e["from"], e["to"]) for e in graph["edges"]}
    assert ("segment.await", "await.clarification") in edges
    assert ("await.clarification.resume", START) in edges
    assert all(e["to"] in kinds for e in graph["edges"])


NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


@given(elapsed=st.floats(min_value=0, max_value=600), budget=st.integers(min_value=1, max_value=300))
def test_a_segment_is_spent_exactly_when_its_budget_has_passed(elapsed: float, budget: int):
    started = (NOW - timedelta(seconds=elapsed)).isoformat().replace("+00:00", "Z")
    request = {"segment_started": started, "segment_seconds": budget}
    assert segment_spent(request, NOW) == (
        (NOW - datetime.fromisoformat(started.replace("Z", "+00:00"))).total_seconds() >= budget
    )


@pytest.mark.parametrize("request_", [{}, {"segment_started": "yesterday", "segment_seconds": 100}])
def test_a_segment_whose_start_cannot_be_read_counts_as_spent(request_: dict[str, Any]):
    # handing back early costs transitions; running past Express's limit costs a restart
    assert segment_spent(request_, NOW)
