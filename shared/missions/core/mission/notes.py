"""Notes: what a user tells a mission while it runs ("skip the museums", "the budget is 500").

A note is stored on the mission's record (at most `MAX_NOTES`, each at most `MAX_NOTE_CHARS`), and
only while the mission has not ended. No stage reads the record for it: the write that records a
stage's progress returns the record (missions.ports.missions: `transition`), so the stage hands the notes
on in the envelope (`envelope.notes`, a field the state machine carries), as does the resume of a
paused mission. The next stage that starts receives those it has not seen (`deliver`): into its
context under `notes`, and, for a mission that is a turn of a conversation, into the conversation's
working memory it started from, so the turn is folded with them. A note sent while the last stage
runs reaches no stage (there is none left), and stays on the mission's timeline.

Pure: no storage here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from missions.core.memory.conversation import CONTEXT_KEY as CONVERSATION_KEY
from missions.core.mission.envelope import Model, new_id, utcnow

MAX_NOTES = 20
MAX_NOTE_CHARS = 2000
CONTEXT_KEY = "notes"


class Note(Model):
    note_id: str = Field(default_factory=lambda: new_id("note_"))
    text: str = Field(min_length=1, max_length=MAX_NOTE_CHARS)
    at: str = Field(default_factory=utcnow)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("a note needs some text")
        return text.strip()


def deliver(context: dict[str, Any], pending: list[dict[str, Any]] | None) -> list[Note]:
    """Put the pending notes the context has not received into it (in place); the ones it received now."""
    received = [n for n in context.get(CONTEXT_KEY) or [] if isinstance(n, dict)]
    seen = {n.get("note_id") for n in received}
    new: list[Note] = []
    for raw in pending or []:
        try:
            note = Note.model_validate(raw)
        except ValueError:
            continue  # not a note (nothing but the store writes them): ignored rather than crash a stage
        if note.note_id not in seen:
            seen.add(note.note_id)
            new.append(note)
    if not new:
        return []
    context[CONTEXT_KEY] = [*received, *(n.model_dump() for n in new)][-MAX_NOTES:]
    conversation = context.get(CONVERSATION_KEY)
    if isinstance(conversation, dict):  # the working memory the turn started from, and is folded with
        conversation[CONTEXT_KEY] = [*(conversation.get(CONTEXT_KEY) or []), *(n.text for n in new)][-MAX_NOTES:]
    return new


def texts(context: dict[str, Any]) -> list[str]:
    """The notes a mission received, oldest first (what a capability's stage revises a draft by)."""
    return [str(n.get("text")) for n in context.get(CONTEXT_KEY) or [] if isinstance(n, dict) and n.get("text")]


__all__ = ["CONTEXT_KEY", "MAX_NOTES", "MAX_NOTE_CHARS", "Note", "deliver", "texts"]
