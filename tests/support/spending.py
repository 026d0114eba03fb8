"""A test capability whose every stage asks the model: with the offline model priced (settings
`openai_prices` {"scripted": ...}), each stage spends, so daily budgets can be reached on the emulation."""

from __future__ import annotations

from pydantic import BaseModel

from missions.core.capability.registry import Ctx, stage
from missions.core.pipeline.config import AgentConfig
from tests.integration.conftest import make_capability
from tests.support.stages import thinking


class Report(BaseModel):
    answer: str


@stage
def report(ctx: Ctx) -> Report:
    return Report(answer=f"thought through {ctx.goal}")


STAGES = ("outline", "draft", "polish")
SPENDS = make_capability(
    "t_spends",
    [
        AgentConfig(name="outline", has_llm=True, default_next="draft"),
        AgentConfig(name="draft", has_llm=True, default_next="polish"),
        AgentConfig(name="polish", has_llm=True, default_next="report"),
        AgentConfig(name="report"),
    ],
    *(thinking(name) for name in STAGES),
    report,
)
