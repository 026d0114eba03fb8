"""MCP servers for the tests: git repositories to point them at, the fake and the real git server as
declarations, and a gateway whose sessions are closed when the test ends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dulwich.repo import Repo

from missions.adapters.mcp_client import McpSessions
from missions.core.capability.mcp import McpRisk, McpServerConfig
from missions.service.mcp_tools import McpTools

FAKE = Path(__file__).with_name("mcp_git_fake.py")
REAL_GIT = ["{python}", "-m", "mcp_server_git"]  # mcp-server-git from PyPI, installed beside the runtime


def fake_git(variant: str = "v1") -> list[str]:
    return ["{python}", str(FAKE), "--variant", variant]


def git_server(command: list[str], tools: dict[str, McpRisk], **more: object) -> McpServerConfig:
    return McpServerConfig.model_validate(
        {"name": "git", "transport": "stdio", "command": command, "tools": tools, "root_param": "repo_path", **more}
    )


def git_repo(folder: Path, commits: list[tuple[str, dict[str, str]]]) -> Path:
    """A repository at `folder` on branch main with these commits (message, {path: content}), in order."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    for message, files in commits:
        for path, content in files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(content)
        subprocess.run(["git", "-C", str(folder), "add", "-A"], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(folder),
                "-c",
                "user.name=Ada",
                "-c",
                "user.email=ada@example.com",
                "commit",
                "-q",
                "-m",
                message,
            ],
            check=True,
        )
    return folder


def branches(folder: Path) -> set[str]:
    """The repository's local branches, read with dulwich (not through the server under test)."""
    return {ref.decode() for ref in Repo(str(folder)).refs.keys(b"refs/heads/")}


@contextmanager
def gateway(allow_stdio: bool = True, **options: object) -> Iterator[McpTools]:
    tools = McpTools(McpSessions(**options), allow_stdio=allow_stdio)  # type: ignore[arg-type]
    try:
        yield tools
    finally:
        tools.close()


__all__ = ["FAKE", "REAL_GIT", "branches", "fake_git", "gateway", "git_repo", "git_server", "sys"]
