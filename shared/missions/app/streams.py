"""The streaming routes (the `stream` function): what API Gateway's HTTP API cannot serve, since it
neither streams nor waits past 30 s. In AWS they are behind the function's URL in response-stream
mode (missions.app.streaming verifies the Cognito token there); locally the dev server sends them.

- GET  /missions/{id}/events/stream  Server-Sent Events of a mission's events, each with its cursor
  as its id; `Last-Event-ID` (or `?after=`) resumes after it; an `end` event closes it when the
  mission ends. A stream stays open at most `stream_max_seconds` (the client reconnects).
- GET  /v1/models, POST /v1/chat/completions  OpenAI's wire format (missions.app.chat_wire): any
  OpenAI client can hold a conversation with any capability. Errors in OpenAI's error shape.

A result's body is a string, or an iterator of chunks sent as produced (the dev server and the
function URL both stream it). Comments (`: keep-alive`) keep an idle stream open through proxies.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import ValidationError

from missions.app.chat_wire import (
    CONVERSATION_HEADER,
    ChatError,
    ChatRequest,
    chunk,
    completion,
    error_body,
    parse_request,
    sse,
)
from missions.app.cursors import BadCursor, decode_position, encode_position
from missions.app.observability import logger
from missions.app.runtime import Runtime
from missions.core.chat import UnknownConversation, UnknownModel
from missions.core.errors import ConflictError, DependencyUnavailable, MissionRequestError, NotFound
from missions.ports.store import MissionStatus
from missions.service.chat import ChatTurn, Progress, Reply

HEARTBEAT_SECONDS = 10.0
_EVENTS_PATH = re.compile(r"^/missions/([A-Za-z0-9_.:-]{1,128})/events/stream$")
_SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no"}
Result = dict[str, Any]


def handle(
    event: dict[str, Any],
    runtime: Runtime,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Result:
    """Route one request (payload v2) to its stream; 404 for a path this function does not serve."""
    context = event.get("requestContext") or {}
    method = str((context.get("http") or {}).get("method", "GET")).upper()
    path = str(event.get("rawPath") or "/")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    openai = path.startswith("/v1/")
    user = _user(context)
    if user is None:
        return (
            _openai_error(401, "no authenticated user", code="invalid_api_key")
            if openai
            else _error(401, "no authenticated user")
        )
    try:
        if openai:
            return _openai(method, path, event, headers, user, runtime, monotonic, sleep)
        found = _EVENTS_PATH.match(path)
        if found is None:
            return _error(404, f"no route {method} {path}")
        if method != "GET":
            return _error(405, f"{method} is not allowed here; use GET")
        query = event.get("queryStringParameters") or {}
        after = headers.get("last-event-id") or query.get("after")
        return _event_stream(runtime, user, found.group(1), after, monotonic, sleep)
    except DependencyUnavailable as exc:
        message = f"{exc}; nothing was stored, retry later"
        if openai:
            return _openai_error(503, message, type="server_error", code="service_unavailable")
        return _error(503, message)


def _user(context: dict[str, Any]) -> str | None:
    claims = ((context.get("authorizer") or {}).get("jwt") or {}).get("claims") or {}
    user = claims.get("sub")
    if not isinstance(user, str) or not user or "#" in user or len(user) > 256:
        return None
    return user


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Result:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json", **(headers or {})},
        "body": json.dumps(body, ensure_ascii=False),
    }


def _error(status: int, message: str) -> Result:
    return _json(status, {"statusCode": status, "message": message})


def _openai_error(status: int, message: str, **kind: Any) -> Result:
    return _json(status, error_body(message, **kind))


# -- a mission's event stream ------------------------------------------------------------------------


def _event_stream(
    runtime: Runtime,
    user: str,
    mission_id: str,
    after: str | None,
    monotonic: Callable[[], float],
    sleep: Callable[[float], None],
) -> Result:
    try:
        record = runtime.missions.get(mission_id)
    except NotFound:
        record = None
    if record is None or record.user_id != user:  # another user's is as missing as one that does not exist
        return _error(404, f"no mission {mission_id}")
    try:
        position = decode_position(after) if after else None
    except BadCursor as exc:
        return _error(400, f"Last-Event-ID: {exc}")
    settings = runtime.settings

    def body() -> Iterator[str]:
        cursor, opened, beat = position, monotonic(), monotonic()
        while True:
            events, last = runtime.events.read(mission_id, after=cursor, limit=200)
            for event in events:
                ident = encode_position(event.position) if event.position else None
                yield sse(event.model_dump(mode="json"), event_id=ident)
            cursor = last or cursor
            if events:
                beat = monotonic()
                continue
            status = runtime.missions.get(mission_id).status
            if status in MissionStatus.TERMINAL:
                if runtime.events.read(mission_id, after=cursor, limit=1)[0]:
                    continue  # written as it ended: sent before the end
                yield sse({"mission_id": mission_id, "status": status}, event="end")
                return
            if monotonic() - opened >= settings.stream_max_seconds:
                return  # the client reconnects with the last id it saw
            if monotonic() - beat >= HEARTBEAT_SECONDS:
                beat = monotonic()
                yield ": keep-alive\n\n"
            sleep(settings.stream_poll_seconds)

    return {"statusCode": 200, "headers": dict(_SSE_HEADERS), "body": body()}


# -- the chat API --------------------------------------------------------------------------------


def _openai(
    method: str,
    path: str,
    event: dict[str, Any],
    headers: dict[str, str],
    user: str,
    runtime: Runtime,
    monotonic: Callable[[], float],
    sleep: Callable[[float], None],
) -> Result:
    if path == "/v1/models":
        if method != "GET":
            return _openai_error(405, f"{method} is not allowed here; use GET")
        models = [
            {"id": name, "object": "model", "created": 0, "owned_by": "missions"} for name in runtime.chat.models()
        ]
        return _json(200, {"object": "list", "data": models})
    if path.startswith("/v1/models/") and method == "GET":
        name = path.removeprefix("/v1/models/")
        if name not in runtime.chat.models():
            return _openai_error(404, f"The model '{name}' does not exist", code="model_not_found")
        return _json(200, {"id": name, "object": "model", "created": 0, "owned_by": "missions"})
    if path != "/v1/chat/completions":
        return _openai_error(404, f"no route {method} {path}", code="unknown_url")
    if method != "POST":
        return _openai_error(405, f"{method} is not allowed here; use POST")
    try:
        request = parse_request(_body_of(event))
        turn = runtime.chat.begin(user, request, named=headers.get(CONVERSATION_HEADER) or None)
    except ChatError as exc:
        return _json(exc.status, exc.body())
    except UnknownModel as exc:
        return _openai_error(404, str(exc), code="model_not_found", param="model")
    except UnknownConversation as exc:
        return _openai_error(404, str(exc), code="conversation_not_found", param="conversation_id")
    except (MissionRequestError, ValidationError, ValueError) as exc:
        return _openai_error(400, str(exc))
    except NotFound as exc:
        return _openai_error(404, str(exc))
    except ConflictError as exc:
        return _openai_error(409, str(exc))
    logger().info("chat turn", extra={"conversation_id": turn.conversation_id, "mission_id": turn.mission_id})
    ids = {"x-conversation-id": turn.conversation_id, "x-mission-id": turn.mission_id or turn.awaited or ""}
    wait = min(runtime.settings.chat_wait_seconds, request.wait_seconds if request.wait_seconds is not None else 1e9)
    if request.stream:
        return {
            "statusCode": 200,
            "headers": {**_SSE_HEADERS, **ids},
            "body": _chat_stream(runtime, turn, request, wait, monotonic),
        }
    reply = next(step for step in runtime.chat.follow(turn, wait) if isinstance(step, Reply))
    return _json(
        200,
        completion(
            turn.completion_id,
            request.model,
            reply.content,
            created=turn.created,
            usage=reply.usage,
            extra=_about(turn, reply),
        ),
        ids,
    )


def _about(turn: ChatTurn, reply: Reply) -> dict[str, Any]:
    """What the chat adds to OpenAI's objects: which conversation and mission, and where it stands."""
    return {"conversation_id": turn.conversation_id, "mission_id": reply.mission_id, "mission_status": reply.status}


