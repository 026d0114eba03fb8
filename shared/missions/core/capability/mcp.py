"""MCP servers as tool sources: what a capability declares, what it locked, and the tools they become.

A capability names each MCP server it uses in capability.toml (`[[mcp_servers]]`): how to reach it
(stdio: a command, run as a child process, on the dev server and in tests only; http: a streamable HTTP
URL with a secret holding its bearer token) and an allow-list of its tools with each one's risk. A tool
not listed is not callable: the runtime never offers what the server adds later.

Why a lock. The model is told a tool's input schema; a server that changes it (a renamed parameter, a
new required one) would have the runtime send what the server no longer accepts, or accept what the
capability's author never reviewed. So `missions tools lock <capability>` writes each declared tool's
description and input schema to `mcp.lock.json` beside capability.toml; that locked schema is what the
model sees and what arguments are checked against, and a server whose live schema differs is refused
for that tool, with a reason naming the command to run, until the capability is locked again.

A tool's id is `<server>__<tool>`: a valid function name for every model API (`^[A-Za-z0-9_-]{1,64}$`),
and unambiguous because a server's name may not contain `__`.

This module is pure: the client that reaches the servers is a port (missions.ports.mcp), and the runtime's
gateway (missions.service.mcp_tools) does the discovery, the lock check and the call.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from missions.core.capability.tools import RiskLevel, ToolCategory, ToolEnv, ToolError, ToolResult, ToolSpec
from missions.core.pipeline.config import AgentConfig

LOCK_FILE = "mcp.lock.json"
SEPARATOR = "__"
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI, Anthropic and Bedrock accept as a tool's name
SERVER_NAME = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"  # no "__": the id's separator stays unambiguous
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
CONNECT_SECONDS = 15.0  # starting a server and its session (mcp-server-git over stdio: ~0.5 s), beyond a call's own

McpRisk = Literal["read", "write", "destructive"]
RISKS: dict[str, RiskLevel] = {
    "read": RiskLevel.READ_ONLY,
    "write": RiskLevel.WRITE,
    "destructive": RiskLevel.DESTRUCTIVE,
}


def lock_command(capability: str) -> str:
    return f"missions tools lock {capability}"


class McpServerConfig(BaseModel):
    """One `[[mcp_servers]]` entry of capability.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SERVER_NAME, max_length=30)
    transport: Literal["stdio", "http"]
    command: list[str] = Field(default_factory=list, max_length=50)  # stdio: the program and its arguments
    url: str | None = Field(None, max_length=2000)  # http: the streamable HTTP endpoint
    # http: the secret (Secrets Manager name or ARN) holding the bearer token; the stack lets the stage
    # functions of this capability read exactly that secret
    token_secret: str | None = Field(None, max_length=512)
    tools: dict[str, McpRisk] = Field(min_length=1, max_length=100)  # the allow-list: tool -> risk
    # a parameter naming a directory, in every tool that has it: checked against the allowed roots like a
    # repository tool's `repo` (mcp-server-git's `repo_path`)
    root_param: str | None = Field(None, max_length=64)
    timeout_seconds: float = Field(30.0, gt=0, le=900)

    @model_validator(mode="after")
    def _reachable(self) -> McpServerConfig:
        if self.transport == "stdio":
            if not self.command or not self.command[0].strip():
                raise ValueError("a stdio server needs a command")
            if self.url or self.token_secret:
                raise ValueError("a stdio server takes no url or token_secret")
        else:
            if not self.url:
                raise ValueError("an http server needs a url")
            if self.command:
                raise ValueError("an http server takes no command")
            parts = urlsplit(self.url)
            if parts.scheme != "https" and not (parts.scheme == "http" and parts.hostname in LOOPBACK):
                raise ValueError(f"url must be https (plain http only to a loopback host): {self.url}")
        for tool in self.tools:
            if not TOOL_NAME.match(tool_id(self.name, tool)):
                raise ValueError(f"tools: '{tool}' makes an invalid tool id")
        return self

    def tool_ids(self) -> list[str]:
        return [tool_id(self.name, tool) for tool in self.tools]


def tool_id(server: str, tool: str) -> str:
    """The id the catalog, the model and the events know an MCP tool by."""
    return f"{server}{SEPARATOR}{tool}"


