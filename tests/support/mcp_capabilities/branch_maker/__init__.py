"""branch_maker: one MCP write tool, asked for and run once (see capability.toml)."""

from __future__ import annotations

from pydantic import BaseModel

from missions.core.capability.registry import Ctx, stage


class Branched(BaseModel):
    status: str
    error: str | None = None
    said: str = ""
    branches: str = ""


class Report(BaseModel):
    answer: str


@stage
def branch(ctx: Ctx) -> Branched:
    """Creates the branch the context names; the runtime asks the user first (a write tool)."""
    repo, name = ctx.repository_root(), ctx.context["branch"]
    made = ctx.tools.execute("git__git_create_branch", {"repo_path": repo, "branch_name": name})
    listed = ctx.tools.execute("git__git_branch", {"repo_path": repo, "branch_type": "local"})
    return Branched(
        status=made.status,
        error=made.error,
        said=(made.data or {}).get("text", ""),
        branches=(listed.data or {}).get("text", ""),
    )


@stage
def report(ctx: Ctx, branch: Branched | None) -> Report:
    if branch is None:
        return Report(answer=f"failed: {ctx.failure}")
    return Report(answer=branch.said or f"not created: {branch.error}")
