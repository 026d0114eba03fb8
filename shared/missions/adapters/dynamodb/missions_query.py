"""A capability's recent missions, for metrics and the nightly evaluation: the missions table's
by_capability index.

Kept apart from the MissionStore port because only those need it. The DynamoDB adapter imports its
SDK helpers when constructed, so the in-memory fake stays SDK-free.
"""

from __future__ import annotations

from typing import Any

from missions.ports.store import MissionSummary


class DynamoMissionsByCapability:
    """Queries GSI "by_capability" (capability, created_at), following every page. Its entries hold the
    missions' summaries (specs.MISSION_SUMMARY); running missions are read whole, in one batch, for
    where they are and what they cost so far (missions.adapters.dynamodb.store.mission_summaries).

    GSI reads are eventually consistent: a mission created a moment ago may be missing, which
    metrics tolerate.
    """

    INDEX = "by_capability"

    def __init__(self, table_name: str, client: Any = None):
        import boto3

        from missions.adapters.dynamodb import store as dynamodb

        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")
        self._summaries = dynamodb.mission_summaries

    def list(self, capability: str, since_iso: str) -> list[MissionSummary]:
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.INDEX,
            "KeyConditionExpression": "#c = :c AND #t >= :since",
            "ExpressionAttributeNames": {"#c": "capability", "#t": "created_at"},
            "ExpressionAttributeValues": {":c": {"S": capability}, ":since": {"S": since_iso}},
            "ScanIndexForward": True,
        }
        entries: list[dict[str, Any]] = []
        while True:
            page = self._client.query(**kwargs)
            entries += page.get("Items", [])
            if not page.get("LastEvaluatedKey"):
                return self._summaries(self._client, self.table_name, entries)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
