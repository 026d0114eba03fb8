"""What every connector shares: the failure types, retries, and the record of a source's answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class ConnectorError(Exception):
    """A source failed in a way worth retrying (timeout, 5xx, throttling)."""


class ConnectorRejected(Exception):
    """A source refused the request itself (bad criteria): retrying cannot help."""


@dataclass
class SourceResult(Generic[T]):
    """One source's answer, or why there is none. Stages keep these in their output so the
    mission (and the user) can see which sources failed."""

    source: str
    items: list[T] = field(default_factory=list)
    error: str | None = None
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def report(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ok": self.ok,
            "count": len(self.items),
            "error": self.error,
            "attempts": self.attempts,
        }


def call_source(
    source: str,
    call: Callable[[], list[T]],
    *,
    retries: int = 2,
    backoff_seconds: float = 0.05,
    sleep: Callable[[float], None] = time.sleep,
) -> SourceResult[T]:
    """Call a source, retrying ConnectorError with exponential backoff, and record the outcome."""
    attempts = 0
    while True:
        attempts += 1
        try:
            return SourceResult(source, list(call()), attempts=attempts)
        except ConnectorRejected as exc:
            return SourceResult(source, error=f"rejected: {exc}", attempts=attempts)
        except ConnectorError as exc:
            if attempts > retries:
                return SourceResult(source, error=f"failed after {attempts} attempts: {exc}", attempts=attempts)
            sleep(backoff_seconds * 2 ** (attempts - 1))


class FlakySource:
    """Wraps a source call to fail its first `failures` calls (tests and demos of failure paths).

    Missions ask for it through their context, e.g. {"simulate_failures": {"yelp": 5}}, so a
    failure path runs end to end on the emulation exactly as it would against a real outage.
    """

    def __init__(self, failures: int):
        self.remaining = failures

    def __call__(self, call: Callable[[], list[T]]) -> Callable[[], list[T]]:
        def flaky() -> list[T]:
            if self.remaining > 0:
                self.remaining -= 1
                raise ConnectorError("simulated outage")
            return call()

        return flaky


def with_simulated_failures(context: dict[str, Any], source: str, call: Callable[[], list[T]]) -> Callable[[], list[T]]:
    """The call, failing as many times as the mission's context asks for this source."""
    failures = int((context.get("simulate_failures") or {}).get(source, 0))
    return FlakySource(failures)(call) if failures > 0 else call
