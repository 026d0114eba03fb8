"""One conformance suite over the fake git MCP server (FastMCP, tests/support/mcp_git_fake.py) and the real
mcp-server-git from PyPI, both over stdio through the runtime's client (missions.adapters.mcp_client),
gateway (missions.service.mcp_tools) and tool executor (missions.core.capability.tools)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from missions.core.capability.mcp import McpLock, McpServerConfig, mcp_tools
from missions.core.capability.tools import (
    ConfirmationRequired,
    ToolCallRecord,
    ToolCatalog,
    ToolEnv,
    ToolExecutor,
    call_id,
)
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.core.roots import AllowedRoots
from missions.service.mcp_tools import McpTools
from tests.support.mcp_servers import REAL_GIT, branches, fake_git, gateway, git_repo, git_server

TOOLS: dict[str, Any] = {"git_log": "read", "git_show": "read", "git_branch": "read", "git_create_branch": "write"}
AGENT = AgentConfig(name="worker", has_tools=True, tool_access=ToolAccess.WRITE)


class Journal:
    """A stage's tool journal kept in memory (the runner keeps it beside the checkpoints)."""

    def __init__(self) -> None:
        self.kept: dict[str, ToolCallRecord] = {}

    def recorded(self, key: str) -> ToolCallRecord | None:
        return self.kept.get(key)

    def record(self, key: str, call: ToolCallRecord) -> None:
        self.kept[key] = call


@pytest.fixture(params=["fake", "real"])
def server(request: pytest.FixtureRequest) -> McpServerConfig:
    return git_server(fake_git() if request.param == "fake" else REAL_GIT, TOOLS)


@pytest.fixture
def mcp() -> Iterator[McpTools]:
    with gateway() as tools:
        yield tools


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(
        tmp_path / "repo",
        [
            ("add the answer", {"answer.py": "ANSWER = 41\n"}),
            ("fix the answer: off by one", {"answer.py": "ANSWER = 42\n"}),
        ],
    )


def executor(server: McpServerConfig, lock: McpLock, mcp: McpTools, repo: Path, **options: Any) -> ToolExecutor:
    catalog = ToolCatalog(mcp_tools("gitcap", [server], lock))
    return ToolExecutor(
        catalog=catalog,
        agent=AGENT,
        roots=AllowedRoots.of([str(repo)]),
        env=ToolEnv("m-1", "u-1", lambda name: "", mcp),
        **options,
    )


def test_discovery_lists_the_declared_tools_with_object_schemas(server: McpServerConfig, mcp: McpTools):
    # When the gateway locks the server's declared tools
    lock = mcp.lock([server])
    # Then every declared tool is there, described, with an object schema requiring repo_path
    locked = lock.servers["git"]
    assert locked.version
    assert set(locked.tools) == set(TOOLS)
    assert all(tool.input_schema["type"] == "object" for tool in locked.tools.values())
    assert all("repo_path" in tool.input_schema["required"] for tool in locked.tools.values())


def test_a_read_tool_answers_with_the_servers_text(server: McpServerConfig, mcp: McpTools, repo: Path):
    # Given the server's tools, locked
    run = executor(server, mcp.lock([server]), mcp, repo)
    # When the log is asked for
    result = run.execute("git__git_log", {"repo_path": str(repo), "max_count": 5})
    # Then both commits are in its text, newest first
    assert result.status == "success", result.error
    text = result.data["text"]
    assert text.index("fix the answer") < text.index("add the answer")


def test_a_failure_the_server_reports_is_a_failed_result_with_its_message(
    server: McpServerConfig, mcp: McpTools, repo: Path
):
    run = executor(server, mcp.lock([server]), mcp, repo)
    # When a revision that does not exist is shown
    result = run.execute("git__git_show", {"repo_path": str(repo), "revision": "no-such-rev"})
    # Then the call failed with the server's own message
    assert result.status == "error"
    assert "no-such-rev" in (result.error or "") and "MCP server 'git' refused git_show" in (result.error or "")


