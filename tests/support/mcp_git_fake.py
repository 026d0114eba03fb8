"""A small fake of mcp-server-git, written with the SDK's FastMCP over dulwich, for the unit tests.

Same tool names, the same parameters and the same text formats as the real server for what the tests use
(git_log, git_show, git_create_branch, git_branch), so one conformance suite runs over both
(tests/unit/adapters/test_mcp_conformance.py). Its schemas are FastMCP's, not the real server's: each
server is locked on its own. `--variant v2` is the same server after an upgrade that added a required
parameter to git_log (the schema change a lock must catch); `--http PORT --token T` serves streamable HTTP
on loopback, refusing requests without that bearer token.

Run as a script (a stdio server is a child process): `python tests/support/mcp_git_fake.py [--variant v2]`.
"""

from __future__ import annotations

import argparse
import datetime
import io
from typing import Any

from dulwich.patch import write_tree_diff
from dulwich.repo import Repo
from mcp.server.fastmcp import FastMCP


def _header(commit: Any) -> tuple[str, str]:
    when = datetime.datetime.fromtimestamp(
        commit.author_time, datetime.timezone(datetime.timedelta(seconds=commit.author_timezone))
    )
    return commit.author.decode(), when.strftime("%Y-%m-%d %H:%M:%S %z")


def build(variant: str = "v1") -> FastMCP:
    server = FastMCP("fake-git", log_level="WARNING")
    server._mcp_server.version = f"0.{variant}"  # what serverInfo reports: discovery is cached per version

    def log(repo_path: str, max_count: int) -> str:
        repo = Repo(repo_path)
        entries = []
        for entry in repo.get_walker(max_entries=max_count):
            author, when = _header(entry.commit)
            entries.append(
                f"Commit: {entry.commit.id.decode()}\nAuthor: {author}\nDate: {when}\n"
                f"Message: {entry.commit.message.decode()}\n"
            )
        return "Commit history:\n" + "\n".join(entries)

    if variant == "v2":

        @server.tool(description="Shows the commit logs")
        def git_log(repo_path: str, author: str, max_count: int = 10) -> str:
            return log(repo_path, max_count)

    else:

        @server.tool(description="Shows the commit logs")
        def git_log(repo_path: str, max_count: int = 10) -> str:
            return log(repo_path, max_count)

    @server.tool(description="Shows the contents of a commit")
    def git_show(repo_path: str, revision: str) -> str:
        repo = Repo(repo_path)
        try:
            commit = repo[revision.encode()]
        except KeyError:
            raise ValueError(f"Ref '{revision}' did not resolve to an object") from None
        author, when = _header(commit)
        message = commit.message.decode().rstrip("\n")
        out = io.BytesIO()
        parent = repo[commit.parents[0]].tree if commit.parents else None
        write_tree_diff(out, repo.object_store, parent, commit.tree)
        diff = []  # as the real server prints it: "--- a\n+++ b\n" then the hunks
        for line in out.getvalue().decode(errors="replace").splitlines():
            if line.startswith(("diff --git", "index ", "new file mode", "deleted file mode")):
                continue
            if line.startswith("--- "):
                line = "\n--- " + (line[6:] if line.startswith("--- a/") else line[4:])
            elif line.startswith("+++ "):
                line = "+++ " + (line[6:] if line.startswith("+++ b/") else line[4:])
            diff.append(line)
        body = "".join(f"    {line}\n" for line in message.split("\n"))
        return f"commit {commit.id.decode()}\nAuthor: {author}\nDate:   {when}\n\n{body}" + "\n".join(diff) + "\n"

    @server.tool(description="Creates a new branch from an optional base branch")
    def git_create_branch(repo_path: str, branch_name: str, base_branch: str | None = None) -> str:
        repo = Repo(repo_path)
        name = f"refs/heads/{branch_name}".encode()
        if name in repo.refs:
            raise ValueError(f"Cannot create branch '{branch_name}': refs/heads/{branch_name} already exists")
        base = repo.refs[f"refs/heads/{base_branch}".encode()] if base_branch else repo.head()
        repo.refs[name] = base
        return f"Created branch '{branch_name}' from '{base_branch or 'HEAD'}'"

    @server.tool(description="List Git branches")
    def git_branch(repo_path: str, branch_type: str) -> str:
        repo = Repo(repo_path)
        return "\n".join(ref.decode().removeprefix("refs/heads/") for ref in repo.refs.keys(b"refs/heads/"))

    return server


def serve_http(server: FastMCP, token: str) -> Any:
    """The server's streamable HTTP app, answering 401 to a request without the bearer token."""
    app = server.streamable_http_app()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"").decode()
            if given != f"Bearer {token}":
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="v1")
    parser.add_argument("--http", type=int)
    parser.add_argument("--token", default="")
    args = parser.parse_args()
    fake = build(args.variant)
    if args.http:
        import uvicorn

        uvicorn.run(serve_http(fake, args.token), host="127.0.0.1", port=args.http, log_level="warning")
    else:
        fake.run("stdio")
