"""A mission through the stage runner: work counted, clarifications and confirmations of risky tools (the
StageRunner, driven stage by stage by the DirectDriver, the state machine's stand-in).
"""

from __future__ import annotations

from pydantic import BaseModel

from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.tools import call_id
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.service.checkpoints import state_at
from tests.support.driver import DirectDriver
from tests.support.runner import catalog, clarifying, final, gather_think_done, make, stages
from tests.support.stages import thinking


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


def test_clarification_resumes_at_the_configured_stage_with_the_answer():
    # Given a stage that asks once, with clarifications resuming at 'intake'
    driver = DirectDriver(clarifying("intake"))
    # When the human answers
    env = driver.run("do the thing", answers=[{"text": "the blue one"}])
    # Then the mission resumed at intake, which saw the answer first
    assert stages(driver, env) == ["intake", "ask", "intake", "ask", "done"]
    assert [r.status for r in driver.history(env)] == ["ok", "interrupted", "ok", "ok", "ok"]
    assert driver.history(env)[1].next_stage == "await:clarification"
    assert driver.outputs(env)["intake"]["resumed_here"] == "the blue one"
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
