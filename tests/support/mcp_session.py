"""An MCP client session (the official Python SDK's) configured as `missions mcp` printed, over any HTTP.

`run_scenario` opens the session and runs the test's scenario in it; `through` lets the client reach an API
that has no socket (the stack deployed into moto, behind tests/support/gateway.py): its requests go to the
given transport function, which answers as API Gateway would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from missions.client import Reply

Scenario = Callable[[ClientSession], Awaitable[Any]]
Transport = Callable[[str, str, Mapping[str, str], bytes | None], Reply]


def run_scenario(entry: Mapping[str, Any], scenario: Scenario, *, through: Transport | None = None) -> Any:
    """`entry` is one server of `missions mcp`'s JSON (`type`, `url`, `headers`)."""
    assert entry["type"] == "http", entry
    headers = dict(entry.get("headers") or {})

    async def session() -> Any:
        http = create_mcp_http_client(headers=headers) if through is None else _client_through(through, headers)
        async with (
            http,
            streamable_http_client(entry["url"], http_client=http) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return await scenario(client)

    return anyio.run(session)


def _client_through(transport: Transport, headers: dict[str, str]) -> httpx.AsyncClient:
    async def handle(request: httpx.Request) -> httpx.Response:
        reply = await anyio.to_thread.run_sync(
            transport, request.method, str(request.url), dict(request.headers), request.content
        )
        return httpx.Response(reply.status, headers=dict(reply.headers), content=reply.body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle), headers=headers, timeout=120)


async def call(client: ClientSession, name: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """A tool's structured result; a tool error fails the test with its text."""
    result = await client.call_tool(name, arguments, **kwargs)
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent
