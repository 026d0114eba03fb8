"""Working memory of a conversation: what a mission's first stage knows of the turns before it.

A mission may belong to a conversation (its user's). When it starts, the conversation's working
memory is put in its context under `conversation`: the earlier goals and answers, the evidence they
cited, what was in focus (entities, files, symbols) and the questions still open. When it ends, its
turn is folded in. The memory is bounded: the last `KEEP_TURNS` turns whole, older ones as one line
each in `summary`, focus and evidence capped, and the whole at most `MAX_BYTES` of JSON (oldest
summary lines dropped first), so a conversation of any length costs the same per turn.

Every capability gets this with no code of its own. A capability may shape what is kept: its final
stage's output may list `focus` (the entities or files it worked on), kept first; and its first stage
reads `context["conversation"]` to understand a follow-up (home_assistant's "and last week?").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import Field

from missions.core.mission.envelope import Model, utcnow

KEEP_TURNS = 6
MAX_SUMMARY_LINES = 40
MAX_FOCUS = 30
MAX_EVIDENCE = 40
MAX_ANSWER_CHARS = 1500
MAX_BYTES = 16 * 1024
CONTEXT_KEY = "conversation"
CONVERSATION_ID = r"^[A-Za-z0-9_.:-]{1,128}$"
_FOCUS = re.compile(
    r"`([^`]{2,80})`"  # quoted
    r"|((?:[\w-]+/)+[\w.-]+\.\w+)"  # a file path
    r"|\b([a-z_]+\.[a-z0-9_]+)\b"  # an entity id, a module.name
    r"|\b([A-Za-z_][A-Za-z0-9_]*_[A-Za-z0-9_]+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)\b"  # snake_case, CamelCase
)


class Turn(Model):
    mission_id: str
    capability: str
    goal: str
    answer: str = ""
    status: str = "completed"
    notes: list[str] = Field(default_factory=list)  # what the user told the mission while it ran
    at: str = Field(default_factory=utcnow)


class WorkingMemory(Model):
    conversation_id: str
    user_id: str
    turns: list[Turn] = Field(default_factory=list)  # the newest KEEP_TURNS, oldest first
    summary: list[str] = Field(default_factory=list)  # one line per older turn
    focus: list[str] = Field(default_factory=list)  # entities, files, symbols: newest first
    evidence: list[str] = Field(default_factory=list)  # what answers cited (file:line), newest first
    open_questions: list[str] = Field(default_factory=list)
    # kept for the chat entry (missions.core.chat), never shown to a mission's stages:
    awaiting: str | None = None  # the mission whose reply the chat still owes (it outlived the wait)
    replies: list[str] = Field(default_factory=list)  # digests of the chat's replies: a history names its conversation
    mission_context: dict[str, Any] = Field(default_factory=dict)  # what each turn's mission starts with (a repository)
    created_at: str = Field(default_factory=utcnow)
    updated_at: str = Field(default_factory=utcnow)

    def size(self) -> int:
        return len(self.model_dump_json())

    def as_context(self) -> dict[str, Any]:
        """What a mission's first stage gets (context["conversation"])."""
        return {
            "id": self.conversation_id,
            "turns": [
                {
                    "goal": t.goal,
                    "answer": t.answer,
                    "capability": t.capability,
                    **({"notes": t.notes} if t.notes else {}),
                }
                for t in self.turns
            ],
            "earlier": list(self.summary),
            "focus": list(self.focus),
            "evidence": list(self.evidence),
            "open_questions": list(self.open_questions),
        }


def _turn_context(turn: Turn) -> dict[str, Any]:
    told = {"notes": list(turn.notes)} if turn.notes else {}  # what the user told that turn's mission
    return {"goal": turn.goal, "answer": turn.answer, "capability": turn.capability, **told}


def focus_of(*texts: str) -> list[str]:
    """Names worth carrying to the next turn: `quoted`, entity.ids and file.paths, snake_case, CamelCase."""
    found: list[str] = []
    for text in texts:
        for match in _FOCUS.finditer(text or ""):
            name = next(group for group in match.groups() if group)
            if name.lower() not in ("e.g", "i.e") and not name.replace(".", "").isdigit():
                found.append(name.strip())
    return list(dict.fromkeys(found))


def fold(
    memory: WorkingMemory,
    turn: Turn,
    *,
    citations: Iterable[str] = (),
    focus: Iterable[str] = (),
    open_question: str | None = None,
) -> WorkingMemory:
    """The memory with this turn in it, bounded (see the module's docstring)."""
    turn = turn.model_copy(update={"answer": turn.answer[:MAX_ANSWER_CHARS]})
    turns = [*memory.turns, turn]
    summary = list(memory.summary)
    while len(turns) > KEEP_TURNS:
        old = turns.pop(0)
        summary.append(f"{old.goal[:160]} -> {' '.join(old.answer.split())[:200]}")
    named = [*focus, *focus_of(turn.goal, turn.answer)]
    folded = memory.model_copy(
        update={
            "turns": turns,
            "summary": summary[-MAX_SUMMARY_LINES:],
            "focus": list(dict.fromkeys([*named, *memory.focus]))[:MAX_FOCUS],
            "evidence": list(dict.fromkeys([*citations, *memory.evidence]))[:MAX_EVIDENCE],
            "open_questions": ([open_question] if open_question else []) + memory.open_questions[:4],
            "updated_at": utcnow(),
        }
    )
    while folded.size() > MAX_BYTES and (folded.summary or len(folded.turns) > 1 or folded.evidence):
        if folded.summary:
            folded = folded.model_copy(update={"summary": folded.summary[1:]})
        elif folded.evidence:
            folded = folded.model_copy(update={"evidence": folded.evidence[: len(folded.evidence) // 2]})
        else:
            folded = folded.model_copy(update={"turns": folded.turns[1:]})
    return folded


def context_bytes(memory: WorkingMemory) -> int:
    return len(json.dumps(memory.as_context()))
