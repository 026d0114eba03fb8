"""The stage runner, driven stage by stage by the DirectDriver (the state machine's stand-in)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from missions.adapters.memory.events import MemoryEventStore
from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.stages import StageFunction
from missions.core.capability.tools import RiskLevel, ToolCatalog, ToolCategory, ToolResult, call_id
from missions.core.errors import StageRequestError
from missions.core.llm.provider import LLMRequest
from missions.core.mission.envelope import Envelope, InterruptKind
from missions.core.mission.events import Event, EventType
from missions.core.mission.requests import MissionRequest
from missions.core.pipeline.config import AgentConfig, EdgeLimit, ParallelGroup, RoutingRule, ToolAccess
from missions.ports.missions import MissionRecord
from missions.service.checkpoints import state_at, states
from missions.service.launcher import build_envelope
from missions.service.runner import StageRunner
from tests.support.driver import DirectDriver
from tests.support.stages import Answer, Out, stage_named, thinking, typed_capability


def policy(request: LLMRequest) -> dict[str, Any]:
    return {"text": f"{request.stage} thought about {request.envelope.raw_input}"}


def answer(ctx: Ctx) -> Answer:
    return Answer(answer=f"done after {ctx.counters.agent_hops} hops")


def final(name: str = "done") -> StageFunction:
    """The final stage `name`, answering how many hops the mission took."""
    return stage_named(name, answer)


class Param(BaseModel):
    path: str


def catalog(ran: list[str]) -> ToolCatalog:
    tools = ToolCatalog()

    @tools.register("t.echo", "echo", Param)
    def echo(p: Param) -> ToolResult:
        ran.append(f"echo:{p.path}")
        return ToolResult.ok({"path": p.path})

    @tools.register("fs.write", "write a file", Param, category=ToolCategory.WRITE, risk=RiskLevel.WRITE)
    def write(p: Param) -> ToolResult:
        ran.append(f"write:{p.path}")
        return ToolResult.ok({"wrote": p.path})

    return tools


def make(
    name: str,
    agents: list[AgentConfig],
    *functions: StageFunction,
    tools: ToolCatalog | None = None,
    auto_approve: frozenset[str] = frozenset(),
    **pipeline: Any,
) -> Capability:
    """A capability of these stage functions (a stage without one outputs {})."""
    return typed_capability(
        name,
        agents,
        *functions,
        offline_policy=policy,
        catalog=tools or ToolCatalog(),
        auto_approve_tools=auto_approve,
        pipeline=pipeline,
        description="unit-test capability",
    )


def stages(driver: DirectDriver, envelope: Envelope) -> list[str]:
    """The stages the mission ran, in order, as its checkpoints recorded them."""
    return [record.stage for record in driver.history(envelope)]


def event_types(driver: DirectDriver, envelope: Envelope) -> list[str]:
    events, _ = driver.stores.events.read(envelope.mission_id, limit=10_000)
    return [event.type.value for event in events]


# -- a three-stage mission: tools, then an LLM, then the answer -------------------------------


def gather_think_done(ran: list[str]) -> Capability:
    @stage
    def gather(ctx: Ctx) -> Out:
        ctx.tools.execute("t.echo", {"path": "a"})
        ctx.tools.execute("t.echo", {"path": "b"})
        return Out(gathered=2)

    return make(
        "t_counters",
        [
            AgentConfig(name="gather", has_tools=True, tool_access=ToolAccess.READ, default_next="think"),
            AgentConfig(name="think", has_llm=True, counts_iteration=True, default_next="done"),
            AgentConfig(name="done"),
        ],
        gather,
        thinking("think"),
        final(),
        tools=catalog(ran),
    )


def test_counters_follow_the_work_done():
    # Given a tool stage, an LLM stage and a final stage
    ran: list[str] = []
    driver = DirectDriver(gather_think_done(ran))
    # When
    env = driver.run("count things")
    # Then
    c = env.counters
    assert (c.llm_calls, c.tool_calls, c.agent_hops, c.iterations) == (1, 2, 3, 1)
    assert c.tokens_in > 0 and c.tokens_out > 0 and c.cost_usd == 0
    assert ran == ["echo:a", "echo:b"]
    assert [(r.stage, r.status, r.llm_calls, r.tool_calls) for r in driver.history(env)] == [
        ("gather", "ok", 0, 2),
        ("think", "ok", 1, 0),
        ("done", "ok", 0, 0),
    ]
    assert env.outputs["think"] == {"text": "think thought about count things", "decision": None}
    assert env.terminal_reason == "completed" and env.next_stage is None
    # and the mission record agrees
    record = driver.stores.missions.get(env.mission_id)
    assert (record.status, record.terminal_reason, record.counters["agent_hops"]) == ("completed", "completed", 3)
    assert record.result["answer"] == "done after 3 hops"
    assert (record.stage, record.next_stage) == ("done", None)  # where the last stage's routing sent it: nowhere


def test_llm_budget_refuses_the_next_llm_stage():
    # Given two LLM stages and a budget of one call
    cap = make(
        "t_llm_budget",
        [
            AgentConfig(name="one", has_llm=True, default_next="two"),
            AgentConfig(name="two", has_llm=True, default_next="done"),
            AgentConfig(name="done"),
        ],
        thinking("one"),
        thinking("two"),
        final(),
    )
    # When
    driver = DirectDriver(cap)
    env = driver.run("think twice", bounds={"max_llm_calls": 1})
    # Then
    assert stages(driver, env) == ["one", "done"]
    assert env.terminal_reason == "max_llm_calls"
    assert env.counters.llm_calls == 1


# -- clarification -------------------------------------------------------------------------------


def clarifying(resume_stage: str | None) -> Capability:
    @stage
    def intake(ctx: Ctx) -> Out:
        return Out(resumed_here=ctx.answer.text if ctx.answer else None)

    @stage
    def ask(ctx: Ctx) -> Out:
        if not any(a["kind"] == "clarification" for a in ctx.answers):
            ctx.ask(InterruptKind.CLARIFICATION, "Which one?")
        return Out(heard=ctx.answers[-1]["response"]["text"], resumed_here=ctx.answer.text if ctx.answer else None)

    return make(
        "t_clarify",
        [
            AgentConfig(name="intake", default_next="ask"),
            AgentConfig(name="ask", default_next="done"),
            AgentConfig(name="done"),
        ],
        intake,
        ask,
        final(),
        resume={"clarification": resume_stage} if resume_stage else {},
    )


def test_clarification_resumes_at_the_configured_stage_with_the_answer():
    # Given a stage that asks once, with clarifications resuming at 'intake'
    driver = DirectDriver(clarifying("intake"))
    # When the human answers
    env = driver.run("do the thing", answers=[{"text": "the blue one"}])
    # Then the mission resumed at intake, which saw the answer first
    assert stages(driver, env) == ["intake", "ask", "intake", "ask", "done"]
    assert [r.status for r in driver.history(env)] == ["ok", "interrupted", "ok", "ok", "ok"]
    assert driver.history(env)[1].next_stage == "await:clarification"
    assert env.outputs["intake"]["resumed_here"] == "the blue one"
    assert env.outputs["ask"]["heard"] == "the blue one"
    # and the answer is kept in the envelope
    assert len(env.answers) == 1
    assert env.answers[0]["kind"] == "clarification"
    assert env.answers[0]["stage"] == "ask"
    assert env.answers[0]["question"] == "Which one?"
    assert env.answers[0]["response"] == {"text": "the blue one"}
    assert env.interrupt is None and env.resume is None
    assert env.terminal_reason == "completed"


def test_without_a_resume_stage_the_asking_stage_resumes():
    driver = DirectDriver(clarifying(None))
    env = driver.run("do the thing", answers=[{"text": "red"}])
    assert stages(driver, env) == ["intake", "ask", "ask", "done"]
    assert env.outputs["ask"] == {"heard": "red", "resumed_here": "red"}


def test_unanswered_interrupt_times_out_through_the_final_stage():
    # Given nobody answers
    driver = DirectDriver(clarifying("intake"))
    env = driver.run("do the thing", answers=[])
    # Then the mission ends through finalize with the timeout recorded
    assert stages(driver, env) == ["intake", "ask", "done"]
    assert env.terminal_reason == "interrupt_timeout"
    assert [e.kind for e in env.errors] == ["States.Timeout", "interrupt"]  # and the interrupt is closed
    assert env.interrupt is None
    assert driver.steps[-1].mode == "finalize"
    assert driver.stores.missions.get(env.mission_id).status == "failed"


# -- confirmation of a risky tool ------------------------------------------------------------------


class Written(BaseModel):
    status: str
    error: str | None = None


def writer(ran: list[str]) -> Capability:
    @stage
    def apply(ctx: Ctx) -> Written:
        result = ctx.tools.execute("fs.write", {"path": "notes.txt"})
        return Written(status=result.status, error=result.error)

    return make(
        "t_confirm",
        [
            AgentConfig(name="prep", default_next="apply"),
            AgentConfig(name="apply", has_tools=True, tool_access=ToolAccess.WRITE, default_next="done"),
            AgentConfig(name="done"),
        ],
        apply,
        final(),
        tools=catalog(ran),
    )


def test_write_tool_asks_and_runs_once_approved():
    # Given a stage that writes
    ran: list[str] = []
    driver = DirectDriver(writer(ran))
    # When the human approves
    env = driver.run("write notes", answers=[{"approved": True}])
    # Then the tool ran exactly once, after the approval
    assert ran == ["write:notes.txt"]
    assert stages(driver, env) == ["prep", "apply", "apply", "done"]
    assert env.outputs["apply"] == {"status": "success", "error": None}
    assert env.approvals == {call_id("fs.write", {"path": "notes.txt"}): True}
    assert env.answers[0]["kind"] == "confirmation"
    assert env.counters.tool_calls == 1
    # and the interrupt said what would run
    asked = state_at(driver.stores.checkpoints, env.mission_id, "0002-apply")["interrupt"]
    assert asked["kind"] == "confirmation"
    assert asked["data"]["tool_id"] == "fs.write" and asked["data"]["risk"] == "write"


def test_declined_write_tool_is_denied_and_never_runs():
    ran: list[str] = []
    env = DirectDriver(writer(ran)).run("write notes", answers=[{"approved": False}])
    assert ran == []
    assert env.outputs["apply"] == {"status": "denied", "error": "declined by the user"}
    assert env.counters.tool_calls == 0
    assert env.terminal_reason == "completed"


# -- loops, bounds and edge limits ---------------------------------------------------------------


def ping_pong(max_count: int = 1000, on_exceeded: str | None = None) -> Capability:
    """a -> b -> a ... forever (b never says stop), bounded by an edge limit on b -> a."""

    @stage
    def b() -> Out:
        return Out(stop=False)

    return make(
        "t_loop",
        [
            AgentConfig(name="a", default_next="b"),
            AgentConfig(
                name="b", routing_rules=[RoutingRule(field="stop", value=False, target="a")], default_next="end"
            ),
            AgentConfig(name="end"),
        ],
        b,
        final("end"),
        edge_limits=[EdgeLimit(from_stage="b", to_stage="a", max_count=max_count, on_exceeded=on_exceeded)],
        bounds={"max_agent_hops": 50},
    )


@pytest.mark.parametrize("max_hops", [2, 3, 5, 6, 9])
def test_max_agent_hops_ends_through_the_final_stage(max_hops: int):
    # Given an endless loop
    driver = DirectDriver(ping_pong())
    env = driver.run("loop", bounds={"max_agent_hops": max_hops})
    # Then the hop bound ends it through the final stage, within the bound
    assert env.terminal_reason == "max_agent_hops"
    assert env.counters.agent_hops <= max_hops
    assert env.counters.agent_hops == len(driver.history(env))
    assert driver.history(env)[-1].stage == "end"
    assert env.next_stage is None


def test_max_agent_hops_uses_every_hop_it_may():
    driver = DirectDriver(ping_pong())
    env = driver.run("loop", bounds={"max_agent_hops": 6})
    assert stages(driver, env) == ["a", "b", "a", "b", "a", "end"]


def test_edge_limit_ends_the_loop():
    driver = DirectDriver(ping_pong(max_count=2))
    env = driver.run("loop")
    assert env.terminal_reason == "edge_limit:b->a"
    assert env.edge_counts["b->a"] == 2
    assert stages(driver, env) == ["a", "b", "a", "b", "a", "b", "end"]


def test_edge_limit_on_exceeded_sends_the_runner_to_that_stage():
    # Given b -> a allowed once, after which the limit sends the mission to 'side'
    @stage
    def b() -> Out:
        return Out(again=True)

    cap = make(
        "t_on_exceeded",
        [
            AgentConfig(
                name="a", routing_rules=[RoutingRule(field="aside", value=True, target="side")], default_next="b"
            ),
            AgentConfig(
                name="b", routing_rules=[RoutingRule(field="again", value=True, target="a")], default_next="end"
            ),
            AgentConfig(name="side", default_next="end"),
            AgentConfig(name="end"),
        ],
        b,
        final("end"),
        edge_limits=[EdgeLimit(from_stage="b", to_stage="a", max_count=1, on_exceeded="side")],
    )
    # When
    driver = DirectDriver(cap)
    env = driver.run("loop")
    # Then the runner follows on_exceeded (the compiled ASL has no route for it: see test_compiler)
    assert stages(driver, env) == ["a", "b", "a", "b", "side", "end"]
    assert driver.history(env)[3].next_stage == "side"
    assert env.terminal_reason == "completed"


# -- failures ------------------------------------------------------------------------------------


def test_a_stage_that_always_raises_ends_through_finalize():
    # Given a stage that always fails
    @stage
    def boom() -> Out:
        raise RuntimeError("kaboom")

    seen: dict[str, Any] = {}

    @stage
    def done(ctx: Ctx) -> Answer:
        seen["failure"] = dict(ctx.failure) if ctx.failure is not None else None
        return Answer(answer="partial")

    cap = make(
        "t_boom",
        [
            AgentConfig(name="ok", default_next="boom"),
            AgentConfig(name="boom", default_next="done"),
            AgentConfig(name="done"),
        ],
        boom,
        done,
    )
    driver = DirectDriver(cap)
    # When
    env = driver.run("fail please")
    # Then
    assert env.terminal_reason == "stage_failed:boom"
    assert stages(driver, env) == ["ok", "done"]
    assert [(s.stage, s.mode) for s in driver.steps] == [("ok", "run"), ("boom", "run"), ("done", "finalize")]
    assert [(e.stage, e.kind, e.message) for e in env.errors] == [("boom", "RuntimeError", "kaboom")]
    assert seen["failure"] == {"reason": "stage_failed", "state": "boom", "error": "RuntimeError", "cause": "kaboom"}
    assert env.outputs["done"] == {"answer": "partial"}
    record = driver.stores.missions.get(env.mission_id)
    assert (record.status, record.terminal_reason) == ("failed", "stage_failed:boom")
    # and the failed attempt's events were kept, under a prefix of their own
    types = event_types(driver, env)
    assert EventType.FLOW_ERROR.value in types
    assert types[-2:] == [EventType.AGENT_COMPLETED.value, EventType.FLOW_COMPLETED.value]


class EventsDown(MemoryEventStore):
    """An events table that cannot be reached."""

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        raise ConnectionError("events table unreachable")


class Warnings(logging.Handler):
    """The warnings the runner's modules log, whatever the process's logging was set to."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_failing_stage_whose_events_cannot_be_kept_says_so_and_raises_its_own_error():
    # Given a stage that fails, run where the events table cannot be reached
    @stage
    def boom() -> Out:
        raise RuntimeError("kaboom")

    cap = make(
        "t_boom_unheard", [AgentConfig(name="boom", default_next="done"), AgentConfig(name="done")], boom, final()
    )
    driver = DirectDriver(cap)
    runner = StageRunner(cap, replace(driver.services, events=EventsDown()))
    start = build_envelope(MissionRequest(capability=cap.name, goal="g"), capabilities=driver.registry)
    runner_log, warnings = logging.getLogger("missions.service.runner"), Warnings()
    level = runner_log.level
    runner_log.addHandler(warnings)
    runner_log.setLevel(logging.WARNING)
    # When the stage runs
    try:
        with pytest.raises(RuntimeError, match="kaboom"):
            runner.handle({"stage": "boom", "mode": "run", "envelope": driver.codec.encode(start)})
    finally:
        runner_log.removeHandler(warnings)
        runner_log.setLevel(level)
    # Then it raised its own error, and the record of it that was lost is logged: the mission, the error, why
    [warning] = warnings.records
    message = warning.getMessage()
    assert start.mission_id in message and "RuntimeError" in message and "events table unreachable" in message
    assert warning.exc_info is not None and isinstance(warning.exc_info[1], ConnectionError)


