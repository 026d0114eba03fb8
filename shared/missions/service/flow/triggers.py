"""Triggers' flow control: what a trigger does with each mission request an event makes, per key
(missions.core.triggers.declared.TriggerFlow), and the record it keeps of every decision.

A trigger that declares `flow` renders a key from each event (rules: `flow_key`); its missions share that
key as their concurrency key, so they run one at a time (missions.service.flow.multitask): the next waits
(enqueued), or with `singleton` is skipped or replaces the active one. A `throttle` counts the starts of a key
per fixed window with one conditional write (never past its limit); a start over it is dropped. A `cancel_on`
event cancels the key's missions, held ones first so the active one's end hands its key to nobody.

A `debounce_seconds` keeps a key's latest event (one conditional write per event) and sets a one-time EventBridge
Scheduler schedule when a burst begins; when it fires (the schedule function), the burst's last event starts its
mission if no event came for the quiet period, else the timer is set again for the period's new end. No function
waits: a burst of a thousand events is a thousand writes, one timer and one mission.

Every decision, with or without `flow`, is a record on the trigger (`GET /triggers/{name}/decisions`): started,
enqueued, skipped, replaced, throttled, debounced, held for the user's budget, cancelled by an event.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from missions.core.capability.registry import Capability
from missions.core.errors import ConflictError, MissionRequestError, NotFound
from missions.core.mission.requests import MissionRequest
from missions.core.triggers.cron import at_expression
from missions.core.triggers.declared import GoalTemplate, Throttle
from missions.ports.flow import Decided, FlowRecords, TriggerDecision
from missions.ports.schedules import Scheduler, SchedulerEntry
from missions.service.dispatch import DispatchResult
from missions.service.flow.multitask import KeyBusy
from missions.service.launcher import Launcher
from missions.service.triggers.rules import Cancellation

log = logging.getLogger(__name__)


def trigger_named(capability: Capability, name: str) -> GoalTemplate | None:
    """The capability's trigger of that name ("<capability>.<trigger id>")."""
    prefix, _, trigger_id = name.partition(".")
    return capability.triggers.by_id().get(trigger_id) if prefix == capability.name else None


TIMER_KIND = "flow_timer"  # the input of a debounce's one-time schedule (the schedule function fires it)


def is_timer(event: dict[str, Any]) -> bool:
    return event.get("kind") == TIMER_KIND


