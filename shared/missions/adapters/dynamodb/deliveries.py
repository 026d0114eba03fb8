"""Webhook delivery ids in DynamoDB (specs.DELIVERIES): the adapter of the DeliveryStore port."""

from __future__ import annotations

import time
from typing import Any


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


class DynamoDeliveryStore:
    """The deliveries table (`missions.core.specs.DELIVERIES`): one item per (source, id), kept `ttl_seconds`.

    The partition key is f"{source}#{delivery_id}" ('#' occurs in neither), so two senders
    numbering their deliveries alike do not collide. An item past its expiry that DynamoDB has
    not yet deleted counts as absent.
    """

    def __init__(self, table_name: str, client: Any = None, ttl_seconds: int = 7 * 86400):
        self.table_name = table_name
        if client is None:
            import boto3

            client = boto3.client("dynamodb")
        self._client = client
        self.ttl_seconds = ttl_seconds

    @staticmethod
    def key(delivery_id: str, source: str) -> str:
        return f"{source}#{delivery_id}"

    def remember(self, delivery_id: str, source: str) -> bool:
        now = int(time.time())
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item={
                    "delivery_id": {"S": self.key(delivery_id, source)},
                    "source": {"S": source},
                    "received_at": {"N": str(now)},
                    "expires_at": {"N": str(now + int(self.ttl_seconds))},
                },
                ConditionExpression="attribute_not_exists(delivery_id) OR expires_at < :now",
                ExpressionAttributeValues={":now": {"N": str(now)}},
            )
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def forget(self, delivery_id: str, source: str) -> None:
        self._client.delete_item(TableName=self.table_name, Key={"delivery_id": {"S": self.key(delivery_id, source)}})
