"""dining (Level 2, coordinated): restaurants from three sources at once, ranked, one chosen.

plan -> [maps | reviews | reservations] (a Parallel state) -> aggregate (de-duplication,
filters) -> rank (composite score) -> present (the user chooses) -> complete. The config is
capability.toml; this package holds the code: hooks, tools and the offline policy.
"""

from __future__ import annotations

from capabilities.dining import stages
from capabilities.dining.policy import offline_policy
from capabilities.dining.tools import CATALOG

HOOKS = {
    "plan": stages.Plan(),
    **{source: stages.SourceSearch(source) for source in stages.SOURCE_STAGES},
    "aggregate": stages.Aggregate(),
    "rank": stages.Rank(),
    "present": stages.Present(),
    "complete": stages.Complete(),
}

__all__ = ["CATALOG", "HOOKS", "offline_policy"]
