"""A client of MCP servers (missions.adapters.mcp_client): what the runtime's MCP gateway asks of one.

Every method names the server by its declaration; the client keeps one session per server alive between
calls and reconnects after a failure. Each raises McpUnavailable (missions.core.capability.mcp) with the
reason when the server cannot be started, reached or asked; a tool that ran and failed is not that: it
is a reply with `is_error` set.
"""

from __future__ import annotations

from typing import Any, Protocol

from missions.core.capability.mcp import DiscoveredTool, McpReply, McpServerConfig


class McpClient(Protocol):
    def version(self, server: McpServerConfig, token: str | None) -> str:
        """The server's "name version" (serverInfo), connecting first if need be."""
        ...

    def list_tools(self, server: McpServerConfig, token: str | None) -> dict[str, DiscoveredTool]:
        """Every tool the server offers now, by name (tools/list, all pages)."""
        ...

    def call_tool(
        self, server: McpServerConfig, token: str | None, tool: str, arguments: dict[str, Any], timeout: float
    ) -> McpReply:
        """One tools/call."""
        ...

    def close(self) -> None:
        """End every session (a stdio server's process exits with it)."""
        ...
