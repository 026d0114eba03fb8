"""travel (Level 3): deep planning, coordinators with dependencies, versioned drafts, rounds of review.

The graph, prompts, bounds and edge limits are in capability.toml; this package holds the code:
the typed stages (stages.py) and their outputs (models.py), the trip state (state.py), ranking
(ranking.py), the day layout (itinerary.py), the worker tool (tools.py) and the offline policy
(policy.py). The services are connectors (capabilities.travel.connectors) with bundled sample
data, so it all runs offline.
"""

from __future__ import annotations

from typing import Any

from capabilities.travel.policy import offline_policy
from capabilities.travel.stages import (
    choose,
    complete,
    dinners,
    planner,
    reflect,
    replan,
    review,
    supervisor,
    synthesis,
    workers,
)
from capabilities.travel.tools import CATALOG


def prepare_context(context: dict[str, Any]) -> dict[str, Any]:
    """Refuse a malformed outage simulation before the mission starts, not in a worker."""
    failures = context.get("simulate_failures")
    if failures is not None and not (
        isinstance(failures, dict)
        and all(isinstance(k, str) and isinstance(v, int) and 0 <= v <= 20 for k, v in failures.items())
    ):
        raise ValueError('simulate_failures must map source names to failure counts (0-20), e.g. {"kayak": 3}')
    return context


__all__ = [
    "CATALOG",
    "choose",
    "complete",
    "dinners",
    "offline_policy",
    "planner",
    "prepare_context",
    "reflect",
    "replan",
    "review",
    "supervisor",
    "synthesis",
    "workers",
]