class Verdict(BaseModel):
    verdict: str


def test_a_model_answer_missing_a_field_of_the_stages_model_fails_the_stage():
    # Given an LLM stage thinking a Verdict, and a model answering without `verdict`
    @stage
    def a(ctx: Ctx) -> Verdict:
        return ctx.think(Verdict)

    cap = make("t_validated", [AgentConfig(name="a", has_llm=True, default_next="done"), AgentConfig(name="done")], a)
    driver = DirectDriver(cap)
    # When
    env = driver.run("go")
    # Then the answer failed the model's validation, and the mission ended through finalize
    assert env.terminal_reason == "stage_failed:a"
    assert driver.steps[1].mode == "finalize"
    assert "a" not in env.outputs
    assert env.errors[0].kind == "LLMError" and "verdict" in env.errors[0].message


# -- checkpoints -------------------------------------------------------------------------------


def test_one_checkpoint_per_stage_chained_to_its_parent():
    driver = DirectDriver(gather_think_done([]))
    env = driver.run("checkpoint me")
    checkpoints = driver.stores.checkpoints.list(env.mission_id)
    assert [c.checkpoint_id for c in checkpoints] == ["0001-gather", "0002-think", "0003-done"]
    assert [c.stage for c in checkpoints] == ["gather", "think", "done"]
    assert [c.parent_id for c in checkpoints] == [None, "0001-gather", "0002-think"]
    assert [state["next_stage"] for _, state in states(driver.stores.checkpoints, env.mission_id)] == [
        "think",
        "done",
        None,
    ]
    assert env.checkpoint_id == "0003-done"
    # and the first keeps the whole envelope, the others what their stage changed, each its stage's record
    assert checkpoints[0].envelope is not None and checkpoints[0].delta is None
    assert all(c.envelope is None and c.delta is not None for c in checkpoints[1:])
    assert [[r.stage for r in c.records] for c in checkpoints] == [["gather"], ["think"], ["done"]]


