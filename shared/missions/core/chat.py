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
import re
from typing import Any, Protocol

from missions.core.errors import NotFound
from missions.core.mission.envelope import InterruptKind, InterruptResponse

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

_YES = {
    "approve",
    "approved",
    "yes",
    "y",
    "ok",
    "okay",
    "sure",
    "confirm",
    "confirmed",
    "go",
    "lgtm",
    "accept",
    "accepted",
    "proceed",
    "do",
}
_NO = {
    "reject",
    "rejected",
    "no",
    "n",
    "deny",
    "denied",
    "decline",
    "declined",
    "refuse",
    "cancel",
    "stop",
    "don't",
    "dont",
    "nope",
}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}


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


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _verdict(text: str) -> bool | None:
    words = _words(text)
    if not words:
        return None
    if words[0] in _NO or (words[0] in ("do", "please") and len(words) > 1 and words[1] in ("not", "n't")):
        return False
    if words[0] in _YES or (words[0] == "please" and len(words) > 1 and words[1] in _YES):
        return True
    return None


def _choice(text: str, options: list[str]) -> str | None:
    words = _words(text)
    numbers = [int(w) for w in words if w.isdigit()]
    if len(numbers) == 1 and 1 <= numbers[0] <= len(options):
        return options[numbers[0] - 1]
    ordinals = [_ORDINALS[w] for w in words if w in _ORDINALS]
    if len(ordinals) == 1 and len(options) >= abs(ordinals[0]):
        return options[ordinals[0] - 1 if ordinals[0] > 0 else -1]
    said = " ".join(text.lower().split())
    exact = [o for o in options if " ".join(o.lower().split()) == said]
    if exact:
        return exact[0]
    named = [o for o in options if " ".join(o.lower().split()) in said or said in " ".join(o.lower().split())]
    return named[0] if len(named) == 1 else None


def interpret_answer(kind: InterruptKind, options: list[str], text: str) -> InterruptResponse | str:
    """The user's message as the answer the question expects, or (a str) what the chat should say
    instead when the message does not answer it."""
    text = text.strip()
    if kind is InterruptKind.CLARIFICATION:
        return InterruptResponse(text=text)
    if kind is InterruptKind.CHOICE:
        picked = _choice(text, options)
        if picked is None:
            listed = "; ".join(f"{n}. {o}" for n, o in enumerate(options, 1))
            return f"I need one of the options to go on: {listed}. Reply with its number or name."
        return InterruptResponse(decision=picked, text=text)
    verdict = _verdict(text)
    if verdict is None:
        return "I need a yes or a no to go on: reply **approve** or **reject** (with a reason if you like)."
    return InterruptResponse(approved=verdict, text=text)


def usage_of(counters: dict[str, Any] | None) -> dict[str, int]:
    counters = counters or {}
    prompt, completion_tokens = int(counters.get("tokens_in") or 0), int(counters.get("tokens_out") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": prompt + completion_tokens}