@dataclass(frozen=True)
class DiscoveredTool:
    """A tool as a server describes it (tools/list)."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class McpReply:
    """A tools/call result: its text content joined, and whether the server said the call failed."""

    text: str
    is_error: bool
    structured: dict[str, Any] | None = None


class McpUnavailable(Exception):
    """The server could not be reached, started or asked; the message says why."""


class McpTimeout(McpUnavailable):
    """The server did not answer a request in time (it may still be running it: a write is in doubt)."""


class McpGateway(Protocol):
    """What an MCP tool calls through (missions.service.mcp_tools): discovery, the lock check, the call."""

    def call(self, ref: McpToolRef, arguments: dict[str, Any]) -> ToolResult: ...


# -- the lock ------------------------------------------------------------------------------------------


class LockedTool(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    input_schema: dict[str, Any]


class LockedServer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str  # the server's serverInfo "name version" when it was locked (information: a new version
    # with the same schemas is accepted)
    tools: dict[str, LockedTool]


class McpLock(BaseModel):
    """`mcp.lock.json`: the declared tools' schemas, as the capability's author reviewed them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, LockedServer] = Field(default_factory=dict)

    def tool(self, server: str, tool: str) -> LockedTool | None:
        locked = self.servers.get(server)
        return locked.tools.get(tool) if locked is not None else None

    def to_text(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def load_lock(folder: Path) -> McpLock:
    """The lock beside a capability.toml; none written yet is an empty lock (every tool refused, saying why)."""
    path = folder / LOCK_FILE
    try:
        return McpLock.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return McpLock()
    except ValueError as exc:
        raise ValueError(f"{path}: not a valid MCP lock ({exc}); run the lock command again") from None


def locked_server(server: McpServerConfig, version: str, discovered: dict[str, DiscoveredTool]) -> LockedServer:
    """What the lock command writes for a server: each declared tool as the server describes it now."""
    missing = [tool for tool in server.tools if tool not in discovered]
    if missing:
        offered = ", ".join(sorted(discovered)) or "none"
        raise ValueError(f"MCP server '{server.name}' offers no tool {missing} (it offers: {offered})")
    return LockedServer(
        version=version,
        tools={
            tool: LockedTool(description=discovered[tool].description, input_schema=discovered[tool].input_schema)
            for tool in server.tools
        },
    )


def canonical(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


# -- the tools a capability gets -------------------------------------------------------------------------


@dataclass(frozen=True)
class McpToolRef:
    """One declared tool of one server, as its ToolSpec calls it."""

    capability: str
    server: McpServerConfig
    tool: str
    locked: LockedTool | None

    @property
    def id(self) -> str:
        return tool_id(self.server.name, self.tool)

    def refusal(self, discovered: dict[str, DiscoveredTool]) -> str | None:
        """Why this tool may not be called with the server as it is now (None: it may)."""
        fix = f"run `{lock_command(self.capability)}` and review the change"
        if self.locked is None:
            return f"MCP tool '{self.id}' is not locked: {fix}"
        live = discovered.get(self.tool)
        if live is None:
            return f"MCP server '{self.server.name}' no longer offers tool '{self.tool}'"
        if canonical(live.input_schema) != canonical(self.locked.input_schema):
            return f"MCP tool '{self.id}' changed its input schema since the capability locked it: {fix}"
        return None


class _Arguments(BaseModel):
    """An MCP tool's arguments as pydantic sees them: anything; its JSON schema is what checks them."""

    model_config = ConfigDict(extra="allow")


def _call(ref: McpToolRef, params: dict[str, Any], env: ToolEnv) -> ToolResult:
    if env.mcp is None:
        raise ToolError(f"no MCP client is wired: cannot call '{ref.id}'")
    return env.mcp.call(ref, params)


def token_secrets(servers: list[McpServerConfig] | tuple[McpServerConfig, ...], agent: AgentConfig) -> list[str]:
    """The token secrets of the http servers whose tools this stage may call: what its role may read, exactly."""
    if not agent.has_tools:
        return []
    return [
        server.token_secret
        for server in servers
        if server.token_secret is not None
        and (agent.allowed_tools is None or any(tool in agent.allowed_tools for tool in server.tool_ids()))
    ]


def mcp_tools(capability: str, servers: list[McpServerConfig], lock: McpLock) -> dict[str, ToolSpec]:
    """The ToolSpecs of every declared tool: the locked description and schema are what the model sees."""
    specs: dict[str, ToolSpec] = {}
    for server in servers:
        for tool, risk in server.tools.items():
            locked = lock.tool(server.name, tool)
            ref = McpToolRef(capability, server, tool, locked)
            schema = locked.input_schema if locked is not None else {"type": "object"}
            has_root = server.root_param is not None and server.root_param in schema.get("properties", {})
            level = RISKS[risk]
            specs[ref.id] = ToolSpec(
                id=ref.id,
                description=(locked.description if locked is not None else "") or f"{tool} of MCP server {server.name}",
                parameters=_Arguments,
                func=functools.partial(_call, ref),
                category=ToolCategory.READ if level is RiskLevel.READ_ONLY else ToolCategory.WRITE,
                risk=level,
                timeout_seconds=server.timeout_seconds + CONNECT_SECONDS,  # the call's own timeout passes first
                # a read is asked again once (a server restarted between calls); a write never: it may have run
                max_retries=1 if level is RiskLevel.READ_ONLY else 0,
                root_param=server.root_param if has_root else None,
                wants_env=True,
                input_schema=schema,
                source=f"mcp:{server.name}",
            )
    return specs