def test_rerunning_a_stage_with_the_same_input_returns_the_stored_checkpoint():
    # Given a finished mission
    ran: list[str] = []
    driver = DirectDriver(gather_think_done(ran))
    env = driver.run("idempotent")
    checkpoints = driver.stores.checkpoints.list(env.mission_id)
    events_before = event_types(driver, env)
    record_before = driver.stores.missions.get(env.mission_id)
    # When 'think' runs again on the very input it had (a retried Lambda)
    given = state_at(driver.stores.checkpoints, env.mission_id, checkpoints[0])
    again = driver.runner.handle({"stage": "think", "mode": "run", "envelope": given})
    # Then the stored result comes back: no fork, no extra events, no mission update
    assert again == state_at(driver.stores.checkpoints, env.mission_id, checkpoints[1]) == driver.returned["0002-think"]
    assert driver.stores.checkpoints.list(env.mission_id) == checkpoints
    assert event_types(driver, env) == events_before
    assert driver.stores.missions.get(env.mission_id) == record_before


# -- events -------------------------------------------------------------------------------------


def test_events_tell_the_story_in_order():
    # Given tools, a judging stage with a decision, and the final stage
    @stage
    def gather(ctx: Ctx) -> Out:
        ctx.tools.execute("t.echo", {"path": "x"})
        return Out()

    @stage
    def judge() -> Out:
        return Out(decision="ACCEPT", reason="looks right")

    cap = make(
        "t_events",
        [
            AgentConfig(name="gather", has_tools=True, tool_access=ToolAccess.READ, default_next="judge"),
            AgentConfig(name="judge", default_next="done"),
            AgentConfig(name="done"),
        ],
        gather,
        judge,
        final(),
        tools=catalog([]),
    )
    driver = DirectDriver(cap)
    env = driver.run("tell me")
    # Then
    assert event_types(driver, env) == [
        "orchestrator.started",
        "agent_started",
        "executor.tool_started",
        "executor.tool_completed",
        "orchestrator.stage_transition",
        "agent_completed",
        "agent_started",
        "critic.decision",
        "orchestrator.stage_transition",
        "agent_completed",
        "agent_started",
        "agent_completed",
        "orchestrator.completed",
    ]
    events, _ = driver.stores.events.read(env.mission_id, limit=100)
    transitions = [
        (e.payload["from_stage"], e.payload["to_stage"]) for e in events if e.type is EventType.STAGE_TRANSITION
    ]
    assert transitions == [("gather", "judge"), ("judge", "done")]
    decision = next(e for e in events if e.type is EventType.CRITIC_DECISION)
    assert decision.payload == {"decision": "ACCEPT", "reason": "looks right"}
    assert all(e.mission_id == env.mission_id and e.position for e in events)


