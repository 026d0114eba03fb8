"""The mission bus (EventBridge in AWS): webhook deliveries, memory changes and import requests go
through it to the functions whose rules match them."""

from __future__ import annotations

from typing import Any, Protocol


class EventBus(Protocol):
    def publish(self, entries: list[dict[str, Any]]) -> None:
        """Put the entries (`Source`, `DetailType`, `Detail` as JSON text) on the mission bus, all or
        nothing as far as the caller can tell: DependencyUnavailable when any was refused."""
