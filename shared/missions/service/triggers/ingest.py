"""Triggers arriving: webhooks, bus events, schedule ticks and memory changes, down to the launcher.

`Ingest` is the trigger functions' entry (webhook, trigger, schedule, memory stream), one method each.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from missions.core.errors import DependencyUnavailable
from missions.core.memory.longterm import MemoryChange, is_internal
from missions.core.triggers.specs import memory_change_event
from missions.ports.bus import EventBus
from missions.ports.flow import FlowRecords
from missions.ports.memory import LongTermMemory
from missions.ports.schedules import Scheduler
from missions.ports.webhooks import DeliveryStore, WebhookSources
from missions.service.flow.triggers import TriggerFlowControl, is_timer
from missions.service.launcher import Launcher
from missions.service.triggers.rules import cancellations_for_event, requests_for_event, requests_for_schedule
from missions.service.triggers.schedules import ScheduleService, is_user_schedule
from missions.service.triggers.webhooks import WebhookRejected, bus_event, verify_delivery

log = logging.getLogger(__name__)


def _response(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}


def receive_webhook(
    event: dict[str, Any],
    *,
    sources: WebhookSources,
    deliveries: DeliveryStore,
    bus: EventBus,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """POST /webhooks/{source}: 202 accepted, 200 duplicate, 4xx with the reason, 503 to retry."""
    source = (event.get("pathParameters") or {}).get("source") or event.get("rawPath", "").rstrip("/").split("/")[-1]
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
    try:
        delivery = verify_delivery(
            source_name=source,
            headers=event.get("headers") or {},
            body=body,
            sources=sources,
            deliveries=deliveries,
            now=now(),
        )
    except WebhookRejected as rejected:
        return _response(rejected.status, {"statusCode": rejected.status, "message": rejected.reason})
    if delivery.duplicate:
        return _response(200, {"duplicate": True, "delivery_id": delivery.delivery_id})
    try:
        bus.publish([bus_event(delivery)])
    except DependencyUnavailable as exc:
        deliveries.forget(delivery.delivery_id, delivery.source)  # let the sender's retry through
        log.error("webhook delivery could not reach the bus: %s", exc, extra={"delivery_id": delivery.delivery_id})
        return _response(503, {"statusCode": 503, "message": "could not accept the delivery now; retry"})
    return _response(202, {"accepted": True, "delivery_id": delivery.delivery_id})


def dispatch_event(
    event: dict[str, Any],
    launcher: Launcher,
    records: FlowRecords | None = None,
    flow: TriggerFlowControl | None = None,
) -> dict[str, Any]:
    """A bus event a rule matched: the missions of the keys it cancels are cancelled, then every trigger it
    satisfies submits its mission through its flow control (missions.service.flow.triggers)."""
    capabilities = launcher.capabilities.load_all()
    flow = flow or TriggerFlowControl(launcher, records)
    cancelled = flow.cancel_all(cancellations_for_event(event, capabilities))
    results = flow.submit_all(requests_for_event(event, capabilities), origin=str(event.get("detail-type", "event")))
    return {**results, "cancelled": cancelled} if cancelled else results


def fan_out_schedule(
    event: dict[str, Any],
    launcher: Launcher,
    memory: LongTermMemory,
    all_users: Callable[[], list[str]],
    flow: TriggerFlowControl | None = None,
) -> dict[str, Any]:
    """One scheduler tick: one mission per user it concerns (idempotent per schedule, time and user)."""
    requests = requests_for_schedule(event, launcher.capabilities.load_all(), memory, all_users)
    flow = flow or TriggerFlowControl(launcher)
    return flow.submit_all(requests, origin=f"schedule {event.get('schedule_id')}")


def publish_memory_change(change: MemoryChange | None, bus: EventBus) -> None:
    """One memory change -> one `memory.changed` event. Raising marks just this stream record failed."""
    if change is None or is_internal(tuple(change.namespace)):
        return  # internal namespaces (e.g. the user registry) never trigger missions
    bus.publish([memory_change_event(change)])


class Ingest:
    """One method per trigger function. Each dependency is made on first use, so a function builds only
    what its own trigger needs (the webhook function has no dispatch table, the schedule function of a
    user's schedule reads no memory)."""

    def __init__(
        self,
        *,
        launcher: Callable[[], Launcher],
        bus: Callable[[], EventBus],
        webhook_sources: Callable[[], WebhookSources],
        deliveries: Callable[[], DeliveryStore],
        memory: Callable[[], LongTermMemory],
        all_users: Callable[[], list[str]],
        schedules: Callable[[], ScheduleService],
        flow_records: Callable[[], FlowRecords] | None = None,
        timers: Callable[[], Scheduler | None] | None = None,
        now: Callable[[], float] = time.time,
    ):
        """`timers`: the Scheduler group of debounce timers; `now`: the clock they count on (the dev server's)."""
        self._launcher = launcher
        self._bus = bus
        self._webhook_sources = webhook_sources
        self._deliveries = deliveries
        self._memory = memory
        self._all_users = all_users
        self._schedules = schedules
        self._flow_records = flow_records
        self._timers, self._now = timers, now

    def webhook(self, event: dict[str, Any]) -> dict[str, Any]:
        """POST /webhooks/{source} (`receive_webhook`)."""
        return receive_webhook(event, sources=self._webhook_sources(), deliveries=self._deliveries(), bus=self._bus())

    def bus_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """An event a rule of the bus matched (`dispatch_event`)."""
        return dispatch_event(event, self._launcher(), self._records(), self._flow())

    def schedule(self, event: dict[str, Any]) -> dict[str, Any]:
        """A firing: of a user's own schedule (one mission, theirs), of a debounce's timer (flow control), or of
        a capability's schedule (one per user)."""
        if is_user_schedule(event):
            return self._schedules().fire(event)
        if is_timer(event):
            return self._flow().fire(event)
        return fan_out_schedule(event, self._launcher(), self._memory(), self._all_users, self._flow())

    def _records(self) -> FlowRecords | None:
        return self._flow_records() if self._flow_records is not None else None

    def _flow(self) -> TriggerFlowControl:
        return TriggerFlowControl(self._launcher(), self._records(), now=self._now, timers=self._timers)

    def memory_changed(self, change: MemoryChange | None) -> None:
        """One change of the memory table -> one `memory.changed` event on the bus."""
        publish_memory_change(change, self._bus())


__all__ = ["Ingest", "dispatch_event", "fan_out_schedule", "publish_memory_change", "receive_webhook"]