class TriggerFlowControl:
    """`timers`: EventBridge Scheduler's group (one-time schedules that invoke the schedule function), for debounce;
    `now`: seconds since the epoch (the dev server's clock there)."""

    def __init__(
        self,
        launcher: Launcher,
        records: FlowRecords | None = None,
        now: Callable[[], float] = time.time,
        timers: Callable[[], Scheduler | None] | None = None,
    ):
        self._launcher, self._records, self._now, self._timers = launcher, records, now, timers

    def submit_all(self, requests: Iterable[MissionRequest], origin: str) -> dict[str, list[str]]:
        """Each request through its trigger's flow control and the launcher; what became of each, by outcome."""
        results: dict[str, list[str]] = {key: [] for key in _OUTCOMES}
        for request in requests:
            name = str((request.context.get("trigger") or {}).get("name") or origin)
            key = request.concurrency_key
            trigger = self._trigger(request, name)
            quiet = trigger.flow.debounce_seconds if trigger is not None and trigger.flow is not None else None
            if key is not None and quiet is not None and self._debounce(request, name, _per_user(request, key), quiet):
                results["debounced"].append(key)
                continue
            self._start(request, name, key, results, origin)
        return results

    def fire(self, event: dict[str, Any]) -> dict[str, Any]:
        """A debounce's timer went off: start the burst's last event if its quiet period is over (else set the
        timer again for its new end). Several timers of one burst start it once (the take is conditional)."""
        name, key = str(event.get("trigger")), str(event.get("key"))
        if self._records is None:
            return {"fired": None}
        for _ in range(8):
            pending = self._records.pending(name, key)
            if pending is None:
                return {"fired": None}
            if pending.due > self._now():
                self._arm(name, key, pending.due)
                return {"rearmed": pending.due}
            if self._records.take(name, key, pending.version):
                request = MissionRequest.model_validate(pending.request)
                results: dict[str, list[str]] = {outcome: [] for outcome in _OUTCOMES}
                note = f"the last of {pending.version} events"
                self._start(request, name, request.concurrency_key, results, f"debounce of {name}", note)
                return {"fired": key, **results}
        raise ConflictError(f"the burst of {name} {key} kept changing while its timer fired")

    def _debounce(self, request: MissionRequest, name: str, key: str, quiet: int) -> bool:
        """Keep the event as its key's latest and push the key's quiet period; False when nothing here can
        wait (no records or no timers): it starts at once."""
        timers = self._timers() if self._timers is not None else None
        if self._records is None or timers is None:
            log.warning("trigger %s cannot debounce here (no timers): its event starts a mission now", name)
            return False
        due = int(self._now()) + quiet
        before = self._records.debounce(name, key, request.model_dump(mode="json"), due)
        if before is None:  # a burst begins: its timer (later events only push the end its timer will find)
            self._arm(name, key, due)
        self._record(
            name, request.user_id, "debounced", request.concurrency_key, None, f"the burst's quiet period ends at {due}"
        )
        return True

    def _arm(self, name: str, key: str, due: int) -> None:
        timers = self._timers() if self._timers is not None else None
        assert timers is not None
        entry = SchedulerEntry(
            name="flow-" + hashlib.sha256(f"{name}\n{key}".encode()).hexdigest()[:40],
            expression=at_expression(datetime.fromtimestamp(due, UTC)),
            timezone="UTC",
            input={"kind": TIMER_KIND, "trigger": name, "key": key},
            description=f"debounce of {name}"[:512],
            one_time=True,
        )
        try:
            timers.update(entry)
        except NotFound:
            timers.create(entry)

    def _start(
        self,
        request: MissionRequest,
        name: str,
        key: str | None,
        results: dict[str, list[str]],
        origin: str,
        note: str = "",
    ) -> None:
        throttle = self._throttle(request, name)
        if key is not None and throttle is not None and not self._within(request, name, key, throttle):
            detail = "over the trigger's throttle"
            if throttle.overflow == "queue" and self._park(request, name, key, throttle):
                detail += ": it starts in the next window with room"
            self._record(name, request.user_id, "throttled", key, None, detail)
            results["throttled"].append(key)
            return
        try:
            outcome = self._launcher.submit(request)
        except KeyBusy as busy:  # singleton: skip
            self._record(name, request.user_id, "skipped", key, None, f"mission {busy.active} of its key is active")
            results["skipped"].append(busy.active)
            return
        except MissionRequestError as exc:  # a trigger whose goal cannot run: recorded, not retried forever
            log.error("trigger produced an invalid mission: %s", exc, extra={"origin": origin})
            results["rejected"].append(str(exc))
            return
        results[outcome.status].append(outcome.mission_id)
        if outcome.status != "duplicate":
            detail = "; ".join(
                part for part in (note, f"replacing mission {outcome.replaced}" if outcome.replaced else "") if part
            )
            self._record(name, request.user_id, _decided(outcome), key, outcome.mission_id, detail)
        log.info("trigger %s: mission %s", outcome.status, outcome.mission_id, extra={"origin": origin})

    def _trigger(self, request: MissionRequest, name: str) -> GoalTemplate | None:
        return trigger_named(self._launcher.capabilities.load(request.capability), name)

    def cancel_all(self, cancellations: Iterable[Cancellation]) -> list[str]:
        """Cancel the missions of each cancelled key; returns their ids."""
        cancelled: list[str] = []
        for cancellation in cancellations:
            reason = f"cancelled_by_event:{cancellation.event_type}"
            for mission_id in self._launcher.cancel_key(cancellation.user_id, cancellation.concurrency_key, reason):
                self._record(
                    cancellation.trigger, cancellation.user_id, "cancelled_by_event", cancellation.concurrency_key,
                    mission_id, f"a {cancellation.event_type} event",
                )  # fmt: skip
                cancelled.append(mission_id)
        return cancelled

    def _throttle(self, request: MissionRequest, name: str) -> Throttle | None:
        trigger = self._trigger(request, name)
        return trigger.flow.throttle if trigger is not None and trigger.flow is not None else None

    def _park(self, request: MissionRequest, name: str, key: str, throttle: Throttle) -> bool:
        """Keep a request over its throttle until the next window (as a burst of its own, whose timer fires then);
        False where nothing can wait (no records or no timers): it is dropped."""
        timers = self._timers() if self._timers is not None else None
        if self._records is None or timers is None:
            return False
        period = throttle.period_seconds
        due = (int(self._now()) // period + 1) * period
        parked = f"{_per_user(request, key)}#{request.idempotency_key or request.mission_id or due}"
        if self._records.debounce(name, parked, request.model_dump(mode="json"), due) is None:
            self._arm(name, parked, due)
        return True

    def _within(self, request: MissionRequest, name: str, key: str, throttle: Throttle) -> bool:
        if self._records is None:
            return True
        period = throttle.period_seconds
        window = int(self._now() // period) * period
        return self._records.admit(
            name, _per_user(request, key), window, throttle.limit, expires_at=window + period + 3600
        )

    def _record(
        self, trigger: str, user_id: str, decision: Decided, key: str | None, mission_id: str | None, detail: str
    ) -> None:
        if self._records is None:
            return
        try:
            self._records.record(
                TriggerDecision(
                    trigger=trigger, user_id=user_id, decision=decision, key=key, mission_id=mission_id, detail=detail
                )
            )
        except Exception:  # the decision was made and acted on; only its record is missing
            log.exception("decision of trigger %s not recorded", trigger)


def _per_user(request: MissionRequest, key: str) -> str:
    """A key as flow control's records keep it: keys are a user's own (two users' order 7 are two orders)."""
    return f"{request.user_id}/{key}"


_OUTCOMES = ("started", "queued", "duplicate", "rejected", "skipped", "throttled", "debounced")


def _decided(outcome: DispatchResult) -> Decided:
    if outcome.held == "key":
        return "enqueued"
    if outcome.held == "budget":
        return "held_for_budget"
    return "replaced" if outcome.replaced else "started"


__all__ = ["TIMER_KIND", "TriggerFlowControl", "is_timer", "trigger_named"]
