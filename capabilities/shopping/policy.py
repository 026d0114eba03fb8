"""The offline policy: how the scripted model answers the shopping stages, deterministically.

It reads what a real model would read: the goal, and the facts the stage put in its prompt.
"""

from __future__ import annotations

import json
from typing import Any

from capabilities.shopping.query import read_goal
from capabilities.shopping.stages import FACTS, Summary, describe
from missions.core.llm import LLMRequest


def facts_of(request: LLMRequest) -> dict[str, Any]:
    user = next((m["content"] for m in reversed(request.messages) if m.get("role") == "user"), "")
    return json.loads(user.split(FACTS, 1)[1]) if FACTS in user else {}


def _execute(request: LLMRequest) -> Any:
    return read_goal(request.envelope.raw_input)


def _complete(request: LLMRequest) -> Summary:
    return Summary(summary=describe(facts_of(request)))


POLICIES = {"execute": _execute, "complete": _complete}


def offline_policy(request: LLMRequest) -> Any:
    try:
        answer = POLICIES[request.stage]
    except KeyError:
        raise LookupError(f"shopping has no offline policy for stage '{request.stage}'") from None
    return answer(request)
