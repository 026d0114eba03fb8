"""MCP servers reached with the official SDK's client (mcp.client.stdio, mcp.client.streamable_http).

Why a background loop. The SDK is async and the stage runner is not; starting a server and its session
for every call costs what the call itself does many times over (measured with mcp-server-git over stdio:
see docs/mcp-tool-sources.md), so each server keeps one session alive, owned by one task on one event
loop in a daemon thread, and callers wait on it with a timeout. The task that opened a session is the
one that closes it (the SDK's transports are anyio task groups, which must exit in the task that
entered them), so `close()` asks each task to finish rather than tearing its streams down from outside.

A session that broke (the process exited, the connection dropped) is forgotten and the next call opens a
new one; one idle for a while (a Lambda container frozen between invocations) is pinged before it is
used, so a call is never sent down a dead connection that would leave a write in doubt.

A stdio server runs with the SDK's default environment (PATH, HOME and the like), never this process's
own: a child needs no AWS credentials or model keys.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import hashlib
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TextIO, TypeVar

from mcp import ClientSession, McpError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CONNECTION_CLOSED, TextContent

from missions.core.capability.mcp import (
    CONNECT_SECONDS,
    DiscoveredTool,
    McpReply,
    McpServerConfig,
    McpTimeout,
    McpUnavailable,
)

T = TypeVar("T")

PYTHON = "{python}"  # a stdio command's program: this runtime's own interpreter (a server installed beside it)
IDLE_PING_SECONDS = 30.0  # a session unused this long is pinged before a call goes down it
REQUEST_TIMEOUT = 408  # the code of the SDK's McpError when a request's read timeout passed (httpx's 408)


@dataclass
class _Live:
    session: ClientSession
    version: str
    stop: asyncio.Event
    task: asyncio.Task[None]
    used: float = field(default_factory=time.monotonic)
    broken: bool = False


def _key(server: McpServerConfig, token: str | None = None) -> str:
    """A session per server and credential: two capabilities reaching one URL with different tokens must
    not share a session (the token is hashed, never kept as a key)."""
    if server.url:
        return f"{server.url}#{hashlib.sha256((token or '').encode()).hexdigest()[:16]}"
    return "\0".join(server.command)


class McpSessions:
    """One live session per server (by its command or URL), on a loop of its own; see the module docstring."""

    def __init__(self, *, connect_timeout: float = CONNECT_SECONDS, errlog: TextIO | None = None):
        self._connect_timeout = connect_timeout
        self._errlog = errlog  # where a stdio server's stderr goes (None: this process's stderr)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sessions: dict[str, _Live] = {}
        self._guard = threading.Lock()
        self._opening: dict[str, asyncio.Lock] = {}

    # -- the port (missions.ports.mcp.McpClient) ----------------------------------------------------------

    def version(self, server: McpServerConfig, token: str | None) -> str:
        return self._run(self._live(server, token), self._connect_timeout + 5).version

    def list_tools(self, server: McpServerConfig, token: str | None) -> dict[str, DiscoveredTool]:
        async def listing() -> dict[str, DiscoveredTool]:
            live = await self._live(server, token)
            found: dict[str, DiscoveredTool] = {}
            cursor: str | None = None
            while True:
                page = await self._asked(server, live, live.session.list_tools(cursor))
                for tool in page.tools:
                    found[tool.name] = DiscoveredTool(tool.name, tool.description or "", dict(tool.inputSchema))
                cursor = page.nextCursor
                if not cursor:
                    return found

        return self._run(listing(), self._connect_timeout + server.timeout_seconds)

    def call_tool(
        self, server: McpServerConfig, token: str | None, tool: str, arguments: dict[str, Any], timeout: float
    ) -> McpReply:
        async def calling() -> McpReply:
            live = await self._live(server, token)
            try:
                result = await self._asked(
                    server,
                    live,
                    live.session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=timeout)),
                )
            except McpError as exc:  # the server answered with a JSON-RPC error: it is up, the call failed
                return McpReply(text=exc.error.message, is_error=True)
            text = "\n".join(part.text for part in result.content if isinstance(part, TextContent))
            return McpReply(text=text, is_error=bool(result.isError), structured=result.structuredContent)

        return self._run(calling(), self._connect_timeout + timeout + 5)

    def close(self) -> None:
        """End every session in the task that opened it, then the loop; safe to call twice."""
        with self._guard:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def ending() -> None:
            lives = list(self._sessions.values())
            self._sessions.clear()
            for live in lives:
                live.stop.set()
            if lives:
                await asyncio.wait([live.task for live in lives], timeout=10)

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(ending(), loop).result(15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)

    # -- sessions ---------------------------------------------------------------------------------------

    async def _live(self, server: McpServerConfig, token: str | None) -> _Live:
        key = _key(server, token)
        opening = self._opening.setdefault(key, asyncio.Lock())
        async with opening:  # two first calls to one server open one session
            live = self._sessions.get(key)
            if live is not None and not live.broken and time.monotonic() - live.used > IDLE_PING_SECONDS:
                try:
                    await asyncio.wait_for(live.session.send_ping(), 5)
                except Exception:  # a dead session: forgotten here and opened again below
                    self._forget(live)
                    live = None
            if live is None or live.broken:
                if live is not None:
                    self._forget(live)
                live = await self._open(server, token)
                self._sessions[key] = live
            live.used = time.monotonic()
            return live

    def _forget(self, live: _Live) -> None:
        live.broken = True
        live.stop.set()
        for key in [key for key, kept in self._sessions.items() if kept is live]:
            del self._sessions[key]

    async def _asked(self, server: McpServerConfig, live: _Live, request: Coroutine[Any, Any, T]) -> T:
        """A request on a live session; a closed connection forgets it and says why."""
        try:
            return await request
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self._forget(live)
                raise McpUnavailable(f"MCP server '{server.name}' closed the connection") from exc
            if exc.error.code == REQUEST_TIMEOUT:  # the SDK's read timeout: the next call pings the session first
                live.used = float("-inf")
                raise McpTimeout(f"MCP server '{server.name}' did not answer: {exc.error.message}") from exc
            raise
        except (OSError, EOFError) as exc:
            self._forget(live)
            raise McpUnavailable(f"MCP server '{server.name}' is unreachable: {type(exc).__name__}: {exc}") from exc

    async def _open(self, server: McpServerConfig, token: str | None) -> _Live:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[ClientSession, str]] = loop.create_future()
        stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._transport(server, token))
                    session = await stack.enter_async_context(ClientSession(read, write))
                    started = await session.initialize()
                    ready.set_result((session, f"{started.serverInfo.name} {started.serverInfo.version}"))
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(McpUnavailable(f"MCP server '{server.name}' did not start: {_reason(exc)}"))
                elif not isinstance(exc, asyncio.CancelledError):
                    for live in list(self._sessions.values()):
                        if live.stop is stop:
                            live.broken = True
                if isinstance(exc, asyncio.CancelledError):
                    raise

        task = loop.create_task(hold(), name=f"mcp:{server.name}")
        try:
            session, version = await asyncio.wait_for(asyncio.shield(ready), self._connect_timeout)
        except TimeoutError:
            stop.set()
            task.cancel()
            raise McpUnavailable(f"MCP server '{server.name}' did not answer within {self._connect_timeout}s") from None
        return _Live(session, version, stop, task)

    @contextlib.asynccontextmanager
    async def _transport(self, server: McpServerConfig, token: str | None) -> AsyncIterator[tuple[Any, Any]]:
        if server.transport == "stdio":
            program = sys.executable if server.command[0] == PYTHON else server.command[0]
            params = StdioServerParameters(command=program, args=list(server.command[1:]))
            async with stdio_client(params, errlog=_with_fileno(self._errlog or sys.stderr)) as (read, write):
                yield read, write
            return
        assert server.url is not None  # the config requires it for http
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(server.url, http_client=http) as (read, write, _),
        ):
            yield read, write

    # -- the loop -----------------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._started())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpTimeout(f"no answer within {timeout:g}s") from None

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._guard:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="mcp-sessions", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                atexit.register(self.close)
            return self._loop


def _with_fileno(stream: TextIO) -> TextIO:
    """A child's stderr must be a real file: a captured stream (a test runner's, a CLI runner's) is not, so
    the server's stderr goes to this process's original one."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or stream
    return stream


def _reason(exc: BaseException) -> str:
    """The first real error inside the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
