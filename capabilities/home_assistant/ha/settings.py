"""Which Home Assistant a mission talks to: HA_URL and its token, or the sample home when none is set.

The sample home is development code (capabilities/home_assistant/dev, which the Lambda layer leaves
out): in AWS, a mission with no HA_URL is refused with what to configure, not answered from a fake.

Locally both come from the environment (HA_URL, HA_TOKEN). In AWS the token is not put in an
environment variable: HA_TOKEN_SECRET names the Secrets Manager secret holding it, and whoever
builds the client passes a `token_provider` reading it (the runtime's SecretReader caches it and
follows rotation), so the token is read when first needed and never stored in settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from capabilities.home_assistant.ha.port import HAError, HATokenRejected, HomeAssistant


@dataclass(frozen=True)
class HASettings:
    url: str | None = None  # None: no Home Assistant, the sample home answers
    token: str | None = field(default=None, repr=False)
    token_secret: str | None = None  # the secret id (name or ARN) holding the token, in AWS

    @property
    def configured(self) -> bool:
        return bool(self.url)


def ha_settings(environ: Mapping[str, str] | None = None) -> HASettings:
    """HA_URL, HA_TOKEN and HA_TOKEN_SECRET from the environment (blank counts as unset)."""
    env = os.environ if environ is None else environ

    def value(name: str) -> str | None:
        return (env.get(name) or "").strip() or None

    return HASettings(url=value("HA_URL"), token=value("HA_TOKEN"), token_secret=value("HA_TOKEN_SECRET"))


def connect(
    settings: HASettings | None = None,
    *,
    token_provider: Callable[[], str] | None = None,
    now: datetime | None = None,
    timeout: float = 10.0,
    attempts: int = 3,
    deadline: float = 30.0,
) -> HomeAssistant:
    """The Home Assistant the settings name, or a fresh SampleHome (ending at `now`) when they name none
    and the sample home is installed (a checkout, not the Lambda layer).

    A URL without a token (neither HA_TOKEN nor a `token_provider`) is refused at once, with the
    HATokenRejected a mission shows, rather than at the first call."""
    chosen = settings if settings is not None else ha_settings()
    if not chosen.url:
        return _sample_home(now)
    from capabilities.home_assistant.ha.rest import RestHomeAssistant

    options = {"timeout": timeout, "attempts": attempts, "deadline": deadline}
    if chosen.token:
        return RestHomeAssistant(chosen.url, chosen.token, **options)  # type: ignore[arg-type]
    if token_provider is not None:
        return RestHomeAssistant(chosen.url, token_provider=token_provider, **options)  # type: ignore[arg-type]
    where = "HA_TOKEN_SECRET is set but no secret reader was given" if chosen.token_secret else "HA_TOKEN is not set"
    raise HATokenRejected(f"HA_URL names a Home Assistant but there is no access token: {where}")


NOT_CONFIGURED = (
    "no Home Assistant is configured: give this environment a home_assistant connection in cdk.json "
    "(HA_URL, and the secret holding its token in HA_TOKEN_SECRET); the sample home runs locally only"
)


def _sample_home(now: datetime | None) -> HomeAssistant:
    """The bundled sample home, where it is installed: the one import of development code, guarded."""
    try:
        from capabilities.home_assistant.dev.sample import SampleHome
    except ModuleNotFoundError as missing:
        if missing.name is None or not "capabilities.home_assistant.dev.sample".startswith(missing.name):
            raise  # something the sample home needs is missing: not the layer's absence of it
        raise HAError(NOT_CONFIGURED) from None
    return SampleHome(now)
