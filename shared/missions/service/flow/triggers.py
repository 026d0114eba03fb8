"""Triggers' flow control: what a trigger does with each mission request an event makes, per key
(missions.core.triggers.declared.TriggerFlow), and the record it keeps of every decision.

A trigger that declares `flow` renders a key from each event (rules: `flow_key`); its missions share that
key as their concurrency key, so they run one at a time (missions.service.flow.multitask): the next waits
(enqueued), or with `singleton` is skipped or replaces the active one. A `throttle` counts the starts of a key
per fixed window with one conditional write (never past its limit); a start over it is dropped. A `cancel_on`
event cancels the key's missions, held ones first so the active one's end hands its key to nobody.

Every decision, with or without `flow`, is a record on the trigger (`GET /triggers/{name}/decisions`): started,
enqueued, skipped, replaced, throttled, held for the user's budget, cancelled by an event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from missions.core.capability.registry import Capability
from missions.core.errors import MissionRequestError
from missions.core.mission.requests import MissionRequest
from missions.core.triggers.declared import GoalTemplate
from missions.ports.flow import Decided, FlowRecords, TriggerDecision
from missions.service.dispatch import DispatchResult
from missions.service.flow.multitask import KeyBusy
from missions.service.launcher import Launcher
from missions.service.triggers.rules import Cancellation

log = logging.getLogger(__name__)


def trigger_named(capability: Capability, name: str) -> GoalTemplate | None:
    """The capability's trigger of that name ("<capability>.<trigger id>")."""
    prefix, _, trigger_id = name.partition(".")
    return capability.triggers.by_id().get(trigger_id) if prefix == capability.name else None


class TriggerFlowControl:
    def __init__(self, launcher: Launcher, records: FlowRecords | None = None, now: Callable[[], float] = time.time):
        self._launcher, self._records, self._now = launcher, records, now

    def submit_all(self, requests: Iterable[MissionRequest], origin: str) -> dict[str, list[str]]:
        """Each request through its trigger's flow control and the launcher; what became of each, by outcome."""
        results: dict[str, list[str]] = {
            "started": [],
            "queued": [],
            "duplicate": [],
            "rejected": [],
            "skipped": [],
            "throttled": [],
        }
        for request in requests:
            name = str((request.context.get("trigger") or {}).get("name") or origin)
            key = request.concurrency_key
            if key is not None and not self._within_throttle(request, name, key):
                self._record(name, request.user_id, "throttled", key, None, "over the trigger's throttle")
                results["throttled"].append(key)
                continue
            try:
                outcome = self._launcher.submit(request)
            except KeyBusy as busy:  # singleton: skip
                self._record(name, request.user_id, "skipped", key, None, f"mission {busy.active} of its key is active")
                results["skipped"].append(busy.active)
                continue
            except MissionRequestError as exc:  # a trigger whose goal cannot run: recorded, not retried forever
                log.error("trigger produced an invalid mission: %s", exc, extra={"origin": origin})
                results["rejected"].append(str(exc))
                continue
            results[outcome.status].append(outcome.mission_id)
            if outcome.status != "duplicate":
                detail = f"replacing mission {outcome.replaced}" if outcome.replaced else ""
                self._record(name, request.user_id, _decided(outcome), key, outcome.mission_id, detail)
            log.info("trigger %s: mission %s", outcome.status, outcome.mission_id, extra={"origin": origin})
        return results

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

    def _within_throttle(self, request: MissionRequest, name: str, key: str) -> bool:
        trigger = trigger_named(self._launcher.capabilities.load(request.capability), name)
        throttle = trigger.flow.throttle if trigger is not None and trigger.flow is not None else None
        if throttle is None or self._records is None:
            return True
        period = throttle.period_seconds
        window = int(self._now() // period) * period
        return self._records.admit(name, key, window, throttle.limit, expires_at=window + period + 3600)

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


def _decided(outcome: DispatchResult) -> Decided:
    if outcome.held == "key":
        return "enqueued"
    if outcome.held == "budget":
        return "held_for_budget"
    return "replaced" if outcome.replaced else "started"


__all__ = ["TriggerFlowControl", "trigger_named"]
