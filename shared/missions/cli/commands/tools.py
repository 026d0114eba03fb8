"""`missions tools lock` and `missions tools list`: a capability's MCP tools, and the lock that pins their schemas.

Why a command writes the lock: the schema the model is told and arguments are checked against must be one
a person reviewed. `lock` asks each declared server for its declared tools now and writes
`mcp.lock.json` beside capability.toml (a change shows in review as a diff); `lock --check` fails when the
servers no longer match it (for CI), and the runtime refuses a tool whose live schema differs, naming this
command (missions.core.capability.mcp).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from missions.core.capability.mcp import LOCK_FILE, McpLock, McpUnavailable, load_lock

from .._console import fail, out
from .._inputs import capability as load_capability

if TYPE_CHECKING:
    from missions.core.capability.registry import Capability

app = typer.Typer(no_args_is_help=True, help="A capability's MCP tools and their lock (docs/mcp-tool-sources.md).")


@app.command("list")
def list_tools(
    capability: str = typer.Argument(..., help="The capability."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The capability's MCP tools: their ids, servers, risks and whether they are locked."""
    found = load_capability(capability)
    folder = _folder(found)
    lock = load_lock(folder)
    rows = [
        {
            "id": f"{server.name}__{tool}",
            "server": server.name,
            "transport": server.transport,
            "risk": risk,
            "locked": lock.tool(server.name, tool) is not None,
        }
        for server in found.mcp_servers
        for tool, risk in server.tools.items()
    ]
    if as_json:
        out.print_json(data=rows)
        return
    table = Table("tool", "server", "transport", "risk", "locked")
    for row in rows:
        table.add_row(
            str(row["id"]),
            str(row["server"]),
            str(row["transport"]),
            str(row["risk"]),
            "yes" if row["locked"] else "no",
        )
    out.print(table)


@app.command("lock")
def lock(
    capability: str = typer.Argument(..., help="The capability whose MCP servers to ask."),
    check: bool = typer.Option(False, "--check", help="Write nothing; fail when the servers differ from the lock."),
    token: list[str] = typer.Option(
        [], "--token", help="SERVER=TOKEN for an http server (else its token_secret is read from Secrets Manager)."
    ),
) -> None:
    """Ask each declared MCP server for the declared tools and write their schemas to mcp.lock.json."""
    from missions.adapters.mcp_client import McpSessions
    from missions.service.mcp_tools import McpTools

    found = load_capability(capability)
    if not found.mcp_servers:
        fail(f"capability '{capability}' declares no mcp_servers")
    folder = _folder(found)
    tokens = _tokens(token)
    gateway = McpTools(McpSessions(), secrets=_secrets(found, tokens), allow_stdio=True)
    try:
        written = gateway.lock(found.mcp_servers)
    except (McpUnavailable, ValueError) as exc:
        fail(str(exc))
    finally:
        gateway.close()
    path = folder / LOCK_FILE
    if check:
        if _schemas(load_lock(folder)) != _schemas(written):  # as the runtime checks: a new version may match
            fail(f"{path} does not match the servers: run `missions tools lock {capability}` and review the diff", 1)
        out.print(f"{path}: matches the servers")
        return
    path.write_text(written.to_text(), encoding="utf-8")
    count = sum(len(server.tools) for server in written.servers.values())
    out.print(f"wrote {path}: {count} tool(s) of {len(written.servers)} server(s)")


def _schemas(lock: McpLock) -> dict[str, dict[str, Any]]:
    return {server: {t: tool.input_schema for t, tool in s.tools.items()} for server, s in lock.servers.items()}


def _folder(found: Capability) -> Path:
    if found.folder is None:
        fail(f"capability '{found.name}' is built in code: it has no folder for {LOCK_FILE}")
    return found.folder


def _tokens(given: list[str]) -> dict[str, str]:
    tokens = {}
    for item in given:
        server, sep, value = item.partition("=")
        if not sep or not server or not value:
            fail(f"--token takes SERVER=TOKEN, not '{item.split('=')[0]}=…'")
        tokens[server] = value
    return tokens


def _secrets(found: Capability, tokens: dict[str, str]) -> Callable[[str], str]:
    """A token given on the command line by server name, else the secret store (Secrets Manager)."""
    by_secret = {server.token_secret: tokens[server.name] for server in found.mcp_servers if server.name in tokens}

    def read(name: str) -> str:
        if name in by_secret:
            return by_secret[name]
        from missions.adapters.secrets import PowertoolsSecrets

        return PowertoolsSecrets().read(name)

    return read