def _body_of(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        import base64

        return base64.b64decode(body)
    return body.encode() if isinstance(body, str) else bytes(body)


def _chat_stream(
    runtime: Runtime, turn: ChatTurn, request: ChatRequest, wait: float, monotonic: Callable[[], float]
) -> Iterator[str]:
    """The reply as OpenAI's chunks: the role at once, progress as `reasoning_content` (where clients
    show a model's thinking; it never joins the answer a client sends back), the answer, the end."""

    def piece(delta: dict[str, Any], **more: Any) -> str:
        return sse(chunk(turn.completion_id, request.model, turn.created, delta, **more))

    yield piece({"role": "assistant", "content": ""})
    beat = monotonic()
    for step in runtime.chat.follow(turn, wait):
        if isinstance(step, Progress):
            beat = monotonic()
            yield piece({"reasoning_content": step.text + "\n"})
        elif isinstance(step, Reply):
            yield piece({"content": step.content})
            yield piece({}, finish_reason="stop", extra=_about(turn, step))
            if (request.stream_options or {}).get("include_usage"):
                yield sse(
                    {
                        "id": turn.completion_id,
                        "object": "chat.completion.chunk",
                        "created": turn.created,
                        "model": request.model,
                        "choices": [],
                        "usage": step.usage,
                    }
                )
            yield "data: [DONE]\n\n"
            return
        elif monotonic() - beat >= HEARTBEAT_SECONDS:
            beat = monotonic()
            yield ": keep-alive\n\n"