def test_interrupt_is_an_event():
    driver = DirectDriver(clarifying("intake"))
    env = driver.run("ask me", answers=[{"text": "x"}])
    assert event_types(driver, env).count("interrupt.raised") == 1


# -- bad requests ---------------------------------------------------------------------------


@pytest.fixture
def started() -> tuple[DirectDriver, dict[str, Any]]:
    driver = DirectDriver(gather_think_done([]))
    env = driver.run("requests")
    return driver, state_at(driver.stores.checkpoints, env.mission_id, "0001-gather")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"stage": "nope", "mode": "run"}, "has no stage 'nope'"),
        ({"stage": "think", "mode": "sideways"}, "unknown mode 'sideways'"),
        ({"stage": "think", "mode": "run", "envelope": None}, "request has no envelope"),
    ],
)
def test_bad_requests_are_stage_request_errors(started, request_, message):
    driver, envelope = started
    with pytest.raises(StageRequestError, match=message):
        driver.runner.handle({"envelope": envelope, **request_})


def test_an_envelope_of_another_capability_is_refused(started):
    driver, envelope = started
    with pytest.raises(StageRequestError, match="envelope belongs to 'someone_else'"):
        driver.runner.handle({"stage": "think", "mode": "run", "envelope": {**envelope, "capability": "someone_else"}})


