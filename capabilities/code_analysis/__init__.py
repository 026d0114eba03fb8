"""code_analysis: the 7-agent reference pipeline answering questions about a code repository.

Its pipeline, bounds and triggers are data in capability.toml; this module holds the code:
the stage hooks, the repository tools and the offline policy. Which repository a mission reads
is the runtime's to resolve and check (`repository = "required"`), never this package's.
"""

from __future__ import annotations

from capabilities.code_analysis import stages
from capabilities.code_analysis.policy import offline_policy
from capabilities.code_analysis.repo_tools import CATALOG

__all__ = ["CATALOG", "HOOKS", "offline_policy"]

HOOKS = {
    "perception": stages.Perception(),
    "intent": stages.Intent(),
    "planner": stages.Planner(),
    "traverser": stages.Traverser(),
    "synthesizer": stages.Synthesizer(),
    "critic": stages.Critic(),
    "integration": stages.Integration(),
}
