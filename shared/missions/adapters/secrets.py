"""Secrets Manager, through Powertools Parameters (cached): the OpenAI key and webhook sources' secrets."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from missions.ports.webhooks import SOURCE_NAME, SourceMisconfigured, WebhookSource


class SecretsManagerWebhookSources:
    """Sources from Secrets Manager: secret f"{prefix}/{name}" holds {"secret", "user_id"?, "max_body_bytes"?}.

    Powertools caches found secrets for five minutes; unknown names are cached as well, so a
    flood of deliveries to made-up sources does not become a flood of Secrets Manager calls.
    A secret that exists but is not that JSON (a bare key, an older `hmac_secret`, a secret that
    is not whsec_<base64>) is SourceMisconfigured, named for the operator, never a crash.
    """

    NEGATIVE_TTL = 300.0

    def __init__(self, prefix: str, fetch: Callable[[str], Any] | None = None):
        self.prefix = prefix.rstrip("/")
        self._fetch = fetch or _powertools_secret
        self._missing: dict[str, float] = {}

    def get(self, name: str) -> WebhookSource | None:
        if not SOURCE_NAME.match(name):  # the name becomes part of a secret id
            return None
        if self._missing.get(name, 0.0) > time.monotonic():
            return None
        try:
            config = self._fetch(f"{self.prefix}/{name}")
        except Exception as exc:  # powertools wraps the ClientError: look at both
            if "ResourceNotFoundException" not in (error_code(exc), error_code(exc.__context__)):
                raise
            config = None
        if config is None:
            self._missing[name] = time.monotonic() + self.NEGATIVE_TTL
            return None
        return _source(name, config)


def _source(name: str, stored: Any) -> WebhookSource:
    """The source a stored secret describes (its text is never quoted: it may be the key itself)."""
    if isinstance(stored, (str, bytes)):
        try:
            stored = json.loads(stored)
        except ValueError:
            raise SourceMisconfigured(name, "its secret is not JSON (a bare key, as older versions stored?)") from None
    if not isinstance(stored, dict):
        raise SourceMisconfigured(name, f"its secret is a JSON {type(stored).__name__}, not an object")
    try:
        return WebhookSource.from_config(name, stored)
    except (ValueError, TypeError) as exc:
        problem = str(exc).removeprefix(f"webhook source '{name}'").lstrip(": ")
        raise SourceMisconfigured(name, problem) from None


def _powertools_secret(secret_id: str) -> Any:
    """The secret's text, as stored (parsed by `_source`, which can say what is wrong with it)."""
    from aws_lambda_powertools.utilities.parameters import get_secret

    return get_secret(secret_id, max_age=300)


class PowertoolsSecrets:
    """The SecretReader port on Secrets Manager: cached for five minutes per container, so a rotated
    key is picked up without a redeploy."""

    def read(self, secret_id: str) -> str:
        from aws_lambda_powertools.utilities.parameters import get_secret

        return str(get_secret(secret_id, max_age=300))


def error_code(exc: BaseException | None) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code: str | None = response.get("Error", {}).get("Code")  # botocore's error shape
        return code
    return None
