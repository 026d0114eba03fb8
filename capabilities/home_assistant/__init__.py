"""home_assistant (seed 002): an architect, a specialist team whose analyses run in the sandbox, reviewed
and proposed automations, and changes to the home made only after the user approved them.

capability.toml holds the graph, prompts and triggers; ha/ reaches Home Assistant (its REST API, or,
in a checkout, dev/'s bundled sample home with no HA configured); tools.py are the HA tools; stages.py the stages;
automation.py checks automations; dashboards.py is the Dashboard Designer (its tools in
dashboard_tools.py); policy.py and scripts.py are the offline model.
"""

from __future__ import annotations

from capabilities.home_assistant import dashboard_tools  # noqa: F401  (registers the dashboard tools)
from capabilities.home_assistant.dashboards import dashboard, dashboard_deploy, dashboard_rollback
from capabilities.home_assistant.librarian import librarian
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
    "dashboard",
    "dashboard_deploy",
    "dashboard_rollback",
    "deploy",
    "diagnostic",
    "energy",
    "librarian",
    "offline_policy",
    "proposals",
    "report",
    "review",
    "rollback",
    "synthesis",
]