def test_arguments_are_checked_against_the_schema_before_the_server_is_asked(
    server: McpServerConfig, mcp: McpTools, repo: Path
):
    run = executor(server, mcp.lock([server]), mcp, repo)
    # When a count is not an integer, and the repository is missing
    wrong = run.execute("git__git_log", {"repo_path": str(repo), "max_count": "ten"})
    missing = run.execute("git__git_log", {})
    # Then both are refused by the schema, and no call was made
    assert wrong.status == "error" and "max_count" in (wrong.error or "")
    assert missing.status == "error" and "'repo_path' is a required property" in (missing.error or "")
    assert [call.attempts for call in run.calls] == [0, 0]


def test_a_repository_outside_the_allowed_roots_is_refused(
    server: McpServerConfig, mcp: McpTools, repo: Path, tmp_path: Path
):
    # Given another repository, outside the stage's root
    other = git_repo(tmp_path / "other", [("other", {"o.txt": "o\n"})])
    run = executor(server, mcp.lock([server]), mcp, repo)
    # When a tool names it
    result = run.execute("git__git_log", {"repo_path": str(other)})
    # Then it is refused before the server
    assert result.status == "denied" and "refused" in (result.error or "")


def test_a_write_asks_then_runs_once_even_when_the_stage_is_retried(server: McpServerConfig, mcp: McpTools, repo: Path):
    lock = mcp.lock([server])
    params = {"repo_path": str(repo), "branch_name": "feature"}
    # When the write is called without an answer
    with pytest.raises(ConfirmationRequired) as asked:
        executor(server, lock, mcp, repo).execute("git__git_create_branch", params)
    assert asked.value.risk.value == "write"
    assert branches(repo) == {"main"}
    # and then approved, in a stage that is run twice (the first attempt crashed after the call)
    journal = Journal()
    approvals = {call_id("git__git_create_branch", params): True}
    first = executor(server, lock, mcp, repo, approvals=approvals, journal=journal).execute(
        "git__git_create_branch", params
    )
    again = executor(server, lock, mcp, repo, approvals=approvals, journal=journal)
    second = again.execute("git__git_create_branch", params)
    # Then the branch was created once: the retry replayed the recorded result (a second call would fail)
    assert first.status == "success" and second == first
    assert again.calls[0].replayed
    assert branches(repo) == {"main", "feature"}


def test_a_declined_write_leaves_the_repository_untouched(server: McpServerConfig, mcp: McpTools, repo: Path):
    params = {"repo_path": str(repo), "branch_name": "feature"}
    run = executor(server, mcp.lock([server]), mcp, repo, approvals={call_id("git__git_create_branch", params): False})
    result = run.execute("git__git_create_branch", params)
    assert result.status == "denied" and result.error == "declined by the user"
    assert branches(repo) == {"main"}


def test_a_schema_that_differs_from_the_lock_is_refused_naming_the_command(
    server: McpServerConfig, mcp: McpTools, repo: Path
):
    # Given a lock whose git_create_branch schema is not the server's (the server changed since it was locked)
    lock = mcp.lock([server])
    tool = lock.servers["git"].tools["git_create_branch"]
    schema = {**tool.input_schema, "required": [*tool.input_schema["required"], "reason"]}
    changed = lock.servers["git"].tools | {"git_create_branch": tool.model_copy(update={"input_schema": schema})}
    stale = McpLock(servers={"git": lock.servers["git"].model_copy(update={"tools": changed})})
    params = {"repo_path": str(repo), "branch_name": "feature", "reason": "x"}
    run = executor(server, stale, mcp, repo, approvals={call_id("git__git_create_branch", params): True})
    # When the tool is called
    result = run.execute("git__git_create_branch", params)
    # Then it is refused with what to do, and the server was not asked to write
    assert result.status == "error"
    assert "changed its input schema" in (result.error or "") and "missions tools lock gitcap" in (result.error or "")
    assert branches(repo) == {"main"}
    # while a tool whose schema still matches works
    assert run.execute("git__git_log", {"repo_path": str(repo)}).status == "success"
