"""Users' own schedules: create, list, read, pause, resume and delete them, and fire them.

Two stores hold a schedule: the schedules table (the truth: what the user sees, what a firing reads) and
EventBridge Scheduler (what makes it fire: a schedule of the same name in the users' group whose target is
the schedule function). Nothing is half-done:
- create checks everything first (missions.core.triggers.schedules.check_expression, the goal, the context, the
  capability, and the request its firings will make, as the launcher checks it), then stores the record,
  taking a place in the user's count (the limit holds under concurrent creates), then creates the Scheduler
  schedule; when that fails the record is deleted again;
- pause and resume change the record first (a firing reads it, so a pause holds at once), then the
  Scheduler schedule's state (DISABLED/ENABLED); when that fails the record's state is put back;
- delete removes the Scheduler schedule first, then the record; when the record cannot be deleted the
  Scheduler schedule is put back. So every Scheduler schedule has its record (erasure finds them all by
  the user's records, never by listing everyone's schedules).
A firing starts its mission through the launcher, as every trigger does, with an idempotency key made of
the schedule and the scheduled time: a firing the Scheduler delivers twice starts one mission. A firing of a
paused schedule starts nothing and is kept among its firings with the reason; one of a deleted schedule
starts nothing and is logged (writing it down would bring back what the user deleted).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from missions.core.errors import AgentDisabled, MissionRequestError, NotFound, ScheduleRejected
from missions.core.mission.requests import MissionRequest
from missions.core.triggers.cron import iso_utc, next_fire_times
from missions.core.triggers.declared import TriggerSource
from missions.core.triggers.schedules import (
    AUTO,
    CONTEXT_LIMIT,
    GOAL_LIMIT,
    SHOWN_FIRINGS,
    Firing,
    ScheduleRecord,
    ScheduleState,
    check_expression,
    fire_times_view,
)
from missions.core.triggers.specs import SCHEDULED_TIME_PLACEHOLDER
from missions.ports.schedules import Scheduler, SchedulerEntry, ScheduleStore

log = logging.getLogger(__name__)

USER_SCHEDULE = "user_schedule"  # the `kind` of a user schedule's firing (capability schedules have none)


def is_user_schedule(event: dict[str, Any]) -> bool:
    return event.get("kind") == USER_SCHEDULE


class ScheduleService:
    """A user's schedules (see the module docstring). Also the `PersonalStore` of them (export, erasure)."""

    name = "schedules"

    def __init__(
        self,
        *,
        store: ScheduleStore,
        scheduler: Scheduler,
        capabilities: Callable[[], list[str]],
        choose_capability: Callable[[str, str | None], str],
        submit: Callable[[MissionRequest], Any],
        limit: int,
        minimum_interval: timedelta,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        check: Callable[[MissionRequest], None] | None = None,
    ):
        """`check`: refuses a request as the launcher would refuse it (Launcher.check), so a schedule whose
        firings could never start (a repository the user may not read, a path outside the allowed roots, a
        bound above the capability's) is refused when it is made, not at every firing."""
        self._store = store
        self._scheduler = scheduler
        self._capabilities = capabilities
        self._choose = choose_capability
        self._submit = submit
        self._check = check
        self.limit = limit
        self.minimum_interval = minimum_interval
        self._now = now

    # -- the user's requests --------------------------------------------------------------------------

    def create(
        self,
        user_id: str,
        *,
        expression: str,
        goal: str,
        timezone: str = "UTC",
        capability: str = AUTO,
        name: str = "",
        context: dict[str, Any] | None = None,
    ) -> ScheduleRecord:
        """Check, then store and schedule it (see the module docstring); ScheduleRejected (422) saying what
        is wrong, ScheduleLimitReached (409), DependencyUnavailable (503): nothing is kept then."""
        now = self._now().astimezone(UTC).replace(microsecond=0)
        expression, timezone, goal = expression.strip(), timezone.strip(), goal.strip()
        upcoming = check_expression(expression, timezone, now=now, minimum_interval=self.minimum_interval)
        context = dict(context or {})
        try:
            self._check_request(user_id, goal, capability, context)
        except ScheduleRejected as exc:  # the expression is fine: say when it would have fired
            exc.next_fire_times = [iso_utc(m) for m in upcoming[:SHOWN_FIRINGS]]
            raise
        record = ScheduleRecord(
            schedule_id=f"s_{uuid.uuid4().hex[:20]}",
            user_id=user_id,
            name=name.strip(),
            expression=expression,
            timezone=timezone,
            goal=goal,
            capability=capability,
            context=context,
            created_at=now.isoformat(),
            updated_at=now.isoformat(),
        )
        self._store.create(record, self.limit)
        try:
            self._scheduler.create(self._entry(record))
        except Exception:
            self._undo("create", lambda: self._store.delete(user_id, record.schedule_id), record)
            raise
        log.info("schedule created", extra={"schedule_id": record.schedule_id})
        return record

    def _check_request(self, user_id: str, goal: str, capability: str, context: dict[str, Any]) -> None:
        if not goal:
            raise ScheduleRejected("goal", "empty_goal", "the goal is empty")
        if len(goal) > GOAL_LIMIT:
            raise ScheduleRejected(
                "goal", "goal_too_long", f"the goal has {len(goal)} characters; at most {GOAL_LIMIT}"
            )
        size = len(json.dumps(context, separators=(",", ":"), ensure_ascii=False).encode())
        if size > CONTEXT_LIMIT:
            raise ScheduleRejected(
                "context", "context_too_large", f"the context is {size} bytes; at most {CONTEXT_LIMIT}"
            )
        if capability == AUTO:
            try:
                chosen = self._choose(goal, None)
            except MissionRequestError as exc:
                raise ScheduleRejected(
                    "capability", "no_capability_fits", f"{exc} (or name one instead of auto)"
                ) from None
        else:
            installed = self._capabilities()
            if capability not in installed:
                raise ScheduleRejected(
                    "capability",
                    "unknown_capability",
                    f"unknown capability '{capability}'; installed: {', '.join(installed)}, or auto",
                )
            chosen = capability
        if self._check is None:
            return
        try:  # what each firing will ask, checked as the launcher checks it (the first firing's capability)
            self._check(
                MissionRequest.parse(
                    capability=chosen, goal=goal, user_id=user_id, context=context, trigger=TriggerSource.SCHEDULE
                )
            )
        except MissionRequestError as exc:
            raise ScheduleRejected("context", "request_refused", f"its missions could not start: {exc}") from None
        except AgentDisabled:
            pass  # an operator's pause of an agent: the schedule fires once it is enabled again

    def list(self, user_id: str) -> list[ScheduleRecord]:
        return self._store.list(user_id)

    def get(self, user_id: str, schedule_id: str) -> ScheduleRecord:
        """The user's schedule; NotFound for another user's, as for none."""
        return self._store.get(user_id, schedule_id)

    def pause(self, user_id: str, schedule_id: str) -> ScheduleRecord:
        return self._set_state(user_id, schedule_id, "paused")

    def resume(self, user_id: str, schedule_id: str) -> ScheduleRecord:
        return self._set_state(user_id, schedule_id, "enabled")

    def _set_state(self, user_id: str, schedule_id: str, state: ScheduleState) -> ScheduleRecord:
        record = self._store.get(user_id, schedule_id)
        if record.state == state:
            return record  # pausing a paused schedule changes nothing
        changed = self._store.set_state(user_id, schedule_id, state)
        try:
            try:
                self._scheduler.update(self._entry(changed))
            except NotFound:  # a Scheduler schedule lost to an earlier failure: made again from the record
                self._scheduler.create(self._entry(changed))
        except Exception:
            self._undo(state, lambda: self._store.set_state(user_id, schedule_id, record.state), record)
            raise
        log.info("schedule %s", state, extra={"schedule_id": schedule_id})
        return changed

    def delete(self, user_id: str, schedule_id: str) -> None:
        """NotFound when the user has no such schedule; DependencyUnavailable (nothing changed) on failure."""
        record = self._store.get(user_id, schedule_id)
        self._scheduler.delete(schedule_id)
        try:
            self._store.delete(user_id, schedule_id)
        except Exception:
            self._undo("delete", lambda: self._scheduler.create(self._entry(record)), record)
            raise
        log.info("schedule deleted", extra={"schedule_id": schedule_id})

    @staticmethod
    def _undo(what: str, undo: Callable[[], object], record: ScheduleRecord) -> None:
        """Put back what the failed request changed; when even that fails, say so loudly (an operator
        reconciles it; the request itself still fails)."""
        try:
            undo()
        except Exception:
            log.exception("schedule %s failed and could not be undone", what, extra={"schedule_id": record.schedule_id})

    def view(self, record: ScheduleRecord) -> dict[str, Any]:
        """The schedule as the API shows it, with its next firings (none while paused)."""
        upcoming = []
        if record.state == "enabled":
            upcoming = next_fire_times(record.parsed(), self._now(), SHOWN_FIRINGS, record.timezone)
        return {
            **record.model_dump(mode="json", exclude={"user_id"}),
            "next_fire_times": fire_times_view(upcoming, record.timezone),
        }

    def _entry(self, record: ScheduleRecord) -> SchedulerEntry:
        return SchedulerEntry(
            name=record.schedule_id,
            expression=record.expression,
            timezone=record.timezone,
            input={
                "kind": USER_SCHEDULE,
                "user_id": record.user_id,
                "schedule_id": record.schedule_id,
                "scheduled_time": SCHEDULED_TIME_PLACEHOLDER,
            },
            enabled=record.state == "enabled",
            description=f"a user's schedule ({record.schedule_id})",
        )

    # -- firing -------------------------------------------------------------------------------------------

    def fire(self, event: dict[str, Any]) -> dict[str, Any]:
        """One firing of a user's schedule (the schedule function): a mission through the launcher, or
        nothing, with the reason."""
        from missions.service.triggers.rules import normalize_scheduled_time

        user_id, schedule_id = str(event.get("user_id") or ""), str(event.get("schedule_id") or "")
        scheduled_time = normalize_scheduled_time(event.get("scheduled_time"))
        facts = {"schedule_id": schedule_id, "scheduled_time": scheduled_time}
        try:
            record = self._store.get(user_id, schedule_id)
        except NotFound:
            log.warning("firing of a deleted schedule: nothing started", extra=facts)
            return {**facts, "outcome": "skipped", "reason": "the schedule was deleted"}
        if record.state != "enabled":
            firing = Firing(scheduled_time=scheduled_time, outcome="skipped", reason="the schedule is paused")
        else:
            firing = self._start(record, scheduled_time)
        try:
            self._store.record_firing(user_id, schedule_id, firing)
        except NotFound:
            pass  # deleted meanwhile: nothing to keep it on
        log.info("schedule fired: %s", firing.outcome, extra={**facts, "mission_id": firing.mission_id})
        return {**facts, **firing.model_dump(mode="json", exclude={"at", "scheduled_time"})}

    def _start(self, record: ScheduleRecord, scheduled_time: str) -> Firing:
        trigger = {"kind": "schedule", "schedule_id": record.schedule_id, "scheduled_time": scheduled_time}
        try:
            capability = self._choose(record.goal, None if record.capability == AUTO else record.capability)
            request = MissionRequest.parse(
                capability=capability,
                goal=record.goal,
                user_id=record.user_id,
                context={**record.context, "trigger": trigger},
                trigger=TriggerSource.SCHEDULE,
                idempotency_key=f"user-schedule:{record.schedule_id}:{scheduled_time}",
            )
            result = self._submit(request)
        except MissionRequestError as exc:  # the goal cannot run now (a capability removed, a repository gone)
            return Firing(scheduled_time=scheduled_time, outcome="rejected", reason=str(exc)[:500])
        return Firing(scheduled_time=scheduled_time, outcome=result.status, mission_id=result.mission_id)

    # -- the user's data (missions.ports.accounts.PersonalStore) -----------------------------------------

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        for record in self._store.list(user_id):
            yield "schedule", record.model_dump(mode="json")

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        """The Scheduler schedules first (each has its record, so a failure leaves records that lead a second
        run to what is left), then every record and the user's count."""
        records = self._store.list(user_id)
        for record in records:
            self._scheduler.delete(record.schedule_id)
        self._store.delete_all(user_id)
        return len(records)


__all__ = ["USER_SCHEDULE", "ScheduleService", "is_user_schedule"]
