"""OpenAI's chat-completions wire format, which the stream function speaks (missions.app.streams): the
request a client sends, checked and read; the objects the reply is made of (`chat.completion`, its
streamed `chat.completion.chunk`s, Server-Sent Events); and OpenAI's error shape, which its SDKs raise
as APIError. What a message means for a mission is the core's (missions.core.chat).

OpenAI's other request parameters (temperature, max_tokens, tools...) are accepted and ignored: the
capability decides how its agents think.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from missions.core.memory.conversation import CONVERSATION_ID
from missions.core.mission.requests import MultitaskStrategy

CONVERSATION_HEADER = "x-conversation-id"
MAX_REQUEST_BYTES = 512 * 1024  # a chat request body larger than this is 413
MAX_GOAL_CHARS = 10_000  # the mission's goal limit (missions.core.mission.requests)
MAX_MESSAGES = 1_000
HISTORY_MESSAGES = 12  # earlier messages a mission gets as context, newest last
HISTORY_CHARS = 1_500  # each, cut to this


class ChatError(Exception):
    """A request the chat refuses, in OpenAI's error vocabulary."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, code=self.code, param=self.param)


def error_body(
    message: str, *, type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape, which its SDKs raise as APIError with this message."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")  # name, tool_calls, refusal...: carried by clients, unused here
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart] | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content or [] if p.type == "text" and p.text)


class ChatRequest(BaseModel):
    """What a chat completion request carries that matters here; OpenAI's other parameters (temperature,
    max_tokens, tools...) are accepted and ignored: the capability decides how its agents think."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field(min_length=1, max_length=128)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: dict[str, Any] | None = None  # {"include_usage": true}: a last chunk with the usage
    conversation_id: str | None = Field(None, pattern=CONVERSATION_ID)
    context: dict[str, Any] | None = None  # the mission's context (a repository, say); kept by the conversation
    wait_seconds: float | None = Field(None, ge=0, le=840)  # how long the client waits, within the server's bound
    user: str | None = Field(None, max_length=256)  # OpenAI's end-user tag: recorded, never an identity
    # `model` names the capability; this names the LLM its mission's every stage asks (an allowed model)
    mission_model: str | None = Field(None, min_length=1, max_length=100)
    # what this message does while the conversation's last mission is still active (default: the capability's)
    multitask_strategy: MultitaskStrategy | None = None

    @field_validator("messages")
    @classmethod
    def _ends_with_a_question(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        if messages[-1].role != "user":
            raise ValueError("the last message must be the user's")
        if not messages[-1].text.strip():
            raise ValueError("the last user message is empty")
        return messages

    @property
    def goal(self) -> str:
        return self.messages[-1].text.strip()

    @property
    def last_reply(self) -> str | None:
        """The last assistant message of the history: it names the conversation it came from."""
        return next((m.text for m in reversed(self.messages[:-1]) if m.role == "assistant"), None)

    def history(self) -> list[dict[str, str]]:
        """The earlier messages as the mission's context: the newest HISTORY_MESSAGES, each cut short."""
        earlier = [m for m in self.messages[:-1] if m.text.strip()]
        return [{"role": m.role, "content": m.text[:HISTORY_CHARS]} for m in earlier[-HISTORY_MESSAGES:]]


def parse_request(body: bytes | str | None) -> ChatRequest:
    """The request, or a ChatError saying what is wrong with it (400; 413 when it is too large)."""
    raw = body.encode() if isinstance(body, str) else body or b""
    if len(raw) > MAX_REQUEST_BYTES:
        raise ChatError(
            413, f"the request is {len(raw)} bytes; at most {MAX_REQUEST_BYTES} are accepted", code="request_too_large"
        )
    try:
        data = json.loads(raw or b"null")
    except ValueError as exc:
        raise ChatError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ChatError(400, "the body must be a JSON object with 'model' and 'messages'")
    try:
        request = ChatRequest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ChatError(400, f"{where}: {first['msg']}" if where else str(first["msg"]), param=where or None) from None
    if len(request.goal) > MAX_GOAL_CHARS:
        raise ChatError(
            413,
            f"the last user message has {len(request.goal)} characters; at most {MAX_GOAL_CHARS}",
            code="request_too_large",
            param="messages",
        )
    return request


def completion(
    completion_id: str,
    model: str,
    content: str,
    *,
    created: int | None = None,
    usage: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `chat.completion` object with one choice."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created if created is not None else int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        **(extra or {}),
    }


def chunk(
    completion_id: str,
    model: str,
    created: int,
    delta: dict[str, Any],
    *,
    finish_reason: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `chat.completion.chunk` object: one delta of the streamed reply."""
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        **(extra or {}),
    }


def sse(data: dict[str, Any] | str, *, event: str | None = None, event_id: str | None = None) -> str:
    """One Server-Sent Event (a dict is sent as compact JSON)."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    head = (f"id: {event_id}\n" if event_id else "") + (f"event: {event}\n" if event else "")
    return head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"
