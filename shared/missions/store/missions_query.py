"""A capability's recent missions, for metrics: the missions table's by_capability index.

Kept apart from the MissionStore port because only the metrics endpoint needs it. The DynamoDB
adapter imports its SDK helpers when constructed, so the in-memory fake stays SDK-free.
"""

from __future__ import annotations

from typing import Any, Protocol

from missions.store.memory import MemoryMissionStore
from missions.store.ports import MissionRecord


class MissionsByCapability(Protocol):
    def list(self, capability: str, since_iso: str) -> list[MissionRecord]:
        """Missions of the capability created at or after `since_iso` (same format as created_at), oldest first."""


class InMemoryMissionsByCapability:
    """The test fake: reads the in-memory mission store's items directly."""

    def __init__(self, store: MemoryMissionStore):
        self._store = store

    def list(self, capability: str, since_iso: str) -> list[MissionRecord]:
        found = [
            m.model_copy(deep=True)
            for m in list(self._store._items.values())
            if m.capability == capability and m.created_at >= since_iso
        ]
        return sorted(found, key=lambda m: m.created_at)


class DynamoMissionsByCapability:
    """Queries GSI "by_capability" (capability, created_at), following every page.

    GSI reads are eventually consistent: a mission created a moment ago may be missing, which
    metrics tolerate.
    """

    INDEX = "by_capability"

    def __init__(self, table_name: str, client: Any = None):
        from missions.store import dynamodb

        self.table_name = table_name
        self._client = client or dynamodb.boto3.client("dynamodb")
        self._deserialize = dynamodb._deserialize

    def list(self, capability: str, since_iso: str) -> list[MissionRecord]:
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.INDEX,
            "KeyConditionExpression": "#c = :c AND #t >= :since",
            "ExpressionAttributeNames": {"#c": "capability", "#t": "created_at"},
            "ExpressionAttributeValues": {":c": {"S": capability}, ":since": {"S": since_iso}},
            "ScanIndexForward": True,
        }
        records: list[MissionRecord] = []
        while True:
            page = self._client.query(**kwargs)
            records += [MissionRecord.model_validate(self._deserialize(item)) for item in page.get("Items", [])]
            if not page.get("LastEvaluatedKey"):
                return records
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
