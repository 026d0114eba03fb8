"""Webhook sources given in code and delivery ids remembered in memory (tests, the dev server)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from missions.ports.webhooks import WebhookSource


class StaticWebhookSources:
    """Sources given in code (tests, the local dev server)."""

    def __init__(self, sources: Mapping[str, WebhookSource]):
        self._sources = dict(sources)

    def get(self, name: str) -> WebhookSource | None:
        return self._sources.get(name)


class InMemoryDeliveryStore:
    """Ids seen by this process (tests, the local dev server)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def remember(self, delivery_id: str, source: str) -> bool:
        with self._lock:
            if (source, delivery_id) in self._seen:
                return False
            self._seen.add((source, delivery_id))
            return True

    def forget(self, delivery_id: str, source: str) -> None:
        with self._lock:
            self._seen.discard((source, delivery_id))
