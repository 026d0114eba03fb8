"""Secrets Manager, through Powertools Parameters (cached): the OpenAI key and webhook sources' secrets."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from missions.ports.webhooks import SOURCE_NAME, WebhookSource


class SecretsManagerWebhookSources:
    """Sources from Secrets Manager: secret f"{prefix}/{name}" holds {"secret", "user_id"?, "max_body_bytes"?}.

    Powertools caches found secrets for five minutes; unknown names are cached as well, so a
    flood of deliveries to made-up sources does not become a flood of Secrets Manager calls.
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
        if not isinstance(config, dict):
            self._missing[name] = time.monotonic() + self.NEGATIVE_TTL
            return None
        return WebhookSource.from_config(name, config)


def _powertools_secret(secret_id: str) -> Any:
    from aws_lambda_powertools.utilities.parameters import get_secret

    return get_secret(secret_id, transform="json", max_age=300)


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
