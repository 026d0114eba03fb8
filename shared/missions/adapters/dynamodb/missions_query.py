"""A capability's recent missions, for metrics: the missions table's by_capability index.

Kept apart from the MissionStore port because only the metrics endpoint needs it. The DynamoDB
adapter imports its SDK helpers when constructed, so the in-memory fake stays SDK-free.
"""

from __future__ import annotations

from typing import Any

from missions.ports.store import MissionRecord


class DynamoMissionsByCapability:
    """Queries GSI "by_capability" (capability, created_at), following every page.

    GSI reads are eventually consistent: a mission created a moment ago may be missing, which
    metrics tolerate.
    """

    INDEX = "by_capability"

    def __init__(self, table_name: str, client: Any = None):
        import boto3

        from missions.adapters.dynamodb import store as dynamodb

        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")
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