# -- regressions ---------------------------------------------------------------------------------


def test_a_timed_out_interrupt_is_not_left_pending_on_the_finished_mission():
    # Given a question nobody answers
    driver = DirectDriver(clarifying("intake"))
    env = driver.run("do the thing", answers=[])
    # Then the failed mission has no pending interrupt
    record = driver.stores.missions.get(env.mission_id)
    assert record.status == "failed"
    assert record.pending_interrupt is None


def _parallel_capability():
    return make(
        "t_parallel_hops",
        [
            AgentConfig(name="a", default_next="bc"),
            AgentConfig(name="b", default_next="d"),
            AgentConfig(name="c", default_next="d"),
            AgentConfig(name="d"),
        ],
        final("d"),
        parallel=[ParallelGroup(name="bc", stages=["b", "c"])],
    )


def _start(driver, cap, max_hops):
    request = MissionRequest(capability=cap.name, goal="g", bounds={"max_agent_hops": max_hops})
    start = build_envelope(request, capabilities=driver.registry)
    driver.stores.missions.create(
        MissionRecord(mission_id=start.mission_id, user_id="u", capability=cap.name, goal="g")
    )
    return driver.runner.handle({"stage": "a", "mode": "run", "envelope": driver.codec.encode(start)})


@pytest.mark.parametrize("max_hops", [3, 4])
def test_a_parallel_group_stays_within_max_agent_hops(max_hops):
    # Given a -> {b, c} -> d (final): the whole mission needs 4 hops
    cap = _parallel_capability()
    driver = DirectDriver(cap)
    # When a has run (the driver has no Parallel state: the test plays the state machine itself)
    state = _start(driver, cap, max_hops)
    if max_hops == 3:
        # Then with too few hops left the group does not start: the mission goes to its final stage
        assert state["next_stage"] == "d" and state["terminal_reason"] == "max_agent_hops"
        return
    assert state["next_stage"] == "bc"
    deltas = [driver.runner.handle({"stage": m, "mode": "branch", "envelope": state}) for m in ("b", "c")]
    state = driver.runner.handle({"stage": "d", "mode": "run", "envelope": {**state, "branch_results": deltas}})
    env = driver.codec.decode(state)
    # Then with enough hops the group and its join run, within the bound
    assert [r.stage for r in driver.history(env)] == ["a", "b", "c", "d"]
    assert env.counters.agent_hops <= env.bounds.max_agent_hops


