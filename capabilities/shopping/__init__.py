"""shopping (Level 1, simple): the best offers for a product, one chosen by the user.

execute (read the goal, ask the price-comparison service, filter by stored preferences) ->
present (the user chooses) -> complete. The config is capability.toml; this package holds
the code: the typed stages, the tool and the offline policy.
"""

from __future__ import annotations

from capabilities.shopping.policy import offline_policy
from capabilities.shopping.stages import complete, execute, present
from capabilities.shopping.tools import CATALOG

__all__ = ["CATALOG", "complete", "execute", "offline_policy", "present"]
