"""A user's daily budget: the model dollars all of a user's missions may spend in one UTC day.

`max_cost_usd` bounds one mission; a team that gives the runtime to many users also needs a cap per
person, in dollars (what the bill says), not tokens per call. The spend is counted as the calls are
made: every model call's usage record adds its dollars to a counter of its user and its UTC day (one
atomic ADD, never a scan of missions), and that counter is what both checks read:
- a new mission (any trigger: the API, the chat, a schedule, a webhook, a memory change, a fork, a
  sub-mission) whose user has reached the budget is held, queued with the reason `budget`, until the
  next UTC day or a raise (or refused, when its request says so);
- a running mission whose stage brings the day's spend to the budget ends through its final stage with
  the terminal reason `user_budget`, as `max_cost_usd` ends one mission, keeping what it found.
A stage that has begun finishes its calls (a model call cannot be taken back), so a day may end a little
over the budget: by at most what one stage spends, per running mission.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import Field

from missions.core.mission.envelope import Model

USER_BUDGET = "user_budget"  # the terminal reason of a mission stopped by its user's daily budget
HELD_FOR_BUDGET = "budget"  # the reason a mission waits in its user's queue without starting
COST_UNITS = 10**8  # dollars are counted in units of 1e-8 (integers: an ADD of decimals drifts)


def day_of(moment: datetime | str) -> str:
    """The UTC day ("2026-11-28") a moment (a datetime, or an ISO 8601 string as records keep) falls on."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).date().isoformat()


def next_day(day: str) -> datetime:
    """When a day's budget is given afresh: the next midnight, UTC."""
    return datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=1)


def units(usd: float) -> int:
    return round(usd * COST_UNITS)


def dollars(count: int) -> float:
    return round(count / COST_UNITS, 8)


class BudgetStatus(Model):
    """A user's day: what their missions spent, their budget (None: no budget), and what is left."""

    day: str
    spent_usd: float = Field(ge=0)
    daily_budget_usd: float | None = Field(None, ge=0)
    remaining_usd: float | None = None
    reached: bool = False  # new missions are held, running ones end at their next stage
    resets_at: str  # the next midnight, UTC

    @classmethod
    def of(cls, day: str, spent_usd: float, daily_budget_usd: float | None) -> BudgetStatus:
        return cls(
            day=day,
            spent_usd=round(spent_usd, 8),
            daily_budget_usd=daily_budget_usd,
            remaining_usd=round(max(0.0, daily_budget_usd - spent_usd), 8) if daily_budget_usd is not None else None,
            reached=reached(spent_usd, daily_budget_usd),
            resets_at=next_day(day).isoformat().replace("+00:00", "Z"),
        )

    def explain(self) -> str:
        """One line for a user whose mission waits on it."""
        return (
            f"your daily budget is spent (${self.spent_usd:.4f} of ${self.daily_budget_usd:.4f} on {self.day}, UTC); "
            f"it starts when the budget is given afresh at {self.resets_at} or an operator raises it"
        )


def reached(spent_usd: float, daily_budget_usd: float | None) -> bool:
    """Whether a day's spend has reached its budget (compared in counting units: no float drift)."""
    return daily_budget_usd is not None and units(spent_usd) >= units(daily_budget_usd)


__all__ = [
    "COST_UNITS",
    "HELD_FOR_BUDGET",
    "USER_BUDGET",
    "BudgetStatus",
    "day_of",
    "dollars",
    "next_day",
    "reached",
    "units",
]