def test_the_state_machines_hop_count_names_the_checkpoint(started):
    # Given a stage request carrying the state machine's own hop count (a stage cannot change it)
    driver, envelope = started
    tampered = {**envelope, "counters": {**envelope["counters"], "agent_hops": 0}}
    # When the stage runs
    result = driver.runner.handle({"stage": "think", "mode": "run", "hop": 41, "envelope": tampered})
    # Then its checkpoint is named after that count, not after the envelope's counters
    assert result["checkpoint_id"] == "0042-think"
    assert driver.stores.checkpoints.get(envelope["mission_id"], "0042-think").parent_id == envelope["checkpoint_id"]


def test_the_model_gets_the_stage_deadline_from_the_lambda_context():
    # Given a stage function with 10 s left, and a model that notes each request's deadline
    import time

    from missions.adapters.llm.scripted import ScriptedProvider
    from missions.core.llm.provider import LLMResult
    from missions.local.moto import LocalContext

    seen: list[float | None] = []
    scripted = ScriptedProvider(policy)

    class Noting:
        name = "noting"

        def complete(self, request: LLMRequest) -> LLMResult:
            seen.append(request.deadline)
            return scripted.complete(request)

    from tests.support.fakes import memory_runtime

    capability = gather_think_done([])
    runtime = memory_runtime(llm=Noting(), capabilities=registry.Registry().including(capability))
    envelope = build_envelope(
        MissionRequest(capability=capability.name, goal="count things"), None, runtime.capabilities
    )
    runtime.missions.create(
        MissionRecord(
            mission_id=envelope.mission_id, user_id="u", capability=capability.name, goal="g", status="running"
        )
    )

    class TenSecondsLeft(LocalContext):
        def get_remaining_time_in_millis(self) -> int:
            return 10_000

    # When the LLM stage runs
    before = time.monotonic()
    request = {"stage": "think", "mode": "run", "envelope": runtime.codec.encode(envelope), "hop": 1}
    runtime.stages.handle(request, TenSecondsLeft("stage-think"))
    # Then the model call carried the stage's deadline: 10 s less the margin to commit
    [deadline] = seen
    assert deadline is not None and before + 6.0 < deadline < time.monotonic() + 7.0


