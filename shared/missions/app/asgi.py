"""Sending a Lambda proxy result over ASGI, the one way both servers do it: the stream function's web
server in AWS (missions.app.streaming) and `missions dev` (missions.local.devserver).

A handler answers with a payload v2 proxy result whose body is a string, or an iterator of chunks
(bytes or str). A whole body goes out with its Content-Length; an iterator is sent chunk by chunk as
it is produced, each chunk pulled in a worker thread (the handler's code blocks), so the event loop
never waits on it. A client that leaves is noticed between chunks, and the iterator is then closed
(its `finally` runs), even when the server stops mid-stream.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

ASGIScope = MutableMapping[str, Any]
ASGIMessage = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[ASGIMessage]]
Send = Callable[[ASGIMessage], Awaitable[None]]

# set by the server for the response as a whole; a handler's own would contradict it
_HOP_HEADERS = ("content-length", "connection", "transfer-encoding")

_log = logging.getLogger(__name__)


@dataclass
class Reply:
    """A response: its body whole (bytes), or a stream of chunks sent as they come."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | Iterator[bytes] = b""

    def whole(self) -> bytes:
        """The body, a stream read to its end."""
        return self.body if isinstance(self.body, bytes) else b"".join(self.body)


def reply_of(result: Any) -> Reply:
    """A payload v2 proxy result as the response API Gateway would send: a body that is an iterator
    is streamed, chunk by chunk; a JSON value (not a string) is sent as JSON."""
    if not isinstance(result, dict):
        raise TypeError(f"the handler returned {type(result).__name__}, not a proxy result")
    headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items() if str(k).lower() not in _HOP_HEADERS]
    headers += [("set-cookie", str(cookie)) for cookie in result.get("cookies") or []]
    status = int(result.get("statusCode", 200))
    payload = result.get("body") or ""
    if isinstance(payload, Iterable) and not isinstance(payload, str | bytes | bytearray | dict | list):
        return Reply(status, headers, _chunks(payload))
    if result.get("isBase64Encoded"):
        data = base64.b64decode(payload)
    elif isinstance(payload, str):
        data = payload.encode()
    elif isinstance(payload, bytes | bytearray):
        data = bytes(payload)
    else:
        data = json.dumps(payload).encode()
    return Reply(status, headers, data)


async def send_reply(
    reply: Reply, send: Send, receive: Receive, *, limiter: anyio.CapacityLimiter | None = None
) -> None:
    """The reply, whole or streamed (see `_stream`); `limiter` bounds the chunks produced at once."""
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers]
    if isinstance(reply.body, bytes):
        headers.append((b"content-length", str(len(reply.body)).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body, "more_body": False})
        return
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await _stream(reply.body, send, receive, limiter=limiter)


async def _stream(
    chunks: Iterator[bytes], send: Send, receive: Receive, *, limiter: anyio.CapacityLimiter | None = None
) -> None:
    """Each chunk as it is produced (pulled in a worker thread: the handler's code blocks); the client
    leaving stops the pulling, and the iterator is closed once its chunk in flight has returned."""
    gone = anyio.Event()

    async def watch() -> None:  # the request was read whole: the next message is the client leaving
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    completed = False
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        try:
            while not gone.is_set():
                chunk = await anyio.to_thread.run_sync(next, chunks, None, limiter=limiter)
                if chunk is None:
                    completed = True
                    break
                if chunk and not gone.is_set():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except OSError:  # the connection broke under a send: the client is gone
            gone.set()
        except Exception:  # the status is sent already: the response is cut short, as a failed stream is
            _log.exception("a streamed response failed")
        finally:
            with anyio.CancelScope(shield=True):  # closed even when the server stops mid-stream
                await anyio.to_thread.run_sync(_close, chunks, limiter=limiter)
        if completed and not gone.is_set():
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        tasks.cancel_scope.cancel()
    # not completed: the app returns with the response open, and the server closes the connection


def _close(chunks: Iterator[Any]) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


def _chunks(payload: Iterable[Any]) -> Iterator[bytes]:
    iterator = iter(payload)
    try:
        for chunk in iterator:
            yield chunk.encode() if isinstance(chunk, str) else bytes(chunk)
    finally:
        _close(iterator)


__all__ = ["ASGIMessage", "ASGIScope", "Receive", "Reply", "Send", "reply_of", "send_reply"]
