"""Webhook senders we trust and the delivery ids we have seen: the ports webhook ingestion reads."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from missions.core.redaction import remember_secret

DEFAULT_MAX_BODY_BYTES = 256 * 1024
SOURCE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,47}$")  # as WebhookTrigger.source
SECRET_PREFIX = "whsec_"  # Standard Webhooks: a secret is "whsec_" + the base64 of its key bytes
SOURCE_FORMAT = '{"secret": "whsec_<base64>", "user_id": "..."}'  # what a stored source holds


def secret_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret ("whsec_<base64>"); ValueError when it is not one.

    Stricter than the reference library, which drops characters that are not base64: a typo in a
    configured secret must fail loudly, not quietly become another key.
    """
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret is {SECRET_PREFIX}<base64>")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"a webhook secret is {SECRET_PREFIX}<base64>; the rest is not base64") from None
    if not key:
        raise ValueError("a webhook secret may not be empty")
    return key


@dataclass(frozen=True)
class WebhookSource:
    """A sender we trust: its secret, and the user its missions run for (the sender cannot choose)."""

    name: str
    secret: str = field(repr=False)  # "whsec_<base64>"
    user_id: str = "system"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def __post_init__(self) -> None:
        try:  # a source whose secret no sender can use is a configuration error: say so where it is made
            secret_key(self.secret)
        except ValueError as exc:
            raise ValueError(f"webhook source '{self.name}': {exc}") from None
        # every source passes here, from settings or Secrets Manager: no error may quote its secret
        remember_secret(self.secret)
        remember_secret(self.secret.removeprefix(SECRET_PREFIX))

    @property
    def key(self) -> bytes:
        """The HMAC key the secret names."""
        return secret_key(self.secret)

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


class SourceMisconfigured(Exception):
    """A source exists but what is stored for it is unusable (an older format, say): only an operator
    can fix it, so a sender is told to retry later, never that the source does not exist."""

    def __init__(self, name: str, problem: str):
        self.name = name
        super().__init__(
            f"webhook source '{name}' is misconfigured: {problem}; its secret must be the JSON {SOURCE_FORMAT}"
        )


class WebhookSources(Protocol):
    def get(self, name: str) -> WebhookSource | None:
        """The source called `name`, or None when there is none (the delivery is answered 404);
        SourceMisconfigured when it exists but cannot be used."""


class DeliveryStore(Protocol):
    def remember(self, delivery_id: str, source: str) -> bool:
        """Record a delivery id of a source; False if it was recorded before (a replay)."""

    def forget(self, delivery_id: str, source: str) -> None:
        """Undo `remember` when the delivery could not be handed on, so the sender's retry is accepted."""
