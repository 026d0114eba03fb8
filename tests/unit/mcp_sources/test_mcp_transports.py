"""The runtime's MCP client over real transports: a stdio server that will not start, one upgraded under a
capability's lock, a streamable HTTP server behind a bearer token, and sessions that end with the client."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from missions.adapters.mcp_client import McpSessions
from missions.core.capability.mcp import McpServerConfig, McpUnavailable, mcp_tools
from missions.core.capability.tools import ToolCatalog, ToolEnv, ToolExecutor
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.core.roots import AllowedRoots
from missions.service.mcp_tools import McpTools
from tests.support import mcp_git_fake
from tests.support.mcp_servers import fake_git, gateway, git_repo, git_server

AGENT = AgentConfig(name="worker", has_tools=True, tool_access=ToolAccess.READ)
TOKEN = "test-token-1"


def test_a_server_that_does_not_start_fails_the_call_with_the_reason(tmp_path: Path):
    # Given a declared server whose command exits at once
    server = git_server(["{python}", "-c", "import sys; sys.exit(3)"], {"git_log": "read"})
    with gateway() as mcp:
        executor = ToolExecutor(
            catalog=ToolCatalog(mcp_tools("gitcap", [server], _lock_of_fake(mcp))),
            agent=AGENT,
            env=ToolEnv("m", "u", str, mcp),
            sleep=lambda seconds: None,
        )
        # When its tool is called
        result = executor.execute("git__git_log", {"repo_path": str(tmp_path)})
    # Then the call failed saying the server did not start (asked twice: a read is retried once)
    assert result.status == "error"
    assert "MCP server 'git' did not start" in (result.error or "") and "(after 2 attempts)" in (result.error or "")


def _lock_of_fake(mcp: McpTools):  # the lock a capability had while its server still worked
    return mcp.lock([git_server(fake_git(), {"git_log": "read"})])


def test_a_server_upgraded_with_a_changed_schema_is_refused_until_locked_again(tmp_path: Path):
    # Given a capability locked against the fake server's first version
    repo = git_repo(tmp_path / "repo", [("first", {"a.py": "x\n"})])
    with gateway() as mcp:
        lock = mcp.lock([git_server(fake_git("v1"), {"git_log": "read"})])
        # When the server is upgraded: git_log now requires an author
        upgraded = git_server(fake_git("v2"), {"git_log": "read"})
        executor = ToolExecutor(
            catalog=ToolCatalog(mcp_tools("gitcap", [upgraded], lock)),
            agent=AGENT,
            roots=AllowedRoots.of([str(repo)]),
            env=ToolEnv("m", "u", str, mcp),
        )
        refused = executor.execute("git__git_log", {"repo_path": str(repo)})
        # Then the tool is refused, naming the command that locks it again
        assert refused.status == "error"
        assert "changed its input schema" in (refused.error or "")
        assert "run `missions tools lock gitcap`" in (refused.error or "")
        # and once locked again, it works
        relocked = mcp.lock([upgraded])
        executor.catalog = ToolCatalog(mcp_tools("gitcap", [upgraded], relocked))
        assert executor.execute("git__git_log", {"repo_path": str(repo), "author": "Ada"}).status == "success"


@pytest.fixture
def http_url(http_served: tuple[str, uvicorn.Server]) -> str:
    return http_served[0]


@pytest.fixture
def http_served() -> Iterator[tuple[str, uvicorn.Server]]:
    """The fake git server over streamable HTTP on loopback, requiring the bearer token TOKEN."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = mcp_git_fake.serve_http(mcp_git_fake.build(), TOKEN)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", server
    server.should_exit = True
    thread.join(5)


def http_server(url: str) -> McpServerConfig:
    return McpServerConfig(
        name="git",
        transport="http",
        url=url,
        token_secret="dev/git-token",
        tools={"git_log": "read"},
        root_param="repo_path",
    )


def locked_executor(mcp: McpTools, server: McpServerConfig, repo: Path) -> ToolExecutor:
    """An executor of the server's tools as locked now, rooted at `repo`."""
    return ToolExecutor(
        catalog=ToolCatalog(mcp_tools("gitcap", [server], mcp.lock([server]))),
        agent=AGENT,
        roots=AllowedRoots.of([str(repo)]),
        env=ToolEnv("m", "u", str, mcp),
    )


def test_an_http_server_is_called_with_the_token_from_its_secret(http_url: str, tmp_path: Path):
    # Given a server over streamable HTTP whose token is in a secret
    repo = git_repo(tmp_path / "repo", [("over http", {"a.py": "x\n"})])
    server = http_server(http_url)
    mcp = McpTools(McpSessions(), secrets={"dev/git-token": TOKEN}.__getitem__)
    try:
        executor = locked_executor(mcp, server, repo)
        # When its tool is called (stdio is not allowed here: this is how Lambda reaches a server)
        result = executor.execute("git__git_log", {"repo_path": str(repo)})
    finally:
        mcp.close()
    # Then it answered
    assert result.status == "success", result.error
    assert "over http" in result.data["text"]


def test_an_http_server_refusing_the_token_is_unavailable_with_the_reason(http_url: str):
    sessions = McpSessions(connect_timeout=10)
    try:
        with pytest.raises(McpUnavailable, match="MCP server 'git' did not start: .*401"):
            sessions.version(http_server(http_url), "wrong-token")
    finally:
        sessions.close()


def test_one_session_serves_every_call_and_closing_ends_it(tmp_path: Path):
    # Given a live session to the fake server
    repo = git_repo(tmp_path / "repo", [("first", {"a.py": "x\n"})])
    server = git_server(fake_git(), {"git_log": "read"})
    sessions = McpSessions()
    first = sessions.version(server, None)
    live = next(iter(sessions._sessions.values()))
    # When more calls are made
    for _ in range(3):
        assert not sessions.call_tool(server, None, "git_log", {"repo_path": str(repo)}, 10).is_error
    # Then they went down the same session
    assert next(iter(sessions._sessions.values())) is live and sessions.version(server, None) == first
    # and closing ends its task (and with it the server's process), twice without harm
    sessions.close()
    sessions.close()
    assert live.task.done()


def test_an_http_server_that_goes_away_mid_session_fails_the_call_with_the_reason(
    http_served: tuple[str, uvicorn.Server], tmp_path: Path
):
    # Given a live session to a server over HTTP, with a short timeout
    url, served = http_served
    repo = git_repo(tmp_path / "repo", [("first", {"a.py": "x\n"})])
    server = http_server(url).model_copy(update={"timeout_seconds": 1.0})
    mcp = McpTools(McpSessions(connect_timeout=2), secrets={"dev/git-token": TOKEN}.__getitem__)
    try:
        executor = locked_executor(mcp, server, repo)
        assert executor.execute("git__git_log", {"repo_path": str(repo)}).status == "success"
        # When the server stops
        served.should_exit = True
        _closed(url)
        result = executor.execute("git__git_log", {"repo_path": str(repo)})
    finally:
        mcp.close()
    # Then the call failed saying so: it timed out, then the server could not be reached again
    assert result.status in ("error", "timeout")
    assert "MCP server 'git'" in (result.error or "") and "(after 2 attempts)" in (result.error or "")


def _closed(url: str) -> None:
    """Wait until nothing listens at the URL's port any more."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} still open")
