"""The offline policy: how the scripted model answers the dining stages, deterministically.

It reads what a real model would read: the goal, and the facts the stage put in its prompt.
"""

from __future__ import annotations

import json
from typing import Any

from capabilities.dining.criteria import read_goal
from capabilities.dining.stages import FACTS, OptionNote, RankNotes, Summary, describe
from missions.core.llm import LLMRequest


def facts_of(request: LLMRequest) -> dict[str, Any]:
    user = next((m["content"] for m in reversed(request.messages) if m.get("role") == "user"), "")
    return json.loads(user.split(FACTS, 1)[1]) if FACTS in user else {}


def _note(option: dict[str, Any]) -> str:
    reviews = f" from {option['review_count']} reviews" if option.get("review_count") else ""
    diets = f"; {', '.join(option['dietary'])} options" if option.get("dietary") else ""
    rating = f"{option['rating']:.1f} stars{reviews}" if option.get("rating") is not None else "no rating yet"
    return f"{rating}, {option['table']}{diets}"


def _plan(request: LLMRequest) -> Any:
    return read_goal(request.envelope.raw_input)


def _rank(request: LLMRequest) -> RankNotes:
    options = facts_of(request).get("options") or []
    return RankNotes(notes=[OptionNote(id=o["id"], note=_note(o)) for o in options])


def _complete(request: LLMRequest) -> Summary:
    return Summary(summary=describe(facts_of(request)))


POLICIES = {"plan": _plan, "rank": _rank, "complete": _complete}


def offline_policy(request: LLMRequest) -> Any:
    try:
        answer = POLICIES[request.stage]
    except KeyError:
        raise LookupError(f"dining has no offline policy for stage '{request.stage}'") from None
    return answer(request)
