"""The offline policy: how the scripted model answers the shopping stages, deterministically.

It reads what a real model would read: the goal, and the facts the stage gave the model.
"""

from __future__ import annotations

from typing import Any

from capabilities.shopping.query import read_goal
from capabilities.shopping.stages import Summary, describe
from missions.core.llm.provider import LLMRequest


def offline_policy(request: LLMRequest) -> Any:
    if request.stage == "execute":
        return read_goal(request.envelope.raw_input)
    if request.stage == "complete":
        return Summary(summary=describe(request.facts.get("facts") or {}))
    raise LookupError(f"shopping has no offline policy for stage '{request.stage}'")
