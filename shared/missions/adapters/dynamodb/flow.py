"""Flow control's records on the dispatch table (missions.core.specs.DISPATCH: partition "pk", sort "sk").

pk "decisions#<trigger>",        sk "<at>#<decision id>"  one decision ("body": JSON), expiring ("expires_at")
pk "throttle#<trigger>#<key>",   sk "<window start>"      "count" of the key's starts in that window
                                                          (ADD under a condition: never past the limit)
"""

from __future__ import annotations

import json
import time
from typing import Any

from botocore.exceptions import ClientError

from missions.ports.flow import DECISIONS_TTL_DAYS, Pending, TriggerDecision


class DynamoFlowRecords:
    def __init__(self, table_name: str, client: Any):
        self.table_name, self._client = table_name, client

    def record(self, decision: TriggerDecision) -> None:
        self._client.put_item(
            TableName=self.table_name,
            Item={
                "pk": {"S": f"decisions#{decision.trigger}"},
                "sk": {"S": f"{decision.at}#{decision.decision_id}"},
                "user_id": {"S": decision.user_id},
                "body": {"S": decision.model_dump_json()},
                "expires_at": {"N": str(int(time.time()) + DECISIONS_TTL_DAYS * 86400)},
            },
        )

    def decisions(self, trigger: str, user_id: str | None = None, limit: int = 50) -> list[TriggerDecision]:
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"decisions#{trigger}"}},
            "ScanIndexForward": False,
        }
        if user_id is not None:
            kwargs["FilterExpression"] = "user_id = :u"
            kwargs["ExpressionAttributeValues"][":u"] = {"S": user_id}
        found: list[TriggerDecision] = []
        while len(found) < limit:
            page = self._client.query(**kwargs)
            found += [TriggerDecision.model_validate_json(item["body"]["S"]) for item in page.get("Items", [])]
            if not page.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found[:limit]

    def admit(self, trigger: str, key: str, window: int, limit: int, expires_at: int) -> bool:
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"pk": {"S": f"throttle#{trigger}#{key}"}, "sk": {"S": str(window)}},
                UpdateExpression="ADD #c :one SET expires_at = :x",
                ConditionExpression="attribute_not_exists(#c) OR #c < :limit",
                ExpressionAttributeNames={"#c": "count"},
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":limit": {"N": str(limit)},
                    ":x": {"N": str(expires_at)},
                },
            )
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise

    def debounce(self, trigger: str, key: str, request: dict[str, Any], due: int) -> Pending | None:
        response = self._client.update_item(
            TableName=self.table_name,
            Key=_debounce_key(trigger, key),
            UpdateExpression="SET #r = :r, due = :d, expires_at = :x ADD version :one",
            ExpressionAttributeNames={"#r": "request"},
            ExpressionAttributeValues={
                ":r": {"S": json.dumps(request)},
                ":d": {"N": str(due)},
                ":x": {"N": str(due + DECISIONS_TTL_DAYS * 86400)},
                ":one": {"N": "1"},
            },
            ReturnValues="ALL_OLD",
        )
        return _pending(response["Attributes"]) if response.get("Attributes") else None

    def pending(self, trigger: str, key: str) -> Pending | None:
        found = self._client.get_item(TableName=self.table_name, Key=_debounce_key(trigger, key), ConsistentRead=True)
        return _pending(found["Item"]) if "Item" in found else None

    def take(self, trigger: str, key: str, version: int) -> bool:
        try:
            self._client.delete_item(
                TableName=self.table_name,
                Key=_debounce_key(trigger, key),
                ConditionExpression="version = :v",
                ExpressionAttributeValues={":v": {"N": str(version)}},
            )
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise


def _debounce_key(trigger: str, key: str) -> dict[str, Any]:
    return {"pk": {"S": f"debounce#{trigger}"}, "sk": {"S": key}}


def _pending(item: dict[str, Any]) -> Pending:
    return Pending(
        request=json.loads(item["request"]["S"]), due=int(item["due"]["N"]), version=int(item["version"]["N"])
    )
