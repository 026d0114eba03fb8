"""PipelineConfig -> Amazon States Language: structure, routing, failure paths, purity."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from missions.core.capability import registry as registry
from missions.core.errors import NON_RETRYABLE_ERRORS
from missions.core.mission.envelope import InterruptKind
from missions.core.pipeline.compiler import (
    AWAIT_BRANCHES,
    COUNTER_GUARDS,
    DONE,
    FAILED,
    FINALIZE,
    START,
    TRANSIENT_LAMBDA_ERRORS,
    UNROUTABLE,
    compile_json,
    compile_mission,
    compile_pipeline,
    initial_state,
    placeholders,
    two_level,
)
from missions.core.pipeline.config import (
    AgentConfig,
    EdgeLimit,
    FanOut,
    ParallelGroup,
    PipelineConfig,
    RoutingRule,
    ToolAccess,
)

PARALLEL = PipelineConfig(
    name="diamond",
    agents=[
        AgentConfig(name="a", default_next="bc"),
        AgentConfig(name="b", default_next="d"),
        AgentConfig(name="c", default_next="d"),
        AgentConfig(name="d"),
    ],
    parallel=[ParallelGroup(name="bc", stages=["b", "c"])],
)
FAN_OUT = PipelineConfig(
    name="fan",
    agents=[
        AgentConfig(name="split", default_next="each"),
        AgentConfig(name="each", fan_out=FanOut(max_concurrency=3), max_retries=0, default_next="merge"),
        AgentConfig(name="merge"),
    ],
    resume={"clarification": "split"},
    interrupt_timeout_seconds=600,
)
CODE_ANALYSIS = registry.load("code_analysis").pipeline
PIPELINES = {"code_analysis": CODE_ANALYSIS, "parallel": PARALLEL, "fan_out": FAN_OUT}


@pytest.fixture(params=list(PIPELINES), scope="module")
def compiled(request) -> tuple[PipelineConfig, dict[str, Any]]:
    pipeline = PIPELINES[request.param]
    return pipeline, compile_pipeline(pipeline)


# -- walking the definition ----------------------------------------------------------------


def scopes(definition: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every state machine in the definition: the top level, each Parallel branch, each Map processor."""
    yield definition
    for state in definition["States"].values():
        for branch in state.get("Branches", []):
            yield from scopes(branch)
        if "ItemProcessor" in state:
            yield from scopes(state["ItemProcessor"])


def transitions(state: dict[str, Any]) -> list[str]:
    found = [state[k] for k in ("Next", "Default") if k in state]
    found += [choice["Next"] for choice in state.get("Choices", [])]
    found += [catch["Next"] for catch in state.get("Catch", [])]
    return found


def strings(value: Any) -> Iterator[tuple[str, str]]:
    """(key, string) pairs anywhere in a JSON value."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, str):
                yield key, inner
            else:
                yield from strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from strings(inner)


def keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from keys(inner)


def route_targets(definition: dict[str, Any], stage: str) -> list[str]:
    return [c["Next"] for c in definition["States"][f"{stage}.route"]["Choices"]]


def stage_agents(pipeline: PipelineConfig) -> list[AgentConfig]:
    """Stages with a top-level Task of their own (not members of a parallel group)."""
    return [a for a in pipeline.agents if not pipeline.group_of(a.name)]


# -- structure -------------------------------------------------------------------------------


def start_target(definition: dict) -> str:
    """Where a new mission (no next_stage yet) goes from the start Choice."""
    start = definition["States"][definition["StartAt"]]
    assert start["Type"] == "Choice"
    return start["Default"]


def test_a_new_mission_starts_at_the_first_stage_entry():
    assert start_target(compile_pipeline(CODE_ANALYSIS)) == "perception"
    assert start_target(compile_pipeline(PARALLEL)) == "a"
    fan_first = PipelineConfig(
        name="f", agents=[AgentConfig(name="x", fan_out=FanOut(), default_next="y"), AgentConfig(name="y")]
    )
    assert start_target(compile_pipeline(fan_first)) == "x.map"


def test_a_forked_mission_resumes_at_its_next_stage():
    # Given an envelope forked from a checkpoint whose next stage is the critic
    start = compile_pipeline(CODE_ANALYSIS)["States"][START]
    # Then the start Choice sends it there
    assert {"Variable": "$.envelope.next_stage", "StringEquals": "critic", "Next": "critic"} in start["Choices"]


def test_one_task_per_stage_with_its_function_placeholder(compiled):
    pipeline, definition = compiled
    for agent in stage_agents(pipeline):
        # Given / Then each stage has a Task invoking its own function with the envelope
        task = definition["States"][agent.name]
        assert task["Type"] == "Task"
        assert task["Resource"] == f"${{fn_{agent.name}}}"
        assert task["Parameters"]["stage"] == agent.name
        assert task["Parameters"]["envelope.$"] == "$.envelope"
        assert task["ResultPath"] == "$.envelope"
        assert task["TimeoutSeconds"] == agent.timeout_seconds
    segment = ["segment"] if two_level(pipeline) else []
    assert placeholders(pipeline) == [f"fn_{n}" for n in pipeline.stage_names()] + ["fn_interrupt"] + segment


def test_every_placeholder_used_is_declared(compiled):
    pipeline, definition = compiled
    used = set(re.findall(r"\$\{(\w+)\}", json.dumps(definition)))
    assert used <= set(placeholders(pipeline))


def test_retry_policy_of_each_stage(compiled):
    pipeline, definition = compiled
    assert stage_agents(pipeline), "no stage to check"
    for agent in stage_agents(pipeline):
        retry = definition["States"][agent.name]["Retry"]
        # Then transient Lambda errors retry with backoff ...
        assert retry[0]["ErrorEquals"] == TRANSIENT_LAMBDA_ERRORS
        assert retry[0]["MaxAttempts"] >= 1 and retry[0]["BackoffRate"] > 1
        assert retry[0]["IntervalSeconds"] == pipeline.retry_interval_seconds
        # ... wiring and evidence errors are never retried ...
        assert retry[1] == {"ErrorEquals": NON_RETRYABLE_ERRORS, "MaxAttempts": 0}
        assert {"StageDefinitionError", "EvidenceChainViolation", "StageRequestError"} <= set(retry[1]["ErrorEquals"])
        # ... and task failures retry as often as the agent allows
        if agent.max_retries:
            assert "States.TaskFailed" in retry[2]["ErrorEquals"]
            assert retry[2]["MaxAttempts"] == agent.max_retries
        else:
            assert len(retry) == 2
        # States.ALL, if ever used, must come last (an ASL rule)
        assert all("States.ALL" not in r["ErrorEquals"] for r in retry[:-1])


def test_every_stage_failure_goes_to_its_failed_state_then_finalize(compiled):
    pipeline, definition = compiled
    states = definition["States"]
    assert stage_agents(pipeline), "no stage to check"
    for agent in stage_agents(pipeline):
        catch = states[agent.name]["Catch"]
        assert catch == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.envelope.failure", "Next": f"{agent.name}.failed"}
        ]
        failed = states[f"{agent.name}.failed"]
        assert failed["Type"] == "Pass"
        assert failed["Result"] == {"state": agent.name, "reason": "stage_failed"}
        assert failed["ResultPath"] == "$.envelope.failure.at"
        assert failed["Next"] == FINALIZE


def test_error_next_sends_failures_to_that_stage():
    p = PipelineConfig(
        name="e",
        agents=[
            AgentConfig(name="a", default_next="c", error_next="b"),
            AgentConfig(name="b", default_next="c"),
            AgentConfig(name="c"),
        ],
    )
    assert compile_pipeline(p)["States"]["a.failed"]["Next"] == "b"


def test_finalize_runs_the_final_stage_in_finalize_mode_and_ends(compiled):
    pipeline, definition = compiled
    states = definition["States"]
    finalize = states[FINALIZE]
    assert finalize["Resource"] == f"${{fn_{pipeline.final}}}"
    assert finalize["Parameters"]["mode"] == "finalize"
    assert finalize["Next"] == DONE
    assert finalize["Catch"][0]["Next"] == FAILED
    assert states[FAILED]["Type"] == "Fail"
    assert states[DONE]["Type"] == "Succeed"
    # the final stage ends the mission unless it asked a human
    route = states[states[pipeline.final]["Next"]]
    assert route["Type"] == "Choice" and route["Default"] == DONE
    # (and, when it joins a group whose branches may ask, unless they asked)
    joins = pipeline.final in {pipeline.agent(g[0]).default_next for g in pipeline.parallel_groups()}
    awaits = {f"await.{k.value}" for k in pipeline.awaited()} | ({AWAIT_BRANCHES} if joins else set())
    assert {states[c["Next"]]["Next"] for c in route["Choices"]} == awaits
    assert states[pipeline.final]["Parameters"]["mode"] == "run"


def test_route_choice_order_final_then_guards_then_awaits_then_pause_then_targets(compiled):
    pipeline, definition = compiled
    states = definition["States"]
    assert [a for a in stage_agents(pipeline) if a.name != pipeline.final], "no route to check"
    for agent in stage_agents(pipeline):
        if agent.name == pipeline.final:
            continue
        # Given the stage's route
        assert states[f"{agent.name}.count"]["Next"] == f"{agent.name}.route"
        choices = states[f"{agent.name}.route"]["Choices"]
        # Then the final stage comes first ...
        assert choices[0] == {
            "Variable": "$.envelope.next_stage",
            "StringEquals": pipeline.final,
            "Next": pipeline.final,
        }
        # ... then the hop guard against the state machine's own count ...
        assert choices[1] == {
            "Variable": "$.asl.hops",
            "NumericGreaterThanEqualsPath": "$.asl.max_hops",
            "Next": "guard.max_agent_hops",
        }
        # ... then one guard per counter the stages report ...
        guards = choices[2 : 2 + len(COUNTER_GUARDS)]
        assert [(g["Variable"], g["NumericGreaterThanPath"], g["Next"]) for g in guards] == [
            (f"$.envelope.counters.{counter}", f"$.envelope.bounds.{bound}", f"guard.{bound}")
            for bound, counter in COUNTER_GUARDS
        ]
        # ... then an await state per interrupt kind ...
        awaits = choices[2 + len(COUNTER_GUARDS) : 2 + len(COUNTER_GUARDS) + len(pipeline.awaited())]
        assert [(a["StringEquals"], a["Next"]) for a in awaits] == [
            (f"await:{k.value}", f"await.{k.value}") for k in pipeline.awaited()
        ]
        # ... then the user's pause, before any stage the routing may choose ...
        if [t for t in agent.targets() if t != pipeline.final]:
            paused = choices[2 + len(COUNTER_GUARDS) + len(pipeline.awaited())]
            assert paused["Next"] == "await.pause"
            assert paused["And"][:2] == [
                {"Variable": "$.envelope.pause", "IsPresent": True},
                {"Variable": "$.envelope.pause", "BooleanEquals": True},
            ]
        # ... and every routing target is reachable
        chosen = {c["StringEquals"]: c["Next"] for c in choices if c.get("Variable") == "$.envelope.next_stage"}
        for target in agent.targets():
            assert target in chosen, (agent.name, target)
        assert states[f"{agent.name}.route"]["Default"] == UNROUTABLE


def test_count_state_adds_one_hop_and_keeps_max_hops():
    count = compile_pipeline(CODE_ANALYSIS)["States"]["critic.count"]
    assert count["Parameters"] == {"hops.$": "States.MathAdd($.asl.hops, 1)", "max_hops.$": "$.asl.max_hops"}
    assert count["ResultPath"] == "$.asl"


def test_critic_routes_to_planner_and_integration():
    definition = compile_pipeline(CODE_ANALYSIS)
    assert {"planner", "integration"} <= set(route_targets(definition, "critic"))


def test_guards_record_a_failure_and_finalize(compiled):
    _, definition = compiled
    states = definition["States"]
    for bound in ["max_agent_hops"] + [b for b, _ in COUNTER_GUARDS]:
        guard = states[f"guard.{bound}"]
        assert guard["ResultPath"] == "$.envelope.failure"
        assert guard["Result"]["at"] == {"state": f"guard.{bound}", "reason": bound}
        assert guard["Next"] == FINALIZE
    assert states[UNROUTABLE]["Next"] == FINALIZE


def test_initial_state_leaves_one_hop_for_the_final_stage():
    assert initial_state({"x": 1}, 21) == {"envelope": {"x": 1}, "asl": {"hops": 0, "max_hops": 20, "restarts": 0}}


# -- human in the loop -------------------------------------------------------------------------


# every question; a delegation's wait only where the pipeline delegates (tests/unit/service/test_delegation_rules.py)
QUESTIONS = [kind for kind in InterruptKind if kind is not InterruptKind.DELEGATION]


@pytest.mark.parametrize("kind", QUESTIONS)
def test_await_states_wait_for_a_task_token_with_the_interrupt_timeout(compiled, kind):
    pipeline, definition = compiled
    states = definition["States"]
    name = f"await.{kind.value}"
    wait = states[name]
    assert wait["Type"] == "Task"
    assert wait["Resource"] == "arn:aws:states:::lambda:invoke.waitForTaskToken"
    assert wait["Parameters"]["FunctionName"] == "${fn_interrupt}"
    assert wait["Parameters"]["Payload"]["task_token.$"] == "$$.Task.Token"
    assert wait["TimeoutSeconds"] == pipeline.interrupt_timeout_seconds
    assert wait["ResultPath"] == "$.envelope.resume"
    # a timeout is caught first and ends the mission through finalize
    timeout = wait["Catch"][0]
    assert timeout["ErrorEquals"] == ["States.Timeout"]
    assert states[timeout["Next"]]["Result"] == {"state": name, "reason": "interrupt_timeout"}
    assert states[timeout["Next"]]["Next"] == FINALIZE
    assert states[wait["Catch"][1]["Next"]]["Next"] == FINALIZE
    assert wait["Next"] == f"{name}.resume"


def test_configured_resume_stage_is_entered_after_the_answer():
    # Given code_analysis resumes clarifications at 'intent'
    states = compile_pipeline(CODE_ANALYSIS)["States"]
    # Then
    assert states["await.clarification.resume"] == {"Type": "Pass", "Next": "intent"}
    # and other kinds resume where they were asked
    resume = states["await.confirmation.resume"]
    assert resume["Type"] == "Choice"
    assert {(c["Variable"], c["StringEquals"], c["Next"]) for c in resume["Choices"]} == {
        ("$.envelope.interrupt.stage", name, name) for name in CODE_ANALYSIS.stage_names()
    }


def test_resume_into_a_fan_out_stage_enters_its_map():
    states = compile_pipeline(FAN_OUT)["States"]
    assert states["await.clarification.resume"]["Next"] == "split"
    choice = {c["StringEquals"]: c["Next"] for c in states["await.choice.resume"]["Choices"]}
    assert choice["each"] == "each.map"


# -- parallel and fan-out ------------------------------------------------------------------------


def test_parallel_group_is_one_parallel_state_joining_at_the_join_stage():
    # Given a -> {b, c} -> d
    states = compile_pipeline(PARALLEL)["States"]
    # Then a routes into the Parallel state
    assert "parallel.b+c" in route_targets({"States": states}, "a")
    parallel = states["parallel.b+c"]
    assert parallel["Type"] == "Parallel"
    assert "MaxConcurrency" not in parallel
    assert parallel["ResultPath"] == "$.envelope.branch_results"
    count = states[parallel["Next"]]  # each branch is a hop for the state machine's own counter
    assert count["Parameters"]["hops.$"] == "States.MathAdd($.asl.hops, 2)"
    assert count["Next"] == "d"
    assert parallel["Catch"][0]["Next"] == "parallel.b+c.failed"
    assert states["parallel.b+c.failed"]["Next"] == FINALIZE
    # and each member is a one-state branch in "branch" mode returning its delta
    for member, branch in zip(["b", "c"], parallel["Branches"], strict=True):
        task = branch["States"][branch["StartAt"]]
        assert task["Resource"] == f"${{fn_{member}}}"
        assert task["Parameters"]["mode"] == "branch"
        assert task["ResultPath"] == "$"
        assert task["End"] is True
    # grouped stages have no top-level state of their own
    assert "b" not in states and "c" not in states


def test_fan_out_stage_is_a_map_then_its_join():
    states = compile_pipeline(FAN_OUT)["States"]
    assert "each.map" in route_targets({"States": states}, "split")
    fan = states["each.map"]
    assert fan["Type"] == "Map"
    assert fan["MaxConcurrency"] == 3
    assert fan["ItemsPath"] == "$.envelope.work_items"
    assert fan["ItemSelector"]["item.$"] == "$$.Map.Item.Value"
    assert fan["ResultPath"] == "$.envelope.branch_results"
    assert fan["Next"] == "each"
    item = fan["ItemProcessor"]["States"][fan["ItemProcessor"]["StartAt"]]
    assert item["Resource"] == "${fn_each}"
    assert fan["ItemSelector"]["mode"] == "item"
    # the join folds the items and routes like any stage
    assert states["each"]["Parameters"]["mode"] == "join"
    assert states["each"]["Next"] == "each.count"


# -- definition-wide rules -----------------------------------------------------------------------


def test_no_jsonata_and_no_assign(compiled):
    _, definition = compiled
    assert "QueryLanguage" not in definition
    assert "Assign" not in set(keys(definition))
    assert "JSONata" not in json.dumps(definition)


def test_no_indexed_json_paths(compiled):
    _, definition = compiled
    assert any(key.endswith(".$") for key, _ in strings(definition)), "no JSON path to check"
    for key, value in strings(definition):
        if (
            key.endswith(".$")
            or key in ("Variable", "ItemsPath", "ResultPath", "InputPath", "OutputPath")
            or key.endswith("Path")
        ):
            assert not re.search(r"\[\s*[\d*]", value), (key, value)


def test_every_next_points_at_an_existing_state(compiled):
    _, definition = compiled
    assert definition["States"], "no state to check"
    for scope in scopes(definition):
        assert scope["StartAt"] in scope["States"]
        for name, state in scope["States"].items():
            for target in transitions(state):
                assert target in scope["States"], f"{name} -> {target}"
            assert ("Next" in state) != (state.get("End") is True or state["Type"] in ("Choice", "Succeed", "Fail"))


def test_every_state_is_reachable_from_start(compiled):
    _, definition = compiled
    assert definition["States"], "no state to check"
    for scope in scopes(definition):
        seen, frontier = {scope["StartAt"]}, [scope["StartAt"]]
        while frontier:
            for target in transitions(scope["States"][frontier.pop()]):
                if target not in seen:
                    seen.add(target)
                    frontier.append(target)
        assert set(scope["States"]) - seen == set()


def test_compile_is_pure(compiled):
    pipeline, first = compiled
    before = copy.deepcopy(pipeline.model_dump())
    # When compiled again
    second = compile_pipeline(pipeline)
    # Then identical output and an untouched input
    assert second == first
    assert json.dumps(second) == json.dumps(first)
    assert pipeline.model_dump() == before
    assert compile_json(pipeline) == json.dumps(compile_mission(pipeline).as_dict(), indent=2)
    # and the two results share no mutable state
    second["States"].clear()
    assert compile_pipeline(pipeline) == first


def test_machine_timeout_is_bounded():
    definition = compile_pipeline(CODE_ANALYSIS)
    assert 0 < definition["TimeoutSeconds"] <= 365 * 24 * 3600


# -- routes the runner can take exist in the state machine (regressions) --------------------------------


def test_on_exceeded_target_is_a_route_of_the_limited_stage():
    # Given review -> work allowed once, after which the runner goes to 'side' ('side' is reachable
    # through work's own rule, but is not a target of 'review')
    p = PipelineConfig(
        name="limits",
        agents=[
            AgentConfig(
                name="work",
                routing_rules=[RoutingRule(field="aside", value=True, target="side")],
                default_next="review",
            ),
            AgentConfig(
                name="review", routing_rules=[RoutingRule(field="redo", value=True, target="work")], default_next="done"
            ),
            AgentConfig(name="side", default_next="done"),
            AgentConfig(name="done"),
        ],
        edge_limits=[EdgeLimit(from_stage="review", to_stage="work", max_count=1, on_exceeded="side")],
    )
    # When compiled
    chosen = route_targets(compile_pipeline(p), "review")
    # Then the stage the runner will choose on the exceeded limit has a route
    assert "side" in chosen


def test_final_stage_that_can_ask_a_human_routes_to_the_await_states():
    # Given a final stage with write tools (a write tool raises ConfirmationRequired)
    p = PipelineConfig(
        name="w",
        agents=[
            AgentConfig(name="plan", default_next="apply"),
            AgentConfig(name="apply", has_tools=True, tool_access=ToolAccess.WRITE),
        ],
    )
    definition = compile_pipeline(p)
    # Then an interrupt raised by the final stage can reach await.confirmation
    states = definition["States"]
    reachable, frontier = set(), ["apply"]
    while frontier:  # every state the final stage leads to
        state = frontier.pop()
        for target in transitions(states[state]) if state in states else []:
            if target not in reachable:
                reachable.add(target)
                frontier.append(target)
    assert "await.confirmation" in reachable


def test_only_a_pipeline_that_delegates_waits_for_sub_missions():
    plain = PipelineConfig(name="one", agents=[AgentConfig(name="decide")])
    assert "await.delegation" not in compile_pipeline(plain)["States"]
    delegating = compile_pipeline(plain.model_copy(update={"delegates_to": ["dining"]}))["States"]
    assert delegating["await.delegation"]["Resource"] == "arn:aws:states:::lambda:invoke.waitForTaskToken"


@pytest.mark.parametrize("kind", list(InterruptKind))
def test_a_final_stage_that_asks_counts_a_hop_so_its_resumed_run_is_a_new_checkpoint(kind):
    # Given a pipeline whose only (so final) stage asks a human (or delegates)
    definition = compile_pipeline(
        PipelineConfig(name="one", agents=[AgentConfig(name="decide")], delegates_to=["dining"])
    )
    states = definition["States"]
    # When it asks, the way to the await state counts one hop (the resumed run's checkpoint is its own)
    route = next(c for c in states["decide.route"]["Choices"] if c["StringEquals"] == f"await:{kind.value}")
    asks = states[route["Next"]]
    assert asks["Type"] == "Pass" and asks["Next"] == f"await.{kind.value}"
    assert asks["Parameters"]["hops.$"] == "States.MathAdd($.asl.hops, 1)" and asks["ResultPath"] == "$.asl"
    # and a mission that just ends goes straight to done: no transition added to the common path
    assert states["decide.route"]["Default"] == "mission.done"


def test_stages_named_like_the_machines_own_states_do_not_collide():
    # Given stages called start, done and finalize
    p = PipelineConfig(
        name="names",
        agents=[
            AgentConfig(name="start", default_next="finalize"),
            AgentConfig(name="finalize", default_next="done"),
            AgentConfig(name="done"),
        ],
    )
    states = compile_pipeline(p)["States"]
    # Then each is its own Task, distinct from the machine's start, finalize and done states
    assert all(states[name]["Type"] == "Task" for name in ("start", "finalize", "done"))
    assert states[START]["Type"] == "Choice" and states[DONE]["Type"] == "Succeed"


# -- questions from parallel branches -----------------------------------------------------------


def test_a_pipeline_without_groups_or_fan_outs_compiles_no_wait_for_branches():
    machines = compile_mission(CODE_ANALYSIS)
    assert machines.segment is not None
    for machine in (machines.mission, machines.segment):
        assert AWAIT_BRANCHES not in machine["States"] and "await:branches" not in json.dumps(machine)


@pytest.mark.parametrize("pipeline, group, join", [(PARALLEL, "bc", "d"), (FAN_OUT, "each", "each")])
def test_the_joining_stage_waits_for_its_branches_questions_and_the_answers_run_the_group_again(pipeline, group, join):
    # Given a group (or a fan-out) whose join routes to "await:branches" when branches asked
    single = compile_pipeline(pipeline)["States"]
    # Then on one Standard machine the join's route enters the wait, whose answers enter the group
    route = single[f"{join}.route"] if f"{join}.route" in single else single[single[join]["Next"]]
    waits = [c for c in route["Choices"] if c.get("StringEquals") == "await:branches"]
    assert waits and AWAIT_BRANCHES in {waits[0]["Next"], single.get(waits[0]["Next"], {}).get("Next")}
    resume = single[f"{AWAIT_BRANCHES}.resume"]
    entry = "parallel.b+c" if group == "bc" else "each.map"
    assert {"Variable": "$.envelope.interrupt.group", "StringEquals": group, "Next": entry} in resume["Choices"]
    # And in two levels the segment hands back, and the next segment starts at the group
    machines = compile_mission(pipeline)
    if machines.segment is not None:
        mission = machines.mission["States"]
        assert mission[f"{AWAIT_BRANCHES}.resume"]["InputPath"] == "$.envelope.interrupt.group"
        exits = [c for c in mission["segment.exit"]["Choices"] if c.get("Next") == AWAIT_BRANCHES]
        assert exits, "the segment's await exit never reaches the wait for branches"
