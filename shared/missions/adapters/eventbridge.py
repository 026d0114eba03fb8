"""The mission bus on EventBridge, and the repository import queue that rides on it."""

from __future__ import annotations

import json
from typing import Any

from missions.core.errors import DependencyUnavailable
from missions.core.specs import IMPORT_DETAIL_TYPE, REPOSITORY_SOURCE
from missions.ports.bus import EventBus


class EventBridgeBus:
    """PutEvents on the mission bus; a throttled call or a refused entry is DependencyUnavailable."""

    def __init__(self, bus: str, client: Any):
        self.bus = bus
        self._client = client

    def publish(self, entries: list[dict[str, Any]]) -> None:
        try:
            result = self._client.put_events(Entries=[{**entry, "EventBusName": self.bus} for entry in entries])
        except Exception as exc:  # throttled, unreachable: the caller answers 503 and keeps nothing
            raise DependencyUnavailable(f"the event bus refused the events: {type(exc).__name__}") from exc
        if result.get("FailedEntryCount"):
            failed: dict[str, Any] = next((e for e in result.get("Entries", []) if e.get("ErrorCode")), {})
            raise DependencyUnavailable(f"the event bus refused the events: {failed.get('ErrorMessage', 'failed')}")


class EventBridgeImportQueue:
    """Asks the import function, through a bus rule, to import a repository (retries and a DLQ come with it)."""

    def __init__(self, bus: EventBus):
        self._bus = bus

    def request_import(self, repository_id: str, ref: str | None) -> None:
        detail = json.dumps({"repository_id": repository_id, "ref": ref})
        self._bus.publish([{"Source": REPOSITORY_SOURCE, "DetailType": IMPORT_DETAIL_TYPE, "Detail": detail}])
