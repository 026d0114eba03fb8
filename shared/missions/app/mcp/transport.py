"""One MCP request as the SDK's streamable HTTP transport answers it, in a Lambda invocation.

The endpoint is stateless (no `Mcp-Session-Id`: any function instance answers any request, as the HTTP
API spreads them), so each POST gets a fresh `StreamableHTTPSessionManager(stateless=True)` around the
one server built per process. The payload v2 event becomes the ASGI request the SDK reads (the caller
in its scope), and what the SDK sends is gathered into one response: API Gateway sends a response whole,
so a call's progress notifications arrive in its SSE body ahead of its result, in order.

The SDK runs on one event loop per process, in a thread of its own (whatever the calling thread runs);
the API operations a tool calls run in that loop's worker threads.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from missions.app.mcp.caller import Caller
from missions.app.mcp.discovery import MCP_PATH
from missions.app.mcp.server import CALLER_KEY, build_server


@dataclass
class Answer:
    """The SDK's response: its status, headers and body, whole."""

    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@cache
def _server() -> Server[Any, Any]:
    return build_server()


class _Loop:
    """One event loop for the process, in a thread of its own, that every MCP request runs on: a loop per
    request would be made and torn down each time, and Lambda may thaw a function whose loop it kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, event: dict[str, Any], caller: Caller) -> Answer:
        return asyncio.run_coroutine_threadsafe(_serve(event, caller), self._running()).result()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or not self._loop.is_running():
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                loop.call_soon(ready.set)
                threading.Thread(target=loop.run_forever, name="mcp-loop", daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop


_LOOP = _Loop()


def respond(event: dict[str, Any], caller: Caller) -> Answer:
    """The SDK's answer to the MCP request `event` carries, made as `caller`."""
    return _LOOP.run(event, caller)


async def _serve(event: dict[str, Any], caller: Caller) -> Answer:
    answer = Answer()
    done = anyio.Event()
    body = _body(event)
    delivered = False

    async def receive() -> MutableMapping[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client stays until its response is complete
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = int(message["status"])
            answer.headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            answer.body += bytes(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    manager = StreamableHTTPSessionManager(app=_server(), stateless=True, json_response=False)
    async with manager.run():
        await manager.handle_request(_scope(event, caller), receive, send)
    done.set()
    return answer


def _body(event: dict[str, Any]) -> bytes:
    raw = event.get("body") or ""
    return base64.b64decode(raw) if event.get("isBase64Encoded") else str(raw).encode()


def _scope(event: dict[str, Any], caller: Caller) -> dict[str, Any]:
    """The ASGI scope of the request API Gateway received."""
    http = (event.get("requestContext") or {}).get("http") or {}
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    host = headers.get("host") or (event.get("requestContext") or {}).get("domainName") or "localhost"
    scheme = headers.get("x-forwarded-proto", "https" if "." in host and not host[0].isdigit() else "http")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": str(http.get("method") or "POST").upper(),
        "scheme": scheme,
        "path": MCP_PATH,
        "raw_path": MCP_PATH.encode(),
        "root_path": "",
        "query_string": str(event.get("rawQueryString") or "").encode(),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "server": (host.partition(":")[0], 443 if scheme == "https" else 80),
        "client": (str(http.get("sourceIp") or "0.0.0.0"), 0),
        CALLER_KEY: caller,
    }


__all__ = ["MCP_PATH", "Answer", "respond"]
