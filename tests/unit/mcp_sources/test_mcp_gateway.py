"""The MCP gateway's rules over an in-memory client: discovery once per server version, a server that is
down, stdio refused outside the dev server and tests, tokens read by secret name, and what tool health
shows. The same rules hold over real servers (test_mcp_conformance.py, test_mcp_transports.py)."""

from __future__ import annotations

from typing import Any

import pytest

from missions.core.capability.mcp import (
    DiscoveredTool,
    McpLock,
    McpReply,
    McpServerConfig,
    McpUnavailable,
    mcp_tools,
)
from missions.core.capability.tools import ToolCatalog, ToolEnv, ToolExecutor, ToolResult, call_id
from missions.core.mission.events import Event, EventType
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.service.health import tool_health
from missions.service.mcp_tools import McpTools

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
AGENT = AgentConfig(name="worker", has_tools=True, tool_access=ToolAccess.WRITE)


class MemoryMcpClient:
    """A client of servers that live in this process: what each offers, at which version, and whether up."""

    def __init__(self) -> None:
        self.versions: dict[str, str] = {}
        self.tools: dict[str, dict[str, DiscoveredTool]] = {}
        self.down: set[str] = set()
        self.listed: list[str] = []
        self.calls: list[tuple[str, str, dict[str, Any], str | None]] = []
        self.closed = False

    def offer(self, server: str, version: str = "1", schema: dict[str, Any] | None = None) -> None:
        self.versions[server] = version
        self.tools[server] = {
            name: DiscoveredTool(name, f"{name} things", schema or SCHEMA) for name in ("search", "save")
        }

    def _up(self, server: McpServerConfig) -> None:
        if server.name in self.down:
            raise McpUnavailable(f"MCP server '{server.name}' did not start: connection refused")

    def version(self, server: McpServerConfig, token: str | None) -> str:
        self._up(server)
        return self.versions[server.name]

    def list_tools(self, server: McpServerConfig, token: str | None) -> dict[str, DiscoveredTool]:
        self._up(server)
        self.listed.append(server.name)
        return dict(self.tools[server.name])

    def call_tool(
        self, server: McpServerConfig, token: str | None, tool: str, arguments: dict[str, Any], timeout: float
    ) -> McpReply:
        self._up(server)
        self.calls.append((server.name, tool, arguments, token))
        if arguments.get("q") == "boom":
            return McpReply("the index is corrupt", is_error=True)
        return McpReply(f"{tool}: {arguments['q']}", is_error=False)

    def close(self) -> None:
        self.closed = True


def declared(transport: str = "http", **more: Any) -> McpServerConfig:
    where = {"url": "https://tools.example.com/mcp", "token_secret": "prod/search-token"}
    if transport == "stdio":
        where = {"command": ["search-server"]}
    return McpServerConfig.model_validate(
        {"name": "search", "transport": transport, "tools": {"search": "read", "save": "write"}, **where, **more}
    )


def run(
    client: MemoryMcpClient, server: McpServerConfig, *, allow_stdio: bool = False, **options: Any
) -> tuple[ToolExecutor, McpTools]:
    secrets = {"prod/search-token": "s3cret"}
    gateway = McpTools(client, secrets=secrets.__getitem__, allow_stdio=allow_stdio)
    lock = gateway.lock([server]) if server.name not in client.down else McpLock()
    executor = ToolExecutor(
        catalog=ToolCatalog(mcp_tools("searcher", [server], lock)),
        agent=AGENT,
        env=ToolEnv("m-1", "u-1", secrets.__getitem__, gateway),
        sleep=lambda seconds: None,
        **options,
    )
    return executor, gateway


def test_tools_are_discovered_once_per_server_version():
    # Given a server, locked
    client = MemoryMcpClient()
    client.offer("search", version="1")
    executor, _ = run(client, declared())
    client.listed.clear()
    # When a tool is called three times
    for q in ("a", "b", "c"):
        assert executor.execute("search__search", {"q": q}).status == "success"
    # Then the server was asked for its tools once
    assert client.listed == ["search"]
    # and when it reports another version (it was upgraded), it is asked again, once
    client.versions["search"] = "2"
    executor.execute("search__search", {"q": "d"})
    executor.execute("search__search", {"q": "e"})
    assert client.listed == ["search", "search"]


def test_an_http_servers_token_is_read_from_its_secret_and_sent():
    client = MemoryMcpClient()
    client.offer("search")
    executor, _ = run(client, declared())
    result = executor.execute("search__search", {"q": "tides"})
    assert result == ToolResult.ok({"text": "search: tides"})
    assert client.calls[-1] == ("search", "search", {"q": "tides"}, "s3cret")


