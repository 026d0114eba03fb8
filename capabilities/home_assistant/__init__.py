"""home_assistant (seed 002): an architect, a specialist team whose analyses run in the sandbox, reviewed
and proposed automations, and changes to the home made only after the user approved them.

capability.toml holds the graph, prompts and triggers; ha/ reaches Home Assistant (its REST API, or,
in a checkout, dev/'s bundled sample home with no HA configured); tools.py are the HA tools; stages.py the stages;
automation.py checks automations; policy.py and scripts.py are the offline model.
"""

from __future__ import annotations

from capabilities.home_assistant.policy import offline_policy
from capabilities.home_assistant.stages import (
    architect,
    behavioral,
    control,
    deploy,
    diagnostic,
    energy,
    proposals,
    report,
    review,
    rollback,
    synthesis,
)
from capabilities.home_assistant.tools import CATALOG

__all__ = [
    "CATALOG",
    "architect",
    "behavioral",
    "control",
    "deploy",
    "diagnostic",
    "energy",
    "offline_policy",
    "proposals",
    "report",
    "review",
    "rollback",
    "synthesis",
]
