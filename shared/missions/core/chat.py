"""The rules that make a chat a mission; OpenAI's wire format is missions.app.chat_wire.

A chat message is a turn of a conversation (missions.core.memory.conversation): the last user message is
the goal, the earlier messages are its context. When the mission asks its user something, the
question is the assistant's reply and the next user message answers it; `interpret_answer` reads
"approve", "option 2" or a free-text clarification as the interrupt's kind expects, and says what
it needs when the message does not fit (nothing is answered then).

A conversation is named by the client (the `X-Conversation-Id` header or a `conversation_id` field),
or found from the history it sends back: every reply the chat gives is remembered by a digest of its
text, so the last assistant message of a history names the conversation it came from.

Everything here is pure: the service (missions.service.chat) owns the waiting, the stores and the
launcher; the app owns HTTP and the wire format.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from missions.core import approvals
from missions.core.errors import NotFound
from missions.core.mission.envelope import InterruptKind, InterruptResponse
from missions.core.mission.requests import MultitaskStrategy

AUTO_MODEL = "missions"  # the model name that lets the runtime choose the capability
MAX_REPLIES = 40  # reply digests a conversation remembers (its history is found by the last one)


class ChatMessageIn(Protocol):
    """A chat message as the service reads it (the wire's request, missions.app.chat_wire.ChatRequest):
    the capability it names, its goal and the transcript the client sent before it."""

    @property
    def model(self) -> str: ...

    @property
    def conversation_id(self) -> str | None: ...

    @property
    def context(self) -> dict[str, Any] | None: ...

    @property
    def mission_model(self) -> str | None: ...

    @property
    def multitask_strategy(self) -> MultitaskStrategy | None: ...

    @property
    def goal(self) -> str: ...

    @property
    def last_reply(self) -> str | None: ...

    def history(self) -> list[dict[str, str]]: ...


class UnknownModel(NotFound):
    """The chat names a model that is neither `missions` nor an installed capability."""


class UnknownConversation(NotFound):
    """The chat continues a conversation (it sends a history) the caller does not have."""


def reply_digest(text: str) -> str:
    """A reply's fingerprint, whitespace-insensitive (clients trim and re-wrap what they send back)."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:32]


# -- a question asked in the chat, and the next message as its answer ----------------------------


def question_text(kind: InterruptKind, question: str, options: list[str], data: dict[str, Any]) -> str:
    """The assistant's reply that asks the user: the question, what it is about, how to answer."""
    lines = [question.strip()]
    shown = data.get("diff") or data.get("change") or data.get("preview")
    if isinstance(shown, str) and shown.strip():
        fence = "diff" if data.get("diff") else ""
        lines += ["", f"```{fence}", shown.rstrip(), "```"]
    elif isinstance(shown, dict | list):
        lines += ["", "```json", json.dumps(shown, indent=2, ensure_ascii=False)[:4000], "```"]
    if kind is InterruptKind.CHOICE and options:
        lines += ["", *(f"{n}. {option}" for n, option in enumerate(options, 1))]
        lines += ["", "Reply with the number or the name of your choice."]
    elif kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW):
        lines += ["", "Reply **approve** or **reject** (a reason after it is passed on)."]
    return "\n".join(lines)


def interpret_answer(kind: InterruptKind, options: list[str], text: str) -> InterruptResponse | str:
    """The user's message as the answer the question expects, or (a str) what the chat should say
    instead when the message does not answer it."""
    text = text.strip()
    if kind is InterruptKind.CLARIFICATION:
        return InterruptResponse(text=text)
    if kind is InterruptKind.CHOICE:
        picked = approvals.choice(text, options)
        if picked is None:
            listed = "; ".join(f"{n}. {o}" for n, o in enumerate(options, 1))
            return f"I need one of the options to go on: {listed}. Reply with its number or name."
        return InterruptResponse(decision=picked, text=text)
    verdict = approvals.verdict(text)
    if verdict is None:
        return "I need a yes or a no to go on: reply **approve** or **reject** (with a reason if you like)."
    return InterruptResponse(approved=verdict, text=text)


def usage_of(counters: dict[str, Any] | None) -> dict[str, int]:
    counters = counters or {}
    prompt, completion_tokens = int(counters.get("tokens_in") or 0), int(counters.get("tokens_out") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": prompt + completion_tokens}
