"""A small capability and its tool catalog that the stage runner's test modules share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.stages import StageFunction
from missions.core.capability.tools import RiskLevel, ToolCatalog, ToolCategory, ToolResult
from missions.core.llm.provider import LLMRequest
from missions.core.mission.envelope import Envelope, InterruptKind
from missions.core.pipeline.config import AgentConfig, ToolAccess
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