# -- a stage retried after it died mid-way --------------------------------------------------------


class Died(BaseException):
    """The stage's Lambda died (a crash, a timeout): nothing of the attempt is committed."""


def dies_after_writing(ran: list[str], deaths: list[type[BaseException]]) -> Capability:
    """A stage that writes (an auto-approved side effect), reads, then dies the first times it runs."""

    @stage
    def apply(ctx: Ctx) -> Out:
        wrote = ctx.tools.execute("fs.write", {"path": "notes.txt"})
        ctx.tools.execute("t.echo", {"path": "notes.txt"})
        if deaths:
            raise deaths.pop(0)("died after its tool calls")
        return Out(status=wrote.status)

    return auto_writer("t_dies", apply, ran)


def auto_writer(name: str, apply: StageFunction, ran: list[str]) -> Capability:
    """apply (may write, with fs.write auto-approved) -> done."""
    return make(
        name,
        [
            AgentConfig(name="apply", has_tools=True, tool_access=ToolAccess.WRITE, default_next="done"),
            AgentConfig(name="done"),
        ],
        apply,
        final(),
        tools=catalog(ran),
        auto_approve=frozenset({"fs.write"}),
    )


def first_state(driver: DirectDriver) -> dict[str, Any]:
    """The first stage's input for a new running mission of the driver's capability."""
    name = driver.capability.name
    state = driver.codec.encode(
        build_envelope(MissionRequest(capability=name, goal="write notes"), None, driver.registry)
    )
    driver.stores.missions.create(
        MissionRecord(mission_id=state["mission_id"], user_id="local", capability=name, goal="g", status="running")
    )
    return state


