"""Users' own schedules (missions.service.triggers.schedules): where they are kept, and what makes them fire.

`ScheduleStore` keeps each user's schedules (DynamoDB in AWS) and counts them, so the per-user limit holds
under concurrent creates. `Scheduler` is EventBridge Scheduler: a schedule of the same name in the users'
schedule group invokes the schedule function with `SchedulerEntry.input`. The store is the truth a firing
reads (a paused or deleted schedule starts nothing, whatever the Scheduler still does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from missions.core.triggers.schedules import Firing, ScheduleRecord, ScheduleState


class ScheduleStore(Protocol):
    def create(self, record: ScheduleRecord, limit: int) -> None:
        """Store a new schedule unless the user already has `limit`: ScheduleLimitReached then (nothing
        stored); ConflictError when the id exists."""

    def get(self, user_id: str, schedule_id: str) -> ScheduleRecord:
        """The user's schedule; NotFound when there is none (another user's is as missing)."""

    def list(self, user_id: str) -> list[ScheduleRecord]:
        """The user's schedules, oldest first."""

    def set_state(self, user_id: str, schedule_id: str, state: ScheduleState) -> ScheduleRecord:
        """The schedule with its new state (and updated_at); NotFound when there is none."""

    def record_firing(self, user_id: str, schedule_id: str, firing: Firing) -> None:
        """Keep the firing among the schedule's last ones; NotFound when the schedule is gone (nothing is
        written then: a firing never brings a deleted schedule back)."""

    def delete(self, user_id: str, schedule_id: str) -> bool:
        """Delete it and free its place in the user's count; False when there was none."""

    def delete_all(self, user_id: str) -> int:
        """Every schedule of the user and their count (erasure); how many items were deleted."""


@dataclass(frozen=True)
class SchedulerEntry:
    """A Scheduler schedule as the runtime defines it: its target is always the schedule function."""

    name: str
    expression: str
    timezone: str
    input: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True
    description: str = ""
    one_time: bool = False  # an at(...) timer: deleted by the Scheduler once it fired


class Scheduler(Protocol):
    def create(self, entry: SchedulerEntry) -> None:
        """Create the schedule (an existing one of that name is replaced); DependencyUnavailable on failure."""

    def update(self, entry: SchedulerEntry) -> None:
        """Replace the schedule's definition and state; NotFound when it does not exist."""

    def delete(self, name: str) -> bool:
        """Delete it; False when it did not exist (not an error). DependencyUnavailable on failure."""


__all__ = ["ScheduleStore", "Scheduler", "SchedulerEntry"]
