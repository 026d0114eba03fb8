"""Webhook ingestion: authenticate a delivery, refuse replays, hand it to the event bus.

Signature scheme (what a sender must do)
----------------------------------------
Each source has a shared secret. A delivery is a POST of a JSON object to
``/webhooks/<source>`` with these headers (names are case-insensitive):

* ``x-missions-timestamp``: the unix time in whole seconds when the delivery was signed;
* ``x-missions-delivery``: a unique id for the delivery, 1 to 128 characters of
  ``[A-Za-z0-9_-.:]``; a redelivery of the same event keeps its id (it is answered 200
  ``{"duplicate": true}`` and starts nothing);
* ``x-missions-signature``: ``sha256=<hex>``, the HMAC-SHA256 under the secret of
  ``f"{timestamp}.".encode() + raw_body`` (the timestamp exactly as sent in its header);
* ``x-missions-event`` (optional): the event type; otherwise the body's ``"type"`` field.

``sign(secret, timestamp, body)`` computes the header value. The timestamp is signed so a
captured delivery cannot be replayed after 300 s; the delivery id is remembered (a week) so it
cannot be replayed within them either. The signature is checked before the id is remembered:
someone without the secret cannot use up ids a real sender will need.

Nothing here imports boto3 at module level: the web handler imports this module on every
cold start, and the AWS adapters are only built when configured.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from missions.core.trigger_specs import WEBHOOK_SOURCE
from missions.ports.webhooks import SOURCE_NAME, DeliveryStore, WebhookSources

TIMESTAMP_HEADER = "x-missions-timestamp"
DELIVERY_HEADER = "x-missions-delivery"
SIGNATURE_HEADER = "x-missions-signature"
EVENT_HEADER = "x-missions-event"

TOLERANCE_SECONDS = 300
BUS_SOURCE = WEBHOOK_SOURCE  # one name for the source of deliveries on the bus
BUS_ENTRY_LIMIT = 256 * 1024  # PutEvents: Source + DetailType + Detail of one entry, in UTF-8 bytes

DELIVERY_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_SIGNATURE = re.compile(r"^sha256=([0-9a-fA-F]{64})$")
_MAX_EVENT_TYPE = 128


class WebhookRejected(Exception):
    """A delivery refused; `status` is the HTTP answer, `reason` a short, safe explanation."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"{status}: {reason}")
        self.status, self.reason = status, reason


def sign(secret: str | bytes, timestamp: int | str, body: bytes) -> str:
    """The `x-missions-signature` value for a body signed at `timestamp`."""
    key = secret.encode() if isinstance(secret, str) else secret
    digest = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Delivery:
    """An authenticated delivery. `duplicate` means its id was seen before: start nothing."""

    source: str
    delivery_id: str
    event_type: str
    payload: dict[str, Any]
    user_id: str
    duplicate: bool = False


def verify_delivery(
    *,
    source_name: str,
    headers: Mapping[str, str],
    body: bytes,
    sources: WebhookSources,
    deliveries: DeliveryStore,
    now: float,
) -> Delivery:
    """Authenticate a delivery and record its id; WebhookRejected(status, reason) when refused.

    Checks run cheapest and least revealing first: the source (404), the size (413), the
    headers (401), the clock (401 stale), the signature (401), the body (400, and 413 when it
    would not fit on the event bus). Only then is the id remembered, so a forged or malformed
    delivery never uses up an id.
    """
    source = sources.get(source_name) if SOURCE_NAME.match(source_name or "") else None
    if source is None:
        raise WebhookRejected(404, "unknown webhook source")
    if len(body) > source.max_body_bytes:
        raise WebhookRejected(413, f"body over {source.max_body_bytes} bytes")

    lowered = {str(k).lower(): v for k, v in headers.items()}
    timestamp = _header(lowered, TIMESTAMP_HEADER)
    delivery_id = _header(lowered, DELIVERY_HEADER)
    signature = _header(lowered, SIGNATURE_HEADER)
    if not _TIMESTAMP.match(timestamp):
        raise WebhookRejected(401, f"missing or malformed {TIMESTAMP_HEADER}")
    if not DELIVERY_ID.match(delivery_id):
        raise WebhookRejected(401, f"missing or malformed {DELIVERY_HEADER}")
    given = _SIGNATURE.match(signature)
    if not given:
        raise WebhookRejected(401, f"missing or malformed {SIGNATURE_HEADER}")
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        raise WebhookRejected(401, "stale timestamp")
    expected = sign(source.secret, timestamp, body).removeprefix("sha256=")
    if not hmac.compare_digest(expected, given.group(1).lower()):
        raise WebhookRejected(401, "bad signature")

    try:
        payload = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # bad UTF-8 or JSON, NaN/Infinity, absurd nesting
        payload = None
    if not isinstance(payload, dict):
        raise WebhookRejected(400, "the body is not a JSON object")
    event_type = _header(lowered, EVENT_HEADER) or (payload["type"] if isinstance(payload.get("type"), str) else "")
    if len(event_type) > _MAX_EVENT_TYPE:
        raise WebhookRejected(400, f"event type over {_MAX_EVENT_TYPE} characters")

    delivery = Delivery(
        source=source.name,
        delivery_id=delivery_id,
        event_type=event_type,
        payload=payload,
        user_id=source.user_id,
    )
    entry = bus_event(delivery)
    if sum(len(entry[k].encode()) for k in ("Source", "DetailType", "Detail")) > BUS_ENTRY_LIMIT:
        raise WebhookRejected(413, "payload too large for the event bus")
    if not deliveries.remember(delivery_id, source.name):
        return replace(delivery, duplicate=True)
    return delivery


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON the event bus accepts")


def _header(headers: Mapping[str, Any], name: str) -> str:
    value = headers.get(name)
    if isinstance(value, (list, tuple)):  # multi-value header maps
        value = value[0] if value else None
    return value.strip() if isinstance(value, str) else ""


def bus_event(delivery: Delivery, event_bus_name: str | None = None) -> dict[str, Any]:
    """The PutEvents entry announcing an accepted delivery; rules from `trigger_specs.webhook_rules` match it."""
    detail = {
        "delivery_id": delivery.delivery_id,
        "source": delivery.source,
        "event_type": delivery.event_type,
        "user_id": delivery.user_id,
        "payload": delivery.payload,
    }
    entry: dict[str, Any] = {
        "Source": BUS_SOURCE,
        "DetailType": f"webhook.{delivery.source}",
        "Detail": json.dumps(detail, separators=(",", ":"), ensure_ascii=False),
    }
    if event_bus_name:
        entry["EventBusName"] = event_bus_name
    return entry


__all__ = [
    "BUS_SOURCE",
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "TOLERANCE_SECONDS",
    "Delivery",
    "WebhookRejected",
    "bus_event",
    "sign",
    "verify_delivery",
]
