"""A capability calls a real third-party MCP server's write tool with approval: branch_maker and
mcp-server-git's git_create_branch. The mission asks, the user answers; the effect is read with dulwich."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from missions.core.capability import registry
from missions.core.capability.mcp import McpUnavailable
from missions.core.capability.tools import call_id
from missions.core.mission.events import EventType
from missions.service.health import tool_health
from missions.service.mcp_tools import McpTools
from tests.support.driver import DirectDriver
from tests.support.mcp_servers import branches, gateway, git_repo


@pytest.fixture
def driver() -> Iterator[DirectDriver]:
    capability = registry.Registry(package="tests.support.mcp_capabilities", plugins=dict).load("branch_maker")
    driver = DirectDriver(capability)
    with gateway() as mcp:
        driver.services.mcp = mcp
        yield driver


def test_an_approved_write_runs_exactly_once(driver: DirectDriver, tmp_path: Path):
    # Given a repository with one branch
    repo = git_repo(tmp_path / "repo", [("first", {"a.py": "x = 1\n"})])
    # When a mission asks to create a branch and the user approves
    env = driver.run("make a branch", context={"repo": str(repo), "branch": "feature"}, answers=[{"approved": True}])
    # Then the mission asked first, naming the tool and its risk
    assert env.answers[0]["kind"] == "confirmation"
    asked = {"repo_path": str(repo), "branch_name": "feature"}
    assert env.approvals == {call_id("git__git_create_branch", asked): True}
    # and the branch exists, created once: the server's own answer is the output
    assert branches(repo) == {"main", "feature"}
    assert env.outputs["branch"]["status"] == "success"
    assert env.outputs["branch"]["said"] == "Created branch 'feature' from 'main'"
    assert "feature" in env.outputs["branch"]["branches"]
    # and the events record each call with its source: the write started once, after the answer
    events, _ = driver.stores.events.read(env.mission_id, limit=1000)
    started = [e.payload for e in events if e.type is EventType.TOOL_STARTED]
    assert [p["tool"] for p in started] == ["git__git_create_branch", "git__git_branch"]
    assert {p["source"] for p in started} == {"mcp:git"}
    health = {row["tool"]: row for row in tool_health(events)}
    assert health["git__git_create_branch"]["calls"] == 1 and health["git__git_create_branch"]["errors"] == 0


def test_a_declined_write_leaves_the_repository_untouched(driver: DirectDriver, tmp_path: Path):
    # Given a repository
    repo = git_repo(tmp_path / "repo", [("first", {"a.py": "x = 1\n"})])
    # When the user declines
    env = driver.run("make a branch", context={"repo": str(repo), "branch": "feature"}, answers=[{"approved": False}])
    # Then nothing was created, and the mission says why
    assert branches(repo) == {"main"}
    assert env.outputs["branch"]["status"] == "denied"
    assert env.outputs["report"]["answer"] == "not created: declined by the user"


class DownClient:
    """A client whose server never answers (the process will not start, the host is unreachable)."""

    def version(self, server: Any, token: Any) -> str:
        raise McpUnavailable(f"MCP server '{server.name}' did not start: FileNotFoundError: no such program")

    list_tools = call_tool = version  # type: ignore[assignment]

    def close(self) -> None:
        pass


def test_a_server_that_is_down_fails_the_calls_with_the_reason_and_tool_health_shows_it(tmp_path: Path):
    # Given branch_maker whose git server is down
    capability = registry.Registry(package="tests.support.mcp_capabilities", plugins=dict).load("branch_maker")
    driver = DirectDriver(capability)
    driver.services.mcp = McpTools(DownClient(), allow_stdio=True)  # type: ignore[arg-type]
    repo = git_repo(tmp_path / "repo", [("first", {"a.py": "x = 1\n"})])
    # When the user approves the write
    env = driver.run("make a branch", context={"repo": str(repo), "branch": "feature"}, answers=[{"approved": True}])
    # Then the mission completes saying why nothing was made, and the repository is untouched
    assert env.outputs["branch"]["status"] == "error"
    assert "did not start: FileNotFoundError" in env.outputs["report"]["answer"]
    assert branches(repo) == {"main"}
    # and the tools' health, read from the mission's events, shows both tools failing
    events, _ = driver.stores.events.read(env.mission_id, limit=1000)
    health = {row["tool"]: row for row in tool_health(events)}
    assert health["git__git_create_branch"]["errors"] == 1 and health["git__git_branch"]["error_rate"] == 1.0
    completed = [e.payload for e in events if e.type is EventType.TOOL_COMPLETED]
    assert [(p["tool"], p["attempts"]) for p in completed] == [("git__git_create_branch", 1), ("git__git_branch", 2)]
