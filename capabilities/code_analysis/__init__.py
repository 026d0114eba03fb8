"""code_analysis: the 7-agent reference pipeline answering questions about a code repository.

Its pipeline, prompts, bounds and triggers are data in capability.toml; this package holds the
code: the typed stages, the repository tools and the offline policy. Which repository a mission
reads is the runtime's to resolve and check (`repository = "required"`), never this package's.
"""

from __future__ import annotations

from capabilities.code_analysis.policy import offline_policy
from capabilities.code_analysis.repo_tools import CATALOG
from capabilities.code_analysis.stages import (
    critic,
    integration,
    intent,
    perception,
    planner,
    synthesizer,
    traverser,
)

__all__ = [
    "CATALOG",
    "critic",
    "integration",
    "intent",
    "offline_policy",
    "perception",
    "planner",
    "synthesizer",
    "traverser",
]
