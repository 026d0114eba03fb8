"""Requests that go through the mission bus to a function of their own (EventBridge in AWS)."""

from __future__ import annotations

import json
from typing import Any

from missions.repositories.service import DependencyUnavailable
from missions.specs import IMPORT_DETAIL_TYPE, REPOSITORY_SOURCE


class EventBridgeImportQueue:
    """Asks the import function, through a bus rule, to import a repository (retries and a DLQ come with it)."""

    def __init__(self, bus: str, client: Any):
        self.bus = bus
        self._client = client

    def request_import(self, repository_id: str, ref: str | None) -> None:
        entry = {
            "Source": REPOSITORY_SOURCE,
            "DetailType": IMPORT_DETAIL_TYPE,
            "Detail": json.dumps({"repository_id": repository_id, "ref": ref}),
            "EventBusName": self.bus,
        }
        try:
            result = self._client.put_events(Entries=[entry])
        except Exception as exc:  # throttled, unreachable: the caller answers 503 and stores nothing
            raise DependencyUnavailable(f"the event bus refused the import request: {type(exc).__name__}") from exc
        if result.get("FailedEntryCount"):
            message = result["Entries"][0].get("ErrorMessage", "put_events failed")
            raise DependencyUnavailable(f"the event bus refused the import request: {message}")
