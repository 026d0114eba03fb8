"""Triggers arriving: webhooks, bus events, schedule ticks and memory changes, down to the dispatcher."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from aws_lambda_powertools import Logger

from missions import capability as registry
from missions.starter import MissionRequestError

logger = Logger(service="missions-ingest", child=True)


def _response(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}


def receive_webhook(event: dict[str, Any], runtime: Any) -> dict[str, Any]:
    """POST /webhooks/{source}: 202 accepted, 200 duplicate, 4xx with the reason."""
    from missions.webhooks import WebhookRejected, bus_event, verify_delivery

    source = (event.get("pathParameters") or {}).get("source") or event.get("rawPath", "").rstrip("/").split("/")[-1]
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
    try:
        delivery = verify_delivery(
            source_name=source,
            headers=event.get("headers") or {},
            body=body,
            sources=runtime.webhook_sources,
            deliveries=runtime.deliveries,
            now=time.time(),
        )
    except WebhookRejected as rejected:
        return _response(rejected.status, {"statusCode": rejected.status, "message": rejected.reason})
    if delivery.duplicate:
        return _response(200, {"duplicate": True, "delivery_id": delivery.delivery_id})
    entry = {**bus_event(delivery), "EventBusName": runtime.settings.event_bus}
    try:
        result = runtime.eventbridge.put_events(Entries=[entry])
        if result.get("FailedEntryCount"):
            raise RuntimeError(result["Entries"][0].get("ErrorMessage", "put_events failed"))
    except Exception:
        runtime.deliveries.forget(delivery.delivery_id)  # let the sender's retry through
        logger.exception("webhook delivery could not reach the bus", extra={"delivery_id": delivery.delivery_id})
        return _response(503, {"statusCode": 503, "message": "could not accept the delivery now; retry"})
    return _response(202, {"accepted": True, "delivery_id": delivery.delivery_id})


def dispatch_event(event: dict[str, Any], runtime: Any) -> dict[str, Any]:
    """A bus event a rule matched: every trigger it satisfies becomes a dispatched mission."""
    from missions.trigger_rules import requests_for_event

    requests = requests_for_event(event, registry.load_all())
    return _submit_all(requests, runtime, origin=event.get("detail-type", "event"))


def fan_out_schedule(event: dict[str, Any], runtime: Any) -> dict[str, Any]:
    """One scheduler tick: one mission per user it concerns (idempotent per schedule, time and user)."""
    from missions.trigger_rules import requests_for_schedule

    requests = requests_for_schedule(event, registry.load_all(), runtime.memory, runtime.service.all_users)
    return _submit_all(requests, runtime, origin=f"schedule {event.get('schedule_id')}")


def publish_memory_change(record: Any, runtime: Any) -> None:
    """One stream record -> one `memory.changed` event. Raising marks just this record failed."""
    from missions.longterm.dynamodb import change_from_stream_record
    from missions.trigger_rules import memory_change_event

    raw = record.raw_event if hasattr(record, "raw_event") else record
    change = change_from_stream_record(raw)
    if change is None or change.namespace[0].startswith("_"):
        return  # internal namespaces (e.g. the user registry) never trigger missions
    entry = {**memory_change_event(change), "EventBusName": runtime.settings.event_bus}
    result = runtime.eventbridge.put_events(Entries=[entry])
    if result.get("FailedEntryCount"):
        raise RuntimeError(result["Entries"][0].get("ErrorMessage", "put_events failed"))


def _submit_all(requests: list[Any], runtime: Any, origin: str) -> dict[str, Any]:
    results: dict[str, list[str]] = {"started": [], "queued": [], "duplicate": [], "rejected": []}
    for request in requests:
        try:
            outcome = runtime.service.submit(request)
        except MissionRequestError as exc:  # a trigger whose goal cannot run: recorded, not retried forever
            logger.error("trigger produced an invalid mission", extra={"origin": origin, "reason": str(exc)})
            results["rejected"].append(str(exc))
            continue
        results[outcome.status].append(outcome.mission_id)
    return results
