"""Stage hooks built from plain functions, for test capabilities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from missions.core.capability import StageContext, StageHooks

Hook = Callable[[StageContext], Any]


class Note(BaseModel):
    """The structured output of test LLM stages."""

    text: str = ""
    decision: str | None = None


class FnHooks(StageHooks):
    """Any hook left out keeps StageHooks' default; `llm=True` gives the stage an output model."""

    def __init__(
        self, *, pre: Hook | None = None, act: Hook | None = None, post: Hook | None = None, llm: bool = False
    ):
        self._pre, self._act, self._post = pre, act, post
        if llm:
            self.output_model = Note

    def pre(self, ctx: StageContext) -> None:
        if self._pre is not None:
            self._pre(ctx)

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{ctx.agent.name}: {ctx.goal}"}]

    def act(self, ctx: StageContext) -> None:
        if self._act is not None:
            self._act(ctx)

    def post(self, ctx: StageContext) -> dict[str, Any]:
        return self._post(ctx) if self._post is not None else super().post(ctx)
