"""Webhook ingestion: authenticate a delivery, refuse replays, hand it to the event bus.

Signature scheme: Standard Webhooks (https://www.standardwebhooks.com)
----------------------------------------------------------------------
Each source has a secret ``whsec_<base64>`` (the base64 of the HMAC key). A delivery is a POST
of a JSON object to ``/webhooks/<source>`` with these headers (names are case-insensitive):

* ``webhook-id``: the message id, 1 to 128 characters of ``[A-Za-z0-9_-.:]``; a redelivery of
  the same message keeps its id (it is answered 200 ``{"duplicate": true}`` and starts nothing);
* ``webhook-timestamp``: the unix time in whole seconds when the delivery was signed;
* ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of f"{id}.{timestamp}.{body}">`` under the
  key; several may be sent, separated by spaces (a sender rotating its secret signs with both),
  and one that matches is enough. Other versions (``v1a``, asymmetric) are ignored.

The event type is the body's ``"type"`` field (the spec's payload convention): everything that
steers a delivery is signed. ``sign(secret, msg_id, timestamp, body)`` computes a signature.

Why replays fail: the id is signed, so a captured delivery sent again under a fresh id has no
valid signature (401); sent again under its own id within the 300 s window it is a duplicate
(the id is remembered a week); after the window its timestamp is stale (401). The signature is
checked before the id is remembered: someone without the secret cannot use up ids a real sender
will need, and a delivery that could not reach the bus is forgotten so the sender's retry counts.

The reference library (`standardwebhooks`) computes the signatures. Its `Webhook.verify` is not
used: it reads the wall clock itself (tests and the dev clock pass `now`), and a malformed
signature header or a body that is not UTF-8 escapes it as a ValueError, which would answer 500
where the sender's mistake is a 401 or 400.

Nothing here imports boto3 at module level: the web handler imports this module on every
cold start, and the AWS adapters are only built when configured.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from standardwebhooks import Webhook

from missions.core.triggers.specs import WEBHOOK_SOURCE
from missions.ports.webhooks import SOURCE_NAME, DeliveryStore, SourceMisconfigured, WebhookSources, secret_key

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"

TOLERANCE_SECONDS = 300
BUS_SOURCE = WEBHOOK_SOURCE  # one name for the source of deliveries on the bus
BUS_ENTRY_LIMIT = 256 * 1024  # PutEvents: Source + DetailType + Detail of one entry, in UTF-8 bytes

DELIVERY_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_SIGNATURE_VERSION = "v1"
_DIGEST_BYTES = 32  # SHA-256
_MAX_SIGNATURES = 8  # more than a rotation needs; bounds the work an unsigned request can cause
_MAX_EVENT_TYPE = 128
log = logging.getLogger(__name__)


class WebhookRejected(Exception):
    """A delivery refused; `status` is the HTTP answer, `reason` a short, safe explanation."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"{status}: {reason}")
        self.status, self.reason = status, reason


def sign(secret: str | bytes, msg_id: str, timestamp: int | str, body: bytes) -> str:
    """The `webhook-signature` value (``v1,<base64>``) of a message: `secret` is ``whsec_<base64>`` or
    the key bytes, `body` UTF-8 (UnicodeDecodeError otherwise: the spec signs text)."""
    key = secret_key(secret) if isinstance(secret, str) else secret
    signed_at = datetime.fromtimestamp(int(timestamp), tz=UTC)
    return Webhook(key).sign(msg_id=msg_id, timestamp=signed_at, data=body.decode("utf-8"))


def _signatures(header: str) -> list[bytes]:
    """The v1 digests of a `webhook-signature` header; entries of other versions or malformed are skipped."""
    digests = []
    for entry in header.split(" ")[:_MAX_SIGNATURES]:
        version, _, encoded = entry.partition(",")
        if version != _SIGNATURE_VERSION:
            continue
        try:
            digest = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(digest) == _DIGEST_BYTES:
            digests.append(digest)
    return digests


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

    Checks run cheapest and least revealing first: the source (404; 503 when its stored secret is
    unusable, logged as an error for the operator, so the sender retries once it is fixed), the size (413), the
    headers (401), the clock (401 stale), the signature (401; 400 for a body that is not UTF-8,
    which cannot be signed), the body (400, and 413 when it would not fit on the event bus). Only
    then is the id remembered, so a forged or malformed delivery never uses up an id.
    """
    try:
        source = sources.get(source_name) if SOURCE_NAME.match(source_name or "") else None
    except SourceMisconfigured as exc:
        log.error("%s", exc, extra={"webhook_source": exc.name})
        raise WebhookRejected(503, str(exc)) from None
    if source is None:
        raise WebhookRejected(404, "unknown webhook source")
    if len(body) > source.max_body_bytes:
        raise WebhookRejected(413, f"body over {source.max_body_bytes} bytes")

    lowered = {str(k).lower(): v for k, v in headers.items()}
    timestamp = _header(lowered, TIMESTAMP_HEADER)
    delivery_id = _header(lowered, ID_HEADER)
    given = _signatures(_header(lowered, SIGNATURE_HEADER))
    if not _TIMESTAMP.match(timestamp):
        raise WebhookRejected(401, f"missing or malformed {TIMESTAMP_HEADER}")
    if not DELIVERY_ID.match(delivery_id):
        raise WebhookRejected(401, f"missing or malformed {ID_HEADER}")
    if not given:
        raise WebhookRejected(401, f"missing or malformed {SIGNATURE_HEADER}: expected v1,<base64>")
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        raise WebhookRejected(401, "stale timestamp")
    try:
        expected = base64.b64decode(sign(source.key, delivery_id, timestamp, body).partition(",")[2])
    except UnicodeDecodeError:  # nothing to sign: the spec signs text, and JSON is UTF-8
        raise WebhookRejected(400, "the body is not UTF-8") from None
    if not any(hmac.compare_digest(expected, digest) for digest in given):
        raise WebhookRejected(401, "bad signature")

    try:
        payload = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # bad UTF-8 or JSON, NaN/Infinity, absurd nesting
        payload = None
    if not isinstance(payload, dict):
        raise WebhookRejected(400, "the body is not a JSON object")
    event_type = payload["type"] if isinstance(payload.get("type"), str) else ""
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
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "TOLERANCE_SECONDS",
    "Delivery",
    "WebhookRejected",
    "bus_event",
    "sign",
    "verify_delivery",
]
