"""Users' daily budgets (missions.core.cost.budget): the one owner of a user's budget and what it allows.

The budget of a user is the one an operator set for them, else the environment's default
(`daily_budget_usd`; none: unlimited). Reading it costs a read of the usage table, so a warm function
keeps what it read for `cache_seconds`; a stage that sees the day's spend reach a kept budget reads it
afresh before it stops its mission, so a raise is honoured at once and a cut within that time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from missions.core.cost.budget import BudgetStatus, day_of, next_day, reached
from missions.ports.agents import UsageStore


class Budgets:
    def __init__(
        self,
        usage: Callable[[], UsageStore],
        default_usd: float | None,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        cache_seconds: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self._usage, self.default_usd = usage, default_usd
        self._now, self._cache_seconds, self._monotonic = now, cache_seconds, monotonic
        self._kept: dict[str, tuple[float, float | None]] = {}  # user -> (read at, their own budget)
        self._lock = threading.Lock()

    def today(self) -> str:
        return day_of(self._now())

    def seconds_until_fresh(self, status: BudgetStatus) -> int:
        """How long until that day's budget is given afresh (a refused request's Retry-After)."""
        return max(1, int((next_day(status.day) - self._now()).total_seconds()) + 1)

    def limit_of(self, user_id: str, fresh: bool = False) -> float | None:
        """The user's daily budget in dollars (None: unlimited)."""
        with self._lock:
            kept = self._kept.get(user_id)
        if fresh or kept is None or self._monotonic() - kept[0] >= self._cache_seconds:
            own = self._usage().budget_of(user_id)
            with self._lock:
                self._kept[user_id] = (self._monotonic(), own)
        else:
            own = kept[1]
        return own if own is not None else self.default_usd

    def status(self, user_id: str, fresh: bool = False) -> BudgetStatus:
        """Today's spend of the user against their budget."""
        limit = self.limit_of(user_id, fresh)
        day = self.today()
        return BudgetStatus.of(day, self._usage().spent(user_id, day) if limit is not None else 0.0, limit)

    def reached(self, user_id: str) -> BudgetStatus | None:
        """The user's day when their budget is spent (a new mission is held), else None. Unlimited users
        cost no read of their spend."""
        if self.limit_of(user_id) is None:
            return None
        status = self.status(user_id)
        return status if status.reached else None

    def stops(self, user_id: str, spent_today: float) -> bool:
        """Whether a stage whose call brought the user's day to `spent_today` ends its mission; a budget that
        seems reached is read afresh first (a raise since it was kept)."""
        if not reached(spent_today, self.limit_of(user_id)):
            return False
        return reached(spent_today, self.limit_of(user_id, fresh=True))

    def set(self, user_id: str, daily_budget_usd: float | None) -> BudgetStatus:
        """An operator sets (None: drops) the user's own budget; returns their day under it."""
        self._usage().set_budget(user_id, daily_budget_usd)
        with self._lock:
            self._kept.pop(user_id, None)
        return self.status(user_id, fresh=True)


__all__ = ["Budgets"]
