"""A test capability whose missions can be kept running on purpose: a goal that says "slow" waits at a gate the
test opens (so a second message of its conversation arrives while it is active). Its answer names the mission
it interrupted, if any, and the turns its conversation remembered."""

from __future__ import annotations

import threading

from pydantic import BaseModel

from missions.core.capability.registry import Ctx, stage
from missions.core.pipeline.config import AgentConfig
from tests.integration.conftest import make_capability

GATE = threading.Event()  # set: slow missions go on


class Done(BaseModel):
    answer: str


@stage
def work(ctx: Ctx) -> Done:
    if "slow" in ctx.goal:
        GATE.wait(60)
    interrupted = ctx.context.get("interrupted")
    turns = [turn["goal"] for turn in (ctx.context.get("conversation") or {}).get("turns", [])]
    said = f"done: {ctx.goal}"
    if isinstance(interrupted, dict):
        said += f" (instead of: {interrupted['goal']})"
    return Done(answer=f"{said}; remembered: {turns}")


SLOW = make_capability("t_slow", [AgentConfig(name="work")], work)
