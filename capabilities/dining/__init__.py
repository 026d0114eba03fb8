"""dining (Level 2, coordinated): restaurants from three sources at once, ranked, one chosen.

plan -> search [maps | reviews | reservations] (a Parallel state) -> aggregate (de-duplication,
filters) -> rank (composite score) -> present (the user chooses) -> complete. The config is
capability.toml; this package holds the code: the typed stages, tools and the offline policy.
"""

from __future__ import annotations

from capabilities.dining.policy import offline_policy
from capabilities.dining.stages import aggregate, complete, maps, plan, present, rank, reservations, reviews
from capabilities.dining.tools import CATALOG

__all__ = [
    "CATALOG",
    "aggregate",
    "complete",
    "maps",
    "offline_policy",
    "plan",
    "present",
    "rank",
    "reservations",
    "reviews",
]
