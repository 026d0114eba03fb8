"""code_analysis: the 7-agent reference pipeline answering questions about a code repository.

Its pipeline, bounds and triggers are data in capability.toml; this module holds the code:
the stage hooks, the repository tools, the offline policy and how a mission's context is
checked before it starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capabilities.code_analysis import stages
from capabilities.code_analysis.policy import offline_policy
from capabilities.code_analysis.repo_tools import CATALOG

__all__ = ["CATALOG", "HOOKS", "offline_policy", "prepare_context"]

HOOKS = {
    "perception": stages.Perception(),
    "intent": stages.Intent(),
    "planner": stages.Planner(),
    "traverser": stages.Traverser(),
    "synthesizer": stages.Synthesizer(),
    "critic": stages.Critic(),
    "integration": stages.Integration(),
}


def prepare_context(context: dict[str, Any]) -> dict[str, Any]:
    """Resolve the repository root; a mission cannot start on a folder that does not exist."""
    repo = Path(context.get("repo") or ".").expanduser().resolve()
    if not repo.is_dir():
        raise ValueError(f"repository '{repo}' is not a directory")
    return {**context, "repo": str(repo)}
