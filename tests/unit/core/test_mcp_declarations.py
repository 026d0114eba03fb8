"""What a capability declares of its MCP servers (capability.toml `mcp_servers`), and the tools they become."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from missions.core.capability.config import CapabilityConfigError, load_config
from missions.core.capability.mcp import (
    LOCK_FILE,
    LockedServer,
    LockedTool,
    McpLock,
    McpServerConfig,
    load_lock,
    mcp_tools,
    tool_id,
)
from missions.core.capability.tools import RiskLevel

SCHEMA = {"type": "object", "properties": {"repo_path": {"type": "string"}}, "required": ["repo_path"]}

TOML = """
name = "{name}"
description = "d"
complexity = 1
{extra}

[[mcp_servers]]
{server}

[[pipeline.agents]]
name = "work"
has_tools = true
tool_access = "write"
allowed_tools = {allowed}
"""


def write(tmp_path: Path, server: str, allowed: str = '["git__git_log"]', extra: str = "") -> Path:
    folder = tmp_path / "gitcap"
    folder.mkdir(exist_ok=True)
    path = folder / "capability.toml"
    path.write_text(TOML.format(name="gitcap", server=server, allowed=allowed, extra=extra))
    return path


STDIO = (
    'name = "git"\ntransport = "stdio"\ncommand = ["mcp-server-git"]\n'
    'tools = { git_log = "read", git_create_branch = "write" }'
)


def test_a_stage_may_allow_a_declared_mcp_tool_by_its_id(tmp_path: Path):
    config = load_config(write(tmp_path, STDIO, '["git__git_log", "git__git_create_branch"]'))
    assert config.mcp_servers[0].tool_ids() == ["git__git_log", "git__git_create_branch"]


@pytest.mark.parametrize(
    ("server", "allowed", "message"),
    [
        (STDIO, '["git__git_commit"]', "allowed_tools: 'git__git_commit' is not in tools or an MCP server's tools"),
        ('name = "git"\ntransport = "stdio"\ntools = { git_log = "read" }', "[]", "a stdio server needs a command"),
        (
            'name = "git"\ntransport = "http"\nurl = "http://tools.example.com/mcp"\ntools = { git_log = "read" }',
            "[]",
            "url must be https (plain http only to a loopback host)",
        ),
        ('name = "git"\ntransport = "http"\ntools = { git_log = "read" }', "[]", "an http server needs a url"),
        (
            'name = "git"\ntransport = "stdio"\ncommand = ["x"]\ntoken_secret = "s"\ntools = { git_log = "read" }',
            "[]",
            "a stdio server takes no url or token_secret",
        ),
        ('name = "git"\ntransport = "stdio"\ncommand = ["x"]\ntools = { git_log = "admin" }', "[]", "git_log"),
        (
            'name = "my__git"\ntransport = "stdio"\ncommand = ["x"]\ntools = { a = "read" }',
            "[]",
            "mcp_servers.my__git.name",
        ),
        ('name = "git"\ntransport = "stdio"\ncommand = ["x"]\ntools = {}', "[]", "mcp_servers.git.tools"),
        ('name = "git"\ntransport = "stdio"\ncommand = ["x"]\ntools = { "a b" = "read" }', "[]", "invalid tool id"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_field(tmp_path: Path, server: str, allowed: str, message: str):
    with pytest.raises(CapabilityConfigError, match="capability.toml: .*" + _escaped(message)):
        load_config(write(tmp_path, server, allowed))


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


def test_two_servers_of_one_name_are_refused(tmp_path: Path):
    path = write(tmp_path, STDIO, "[]")
    path.write_text(path.read_text().replace("[[pipeline.agents]]", f"[[mcp_servers]]\n{STDIO}\n\n[[pipeline.agents]]"))
    with pytest.raises(CapabilityConfigError, match="a server is named twice"):
        load_config(path)


def test_a_tool_id_is_the_server_and_tool_joined_by_two_underscores():
    assert tool_id("git", "git_log") == "git__git_log"


def server(**more: Any) -> McpServerConfig:
    return McpServerConfig.model_validate(
        {
            "name": "git",
            "transport": "stdio",
            "command": ["x"],
            "tools": {"git_log": "read", "git_reset": "destructive"},
        }
        | more
    )


def test_the_tools_offered_are_the_locked_ones_with_their_declared_risk():
    # Given a lock of one of the two declared tools
    lock = McpLock(
        servers={
            "git": LockedServer(
                version="mcp-git 1", tools={"git_log": LockedTool(description="Log", input_schema=SCHEMA)}
            )
        }
    )
    # When the capability's tools are made
    specs = mcp_tools("gitcap", [server(root_param="repo_path")], lock)
    # Then the model is offered the locked description and schema, and the risk is the declared one
    log, reset = specs["git__git_log"], specs["git__git_reset"]
    assert log.describe() == {
        "id": "git__git_log",
        "description": "Log",
        "category": "read",
        "risk": "read_only",
        "parameters": SCHEMA,
        "source": "mcp:git",
    }
    assert log.root_param == "repo_path" and log.max_retries == 1
    assert reset.risk is RiskLevel.DESTRUCTIVE and reset.max_retries == 0 and reset.once_per_stage
    assert reset.root_param is None  # not locked: no schema names repo_path


def test_a_missing_lock_is_an_empty_lock_and_a_broken_one_says_which_file(tmp_path: Path):
    assert load_lock(tmp_path) == McpLock()
    (tmp_path / LOCK_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=f"{LOCK_FILE}: not a valid MCP lock"):
        load_lock(tmp_path)


def test_a_lock_round_trips_through_its_text(tmp_path: Path):
    lock = McpLock(servers={"git": LockedServer(version="v", tools={"git_log": LockedTool(input_schema=SCHEMA)})})
    (tmp_path / LOCK_FILE).write_text(lock.to_text())
    assert load_lock(tmp_path) == lock
