"""`missions mcp`: the configuration an MCP client needs to use missions, for the dev server or a stack.

The endpoint is `<API>/mcp` (streamable HTTP). The configuration carries the token the CLI would call
the API with (`dev:$USER` for `missions dev`; a deployed stack's is the one `missions login` cached,
which expires: print it again after signing in again), unless `--no-token`: a client that speaks MCP's
OAuth then finds the stack's user pool from the endpoint's protected-resource metadata.
"""

from __future__ import annotations

import json
import shlex
from enum import StrEnum
from typing import Any

import typer

from .._console import err, out
from .._target import Target, targeted

app = typer.Typer()


class ClientKind(StrEnum):
    GENERIC = "generic"  # `mcpServers`: Claude Desktop and Code (.mcp.json), Cursor, Windsurf, most others
    VSCODE = "vscode"  # .vscode/mcp.json: `servers`
    CLAUDE_CODE = "claude-code"  # the `claude mcp add` command line


def client_config(name: str, url: str, token: str | None, kind: ClientKind) -> str:
    """What the client reads: JSON, or for Claude Code the command that registers the server."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if kind is ClientKind.CLAUDE_CODE:
        words = ["claude", "mcp", "add", "--transport", "http", name, url]
        for key, value in headers.items():
            words += ["--header", f"{key}: {value}"]
        return shlex.join(words)
    server: dict[str, Any] = {"type": "http", "url": url} | ({"headers": headers} if headers else {})
    root = "servers" if kind is ClientKind.VSCODE else "mcpServers"
    return json.dumps({root: {name: server}}, indent=2)


@app.command("mcp")
@targeted()
def mcp(
    client: ClientKind = typer.Option(ClientKind.GENERIC, "--client", help="The client's configuration format."),
    name: str = typer.Option("missions", "--name", help="The server's name in the client."),
    no_token: bool = typer.Option(
        False, "--no-token", help="Leave the token out: the client signs in itself (MCP's OAuth)."
    ),
    *,
    target: Target,
) -> None:
    """Print an MCP client's configuration for the missions MCP endpoint (the API's /mcp)."""
    if no_token:
        endpoints, token = target.endpoints(), None
    else:
        endpoints, token, _ = target.signed_in()
    url = f"{endpoints.base}/mcp"
    out.print(client_config(name, url, token, client), highlight=False, soft_wrap=True, markup=False)
    if endpoints.stack and token:
        err.print(f"the token expires: after `missions login --env {target.env}`, print this again", highlight=False)
    elif endpoints.stack:
        metadata = f"{endpoints.base}/.well-known/oauth-protected-resource/mcp"
        pool = endpoints.sign_in_url or "the stack's user pool"
        err.print(f"the client signs in at {pool} (app client {endpoints.user_client_id}), found from {metadata}")
