"""The runtime's MCP gateway: every call of a capability's MCP tool goes through here.

It discovers the declared server's tools (tools/list, once per server and version: a restarted server
reporting another version is asked again), refuses a tool whose live input schema is not the one the
capability locked (missions.core.capability.mcp), reads an http server's token from the secret store when
first needed, and makes the call. The executor around it (missions.core.capability.tools) has already
checked access, the arguments against the locked schema, the approval and the stage's journal; what comes
back is a ToolResult like any tool's, so events and tool health see MCP tools as they see the others.

A stdio server is a child process of the runtime: allowed on the dev server and in tests (`mcp_stdio`),
refused in Lambda with that reason, where a server is an http endpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from missions.core.capability.mcp import (
    DiscoveredTool,
    McpLock,
    McpServerConfig,
    McpTimeout,
    McpToolRef,
    McpUnavailable,
    locked_server,
)
from missions.core.capability.tools import ToolError, ToolResult, TransientToolError
from missions.ports.mcp import McpClient


class McpTools:
    """Implements missions.core.capability.mcp.McpGateway over an McpClient."""

    def __init__(
        self,
        client: McpClient,
        *,
        secrets: Callable[[str], str] | None = None,
        allow_stdio: bool = False,
    ):
        self._client = client
        self._secrets = secrets
        self._allow_stdio = allow_stdio
        self._discovered: dict[tuple[str, str], dict[str, DiscoveredTool]] = {}
        self._guard = threading.Lock()

    def call(self, ref: McpToolRef, arguments: dict[str, Any]) -> ToolResult:
        server = ref.server
        self._check_transport(server)
        token = self._token(server)
        try:
            refused = ref.refusal(self._tools(server, token))
            if refused:
                raise ToolError(refused)
            reply = self._client.call_tool(server, token, ref.tool, arguments, server.timeout_seconds)
        except McpTimeout as exc:  # as the executor's own timeout: status "timeout", a read asked again once
            raise TimeoutError(str(exc)) from exc
        except McpUnavailable as exc:  # a read is asked again once (ToolSpec.max_retries); a write never is
            raise TransientToolError(str(exc)) from exc
        if reply.is_error:
            return ToolResult.fail(f"MCP server '{server.name}' refused {ref.tool}: {reply.text or 'no reason given'}")
        data: dict[str, Any] = {"text": reply.text}
        if reply.structured is not None:
            data["structured"] = reply.structured
        return ToolResult.ok(data)

    def lock(self, servers: Iterable[McpServerConfig]) -> McpLock:
        """The lock of these servers' declared tools as they are now (`missions tools lock`)."""
        locked = {}
        for server in servers:
            self._check_transport(server)
            token = self._token(server)
            version = self._client.version(server, token)
            locked[server.name] = locked_server(server, version, self._client.list_tools(server, token))
        return McpLock(servers=locked)

    def close(self) -> None:
        self._client.close()

    def _tools(self, server: McpServerConfig, token: str | None) -> dict[str, DiscoveredTool]:
        """The server's tools, asked once per server and version."""
        key = (server.url or " ".join(server.command), self._client.version(server, token))
        with self._guard:
            known = self._discovered.get(key)
        if known is None:
            known = self._client.list_tools(server, token)
            with self._guard:
                self._discovered[key] = known
        return known

    def _check_transport(self, server: McpServerConfig) -> None:
        if server.transport == "stdio" and not self._allow_stdio:
            raise ToolError(
                f"refused: MCP server '{server.name}' runs as a child process (stdio), which only the dev server "
                "and tests allow; in AWS a capability reaches an MCP server over streamable HTTP (transport = "
                '"http", a url and a token_secret)'
            )

    def _token(self, server: McpServerConfig) -> str | None:
        if server.token_secret is None:
            return None
        if self._secrets is None:
            raise ToolError(f"MCP server '{server.name}': no secret store is wired to read its token")
        try:
            return self._secrets(server.token_secret)
        except Exception as exc:  # the reason names the secret, never its value
            raise ToolError(
                f"MCP server '{server.name}': cannot read its token secret '{server.token_secret}': "
                f"{type(exc).__name__}"
            ) from exc