@pytest.mark.parametrize("death", [Died, RuntimeError])
def test_a_stage_retried_after_dying_mid_way_does_not_repeat_its_side_effects(death):
    # Given a stage whose first attempt wrote, read, and then died (a crash, or an error)
    ran: list[str] = []
    driver = DirectDriver(dies_after_writing(ran, [death]))
    first = first_state(driver)
    with pytest.raises(death):
        driver.runner.handle({"stage": "apply", "mode": "run", "envelope": first})
    assert ran == ["write:notes.txt", "echo:notes.txt"]
    # When the stage is run again on the same input (the state machine's retry)
    again = driver.runner.handle({"stage": "apply", "mode": "run", "envelope": first})
    # Then the write is not made again (its recorded result is replayed); the read-only call runs again
    assert ran == ["write:notes.txt", "echo:notes.txt", "echo:notes.txt"]
    assert driver.codec.decode(again).outputs["apply"] == {"status": "success"}
    assert driver.codec.decode(again).counters.tool_calls == 2
    # and the committed stage tells of one write, marked as replayed
    events, _ = driver.stores.events.read(first["mission_id"], limit=1000)
    committed = [e for e in events if e.type is EventType.TOOL_COMPLETED and e.payload["tool"] == "fs.write"]
    failed_attempts = 1 if death is RuntimeError else 0  # an error records its attempt's events; a crash cannot
    assert len(committed) == 1 + failed_attempts
    assert committed[-1].payload.get("replayed") is True
    # and running it a third time changes nothing (the stored checkpoint is the answer)
    assert driver.runner.handle({"stage": "apply", "mode": "run", "envelope": first}) == again
    assert ran.count("write:notes.txt") == 1


def test_the_same_call_twice_in_a_stage_is_two_calls_each_replayed_once():
    # Given a stage that makes the same write twice, then dies
    ran: list[str] = []
    deaths: list[type[BaseException]] = [Died]

    @stage
    def apply(ctx: Ctx) -> Out:
        ctx.tools.execute("fs.write", {"path": "a"})
        ctx.tools.execute("fs.write", {"path": "a"})
        if deaths:
            raise deaths.pop(0)("died")
        return Out()

    driver = DirectDriver(auto_writer("t_twice", apply, ran))
    state = first_state(driver)
    with pytest.raises(Died):
        driver.runner.handle({"stage": "apply", "mode": "run", "envelope": state})
    # When it is retried
    driver.runner.handle({"stage": "apply", "mode": "run", "envelope": state})
    # Then both writes happened once each: two, not four, and not one
    assert ran == ["write:a", "write:a"]