def test_a_token_that_cannot_be_read_fails_the_call_naming_the_secret_not_its_value():
    client = MemoryMcpClient()
    client.offer("search")
    server = declared(token_secret="prod/missing")
    gateway = McpTools(client, secrets={"prod/search-token": "s3cret"}.__getitem__)
    lock = McpTools(client, secrets=lambda name: "t").lock([server])
    executor = ToolExecutor(
        catalog=ToolCatalog(mcp_tools("searcher", [server], lock)), agent=AGENT, env=ToolEnv("m", "u", str, gateway)
    )
    result = executor.execute("search__search", {"q": "x"})
    assert result.status == "error"
    assert result.error == "MCP server 'search': cannot read its token secret 'prod/missing': KeyError"


def test_a_server_that_is_down_fails_the_call_with_the_reason_and_tool_health_shows_it():
    # Given a server that was locked, then went down
    client = MemoryMcpClient()
    client.offer("search")
    executor, _ = run(client, declared())
    client.down.add("search")
    # When a read and a write (approved) are called
    read = executor.execute("search__search", {"q": "x"})
    executor.approvals.update({call_id("search__save", {"q": "y"}): True})
    write = executor.execute("search__save", {"q": "y"})
    # Then both failed with the reason; the read was tried again once, the write never (it may have run)
    assert read.status == "error" and "did not start: connection refused (after 2 attempts)" in (read.error or "")
    assert write.status == "error" and "(after 1 attempts)" in (write.error or "")
    assert [call.attempts for call in executor.calls] == [2, 1]
    # and the tools' health, read from the events the runner emits for these calls, shows the failures
    events = [
        Event(
            mission_id="m-1",
            type=EventType.TOOL_COMPLETED,
            payload={"tool": call.tool_id, "status": call.result.status, "duration_ms": call.duration_ms},
        )
        for call in executor.calls
    ]
    health = {row["tool"]: row for row in tool_health(events)}
    assert health["search__search"]["errors"] == 1 and health["search__save"]["error_rate"] == 1.0


def test_an_error_the_server_reports_fails_the_call_with_its_message():
    client = MemoryMcpClient()
    client.offer("search")
    executor, _ = run(client, declared())
    result = executor.execute("search__search", {"q": "boom"})
    assert result.status == "error"
    assert result.error == "MCP server 'search' refused search: the index is corrupt"


def test_a_stdio_server_is_refused_where_child_processes_are_not_allowed():
    # Given a stdio server, locked on a developer's machine
    client = MemoryMcpClient()
    client.offer("search")
    server = declared("stdio")
    lock = McpTools(client, allow_stdio=True).lock([server])
    # When it is called in Lambda (the gateway does not allow stdio)
    executor = ToolExecutor(
        catalog=ToolCatalog(mcp_tools("searcher", [server], lock)),
        agent=AGENT,
        env=ToolEnv("m", "u", str, McpTools(client)),
    )
    result = executor.execute("search__search", {"q": "x"})
    # Then it is refused with the reason and what to declare instead, and the server never heard of it
    assert result.status == "error"
    assert "runs as a child process (stdio), which only the dev server and tests allow" in (result.error or "")
    assert 'transport = "http"' in (result.error or "")
    assert client.calls == []


def test_a_tool_not_locked_is_refused_naming_the_command():
    client = MemoryMcpClient()
    client.offer("search")
    server = declared()
    executor = ToolExecutor(
        catalog=ToolCatalog(mcp_tools("searcher", [server], McpLock())),
        agent=AGENT,
        env=ToolEnv("m", "u", lambda name: "t", McpTools(client, secrets=lambda name: "t")),
    )
    result = executor.execute("search__search", {"q": "x"})
    assert result.status == "error"
    assert (
        result.error
        == "MCP tool 'search__search' is not locked: run `missions tools lock searcher` and review the change"
    )


def test_a_tool_the_server_dropped_is_refused():
    client = MemoryMcpClient()
    client.offer("search")
    executor, _ = run(client, declared())
    del client.tools["search"]["save"]
    client.versions["search"] = "2"
    executor.approvals.update({call_id("search__save", {"q": "y"}): True})
    result = executor.execute("search__save", {"q": "y"})
    assert result.error == "MCP server 'search' no longer offers tool 'save'"


def test_no_gateway_wired_fails_the_call_with_that_reason():
    executor = ToolExecutor(catalog=ToolCatalog(mcp_tools("searcher", [declared()], McpLock())), agent=AGENT)
    result = executor.execute("search__search", {"q": "x"})
    assert result.error == "no MCP client is wired: cannot call 'search__search'"


def test_locking_a_tool_the_server_does_not_offer_says_what_it_offers():
    client = MemoryMcpClient()
    client.offer("search")
    server = declared().model_copy(update={"tools": {"search": "read", "delete": "destructive"}})
    with pytest.raises(ValueError, match=r"offers no tool \['delete'\] \(it offers: save, search\)"):
        McpTools(client, secrets=lambda name: "t").lock([server])


def test_closing_the_gateway_closes_its_client():
    client = MemoryMcpClient()
    McpTools(client).close()
    assert client.closed
