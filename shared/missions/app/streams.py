"""The streaming routes (the `stream` function): what API Gateway's HTTP API cannot serve, since it
neither streams nor waits past 30 s. In AWS they are behind the function's URL in response-stream
mode (missions.app.streaming verifies the Cognito token there); locally the dev server sends them.

- GET  /missions/{id}/events/stream  Server-Sent Events of a mission's events, each with its cursor
  as its id; `Last-Event-ID` (or `?after=`) resumes after it; an `end` event closes it when the
  mission ends. A stream stays open at most `stream_max_seconds` (the client reconnects).
- GET  /v1/models, POST /v1/chat/completions  OpenAI's wire format (missions.app.chat_wire): any
  OpenAI client can hold a conversation with any capability. Errors in OpenAI's error shape.

Routes and errors are those of the API (missions.app.resolver): one router, one error mapping, each
error in its route family's shape. A caller without an identity is refused (401) before any routing,
as the HTTP API's authorizer refuses it; a method a route does not take is 405.

A result's body is a string, or an iterator of chunks sent as produced (the dev server and the
function URL both stream it). Comments (`: keep-alive`) keep an idle stream open through proxies.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError

from missions.app.chat_wire import CONVERSATION_HEADER, ChatRequest, chunk, completion, parse_request, sse
from missions.app.cursors import BadCursor, decode_position, encode_position
from missions.app.observability import logger
from missions.app.resolver import STREAM_ERROR_STATUS, Resolver, refusal, user_of
from missions.app.runtime import Runtime
from missions.core.chat import UnknownModel
from missions.core.errors import NotFound
from missions.core.mission.status import TERMINAL
from missions.service.chat import ChatTurn, Progress, Reply

HEARTBEAT_SECONDS = 10.0
_MISSION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
Result = dict[str, Any]

app = Resolver(errors=STREAM_ERROR_STATUS)


def handle(
    event: dict[str, Any],
    context: Any,
    runtime: Runtime,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Result:
    """Route one request (payload v2) to its stream; 401 before routing when it names no user."""
    if user_of(event) is None:
        return refusal(event, 401, "no authenticated user")
    app.context.update(runtime=runtime, monotonic=monotonic, sleep=sleep)
    return app.resolve(event, context)


def _only(rule: str, allowed: str) -> None:
    """A route's other methods are 405, saying which one it takes."""

    def not_allowed(**_: str) -> Response[Any]:
        raise ServiceError(405, f"{app.current_event.http_method} is not allowed here; use {allowed}")

    app.route(rule, [m for m in _METHODS if m != allowed])(not_allowed)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(status, "application/json", body=json.dumps(body, ensure_ascii=False), headers=headers)


def _ambient() -> tuple[Runtime, Callable[[], float], Callable[[float], None]]:
    """What `handle` put into this request's context: a streamed body runs after it is cleared."""
    return app.context["runtime"], app.context["monotonic"], app.context["sleep"]


# -- a mission's event stream ------------------------------------------------------------------------


@app.get("/missions/<mission_id>/events/stream")
def event_stream(mission_id: str) -> Response[Any]:
    if not _MISSION_ID.fullmatch(mission_id):
        raise NotFoundError  # answered as no route, as for a path no route matches
    user = app.current_user()
    runtime, monotonic, sleep = _ambient()
    event = app.current_event
    after = event.headers.get("last-event-id") or (event.query_string_parameters or {}).get("after")
    try:
        record = runtime.missions.get(mission_id)
    except NotFound:
        record = None
    if record is None or record.user_id != user:  # another user's is as missing as one that does not exist
        raise NotFound(f"no mission {mission_id}")
    try:
        position = decode_position(after) if after else None
    except BadCursor as exc:
        return app.error(400, f"Last-Event-ID: {exc}")
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
            if status in TERMINAL:
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

    return Response(200, "text/event-stream", body=body(), headers=dict(_SSE_HEADERS))


_only("/missions/<mission_id>/events/stream", "GET")


# -- the chat API --------------------------------------------------------------------------------


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "missions"}


@app.get("/v1/models")
def models() -> Response[Any]:
    runtime, _, _ = _ambient()
    return _json(200, {"object": "list", "data": [_model(name) for name in runtime.chat.models()]})


@app.get("/v1/models/<name>")
def model(name: str) -> Response[Any]:
    runtime, _, _ = _ambient()
    if name not in runtime.chat.models():
        raise UnknownModel(f"The model '{name}' does not exist")
    return _json(200, _model(name))


@app.post("/v1/chat/completions")
def chat_completions() -> Response[Any]:
    """A chat message as a turn of a conversation (missions.service.chat), answered whole or streamed."""
    user = app.current_user()
    runtime, monotonic, _ = _ambient()
    event = app.current_event
    request = parse_request(_body_of(event.raw_event))
    turn = runtime.chat.begin(user, request, named=event.headers.get(CONVERSATION_HEADER) or None)
    logger().info("chat turn", extra={"conversation_id": turn.conversation_id, "mission_id": turn.mission_id})
    ids = {"x-conversation-id": turn.conversation_id, "x-mission-id": turn.mission_id or turn.awaited or ""}
    wait = min(runtime.settings.chat_wait_seconds, request.wait_seconds if request.wait_seconds is not None else 1e9)
    if request.stream:
        stream = _chat_stream(runtime, turn, request, wait, monotonic)
        return Response(200, "text/event-stream", body=stream, headers={**_SSE_HEADERS, **ids})
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


_only("/v1/models", "GET")
_only("/v1/chat/completions", "POST")


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
