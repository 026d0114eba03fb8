"""docs/mcp-tool-sources.md, run as written: its declarations load, its commands run against the real
mcp-server-git, and its lock excerpt is what the lock holds."""

from __future__ import annotations

import json
import shlex
import tomllib
from typing import Any

import pytest
from typer.testing import CliRunner

from missions.cli import app
from missions.core.capability import registry
from missions.core.capability.config import CapabilityConfig
from missions.core.capability.mcp import LOCK_FILE, McpServerConfig
from tests.support.docs import ROOT, fenced, section, sh_blocks

PAGE = "docs/mcp-tool-sources.md"


def test_every_declaration_on_the_page_is_a_valid_server():
    # Given the page's capability.toml excerpts
    blocks = [tomllib.loads(block) for block in fenced(PAGE, "## Declaring a server", "toml")]
    assert len(blocks) == 2
    # Then each declares a server the runtime accepts, in a capability whose stages name its tools
    for block in blocks:
        (server,) = [McpServerConfig.model_validate(entry) for entry in block["mcp_servers"]]
        config = CapabilityConfig.model_validate(
            {
                **block,
                "name": "example",
                "description": "d",
                "complexity": 1,
                "pipeline": {
                    "agents": [
                        {
                            "name": "work",
                            "has_tools": True,
                            "tool_access": "all",
                            "allowed_tools": server.tool_ids(),
                        }
                    ]
                },
            }
        )
        assert config.mcp_servers == [server]


def test_code_analysis_declares_the_git_server_as_the_page_shows():
    shown = tomllib.loads(fenced(PAGE, "## Declaring a server", "toml")[0])["mcp_servers"][0]
    (declared,) = registry.load("code_analysis").mcp_servers
    assert declared == McpServerConfig.model_validate(shown)


def test_the_lock_commands_run_as_written():
    # Given the page's commands (against the real mcp-server-git)
    (commands,) = sh_blocks(PAGE, "## Locking the schemas")
    assert [line.split()[:3] for line in commands] == [["missions", "tools", "lock"]] * 2 + [
        ["missions", "tools", "list"]
    ]
    before = (ROOT / "capabilities" / "code_analysis" / LOCK_FILE).read_text()
    # When each runs
    outputs = []
    for line in commands:
        result = CliRunner().invoke(app, shlex.split(line)[1:])
        assert result.exit_code == 0, (line, result.output)
        outputs.append(result.output)
    # Then locking again changed nothing (the committed lock is the server's), the check passes, the list shows
    assert (ROOT / "capabilities" / "code_analysis" / LOCK_FILE).read_text() == before
    assert "matches the servers" in outputs[1]
    assert "git__git_log" in outputs[2] and "yes" in outputs[2]


def _within(part: Any, whole: Any) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _within(v, whole[k]) for k, v in part.items())
    return bool(part == whole)


def test_the_lock_excerpt_is_what_the_lock_holds():
    (excerpt,) = fenced(PAGE, "## Locking the schemas", "json")
    lock = json.loads((ROOT / "capabilities" / "code_analysis" / LOCK_FILE).read_text())
    assert _within(json.loads(excerpt), lock)


@pytest.mark.parametrize(
    "said",
    [
        "MCP tool 'git__git_log' changed its input schema since the capability locked it: run `missions tools lock "
        "code_analysis` and review the change",
    ],
)
def test_the_refusal_the_page_quotes_is_the_runtimes(said: str):
    from missions.core.capability.mcp import DiscoveredTool, LockedTool, McpToolRef

    (server,) = registry.load("code_analysis").mcp_servers
    ref = McpToolRef("code_analysis", server, "git_log", LockedTool(input_schema={"type": "object"}))
    refused = ref.refusal({"git_log": DiscoveredTool("git_log", "", {"type": "object", "required": ["x"]})})
    assert refused == said
    assert said.replace("`", "") in section(PAGE, "## Locking the schemas").replace("`", "").replace("\n", " ")
