"""The offline policy: how the scripted model answers the dining stages, deterministically.

It reads what a real model would read: the goal, and the facts the stage gave the model.
"""

from __future__ import annotations

from typing import Any

from capabilities.dining.criteria import read_goal
from capabilities.dining.stages import OptionNote, RankNotes, Summary, describe
from missions.core.llm.provider import LLMRequest


def _note(option: dict[str, Any]) -> str:
    reviews = f" from {option['review_count']} reviews" if option.get("review_count") else ""
    diets = f"; {', '.join(option['dietary'])} options" if option.get("dietary") else ""
    rating = f"{option['rating']:.1f} stars{reviews}" if option.get("rating") is not None else "no rating yet"
    return f"{rating}, {option['table']}{diets}"


def offline_policy(request: LLMRequest) -> Any:
    if request.stage == "plan":
        return read_goal(request.envelope.raw_input)
    if request.stage == "rank":
        options = request.facts.get("options") or []
        return RankNotes(notes=[OptionNote(id=o["id"], note=_note(o)) for o in options])
    if request.stage == "complete":
        return Summary(summary=describe(request.facts.get("facts") or {}))
    raise LookupError(f"dining has no offline policy for stage '{request.stage}'")
