"""Webhook senders we trust and the delivery ids we have seen: the ports webhook ingestion reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

DEFAULT_MAX_BODY_BYTES = 256 * 1024
SOURCE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,47}$")  # as WebhookTrigger.source


@dataclass(frozen=True)
class WebhookSource:
    """A sender we trust: its secret, and the user its missions run for (the sender cannot choose)."""

    name: str
    secret: str = field(repr=False)
    user_id: str = "system"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any]) -> WebhookSource:
        secret = config.get("secret")
        if not isinstance(secret, str) or not secret:
            raise ValueError(f"webhook source '{name}' has no secret")
        return cls(
            name=name,
            secret=secret,
            user_id=str(config.get("user_id") or "system"),
            max_body_bytes=int(config.get("max_body_bytes") or DEFAULT_MAX_BODY_BYTES),
        )


class WebhookSources(Protocol):
    def get(self, name: str) -> WebhookSource | None:
        """The source called `name`, or None when there is none (the delivery is answered 404)."""


class DeliveryStore(Protocol):
    def remember(self, delivery_id: str, source: str) -> bool:
        """Record a delivery id of a source; False if it was recorded before (a replay)."""

    def forget(self, delivery_id: str, source: str) -> None:
        """Undo `remember` when the delivery could not be handed on, so the sender's retry is accepted."""
