"""DynamoDB adapter of missions.ports.interrupts: the interrupts table (missions.core.specs.INTERRUPTS)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from missions.adapters.dynamodb._items import (
    DynamoTable,
    attribute_value,
    batch_get,
    condition_failed,
    deserialize,
    expiry,
    query_all,
    read_item,
    serialize,
)
from missions.core.errors import ConflictError, NotFound
from missions.core.mission.envelope import InterruptResponse, utcnow
from missions.ports.interrupts import InterruptRecord


class DynamoInterruptStore(DynamoTable):
    """Interrupts table: mission_id / interrupt_id."""

    WAITING_INDEX = "waiting"

    def put(self, record: InterruptRecord) -> None:
        item = record.model_dump(mode="json")
        if record.status == "pending":
            item["waiting"] = "pending"  # the sparse index of unanswered questions
        expires = expiry(self.ttl_seconds)
        if expires is not None:
            item["expires_at"] = expires
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item=serialize(item),
                ConditionExpression="attribute_not_exists(interrupt_id) OR #s = :pending",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":pending": {"S": "pending"}},
            )
        except ClientError as exc:
            if condition_failed(exc):
                raise ConflictError(f"interrupt {record.interrupt_id} is no longer pending") from None
            raise

    def get(self, mission_id: str, interrupt_id: str) -> InterruptRecord:
        item = read_item(
            self._client, self.table_name, self._key(mission_id, interrupt_id), f"interrupt {mission_id}/{interrupt_id}"
        )
        return self._decode(item)

    def answer(self, mission_id: str, interrupt_id: str, response: InterruptResponse) -> InterruptRecord:
        try:
            result = self._client.update_item(
                TableName=self.table_name,
                Key=self._key(mission_id, interrupt_id),
                UpdateExpression="SET #s = :answered, #r = :response, answered_at = :now REMOVE waiting",
                ConditionExpression="#s = :pending",
                ExpressionAttributeNames={"#s": "status", "#r": "response"},
                ExpressionAttributeValues={
                    ":answered": {"S": "answered"},
                    ":pending": {"S": "pending"},
                    ":response": attribute_value(response.model_dump(mode="json")),
                    ":now": {"S": utcnow()},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            current = self.get(mission_id, interrupt_id)  # NotFound when it never existed
            raise ConflictError(f"interrupt {interrupt_id} is already {current.status}") from None
        return self._decode(result["Attributes"])

    def reopen(self, mission_id: str, interrupt_id: str) -> None:
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key=self._key(mission_id, interrupt_id),
                UpdateExpression="SET #s = :pending, waiting = :pending REMOVE #r, answered_at",
                ConditionExpression="#s = :answered",
                ExpressionAttributeNames={"#s": "status", "#r": "response"},
                ExpressionAttributeValues={":pending": {"S": "pending"}, ":answered": {"S": "answered"}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            current = self.get(mission_id, interrupt_id)  # NotFound when it never existed
            raise ConflictError(f"interrupt {interrupt_id} is {current.status}, not answered") from None

    def expire(self, mission_id: str, interrupt_id: str) -> None:
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key=self._key(mission_id, interrupt_id),
                UpdateExpression="SET #s = :expired REMOVE #r, answered_at, waiting",
                ConditionExpression="attribute_exists(interrupt_id)",
                ExpressionAttributeNames={"#s": "status", "#r": "response"},
                ExpressionAttributeValues={":expired": {"S": "expired"}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            raise NotFound(f"interrupt {mission_id}/{interrupt_id}") from None

    def pending(self, mission_id: str) -> list[InterruptRecord]:
        items = query_all(
            self._client,
            TableName=self.table_name,
            KeyConditionExpression="mission_id = :m",
            FilterExpression="#s = :pending",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":m": {"S": mission_id}, ":pending": {"S": "pending"}},
            ConsistentRead=True,
        )
        return [self._decode(item) for item in items]

    def overdue(self, asked_before: str, limit: int = 100) -> list[InterruptRecord]:
        """The index holds the keys of pending questions: the overdue ones (few) are read whole, and kept
        if they are still pending (an index lags its table)."""
        if limit <= 0:
            return []
        response = self._client.query(
            TableName=self.table_name,
            IndexName=self.WAITING_INDEX,
            KeyConditionExpression="waiting = :pending AND created_at < :before",
            ExpressionAttributeValues={":pending": {"S": "pending"}, ":before": {"S": asked_before}},
            Limit=limit,
        )
        keys = [self._key(item["mission_id"]["S"], item["interrupt_id"]["S"]) for item in response.get("Items", [])]
        records = [self._decode(item) for item in batch_get(self._client, self.table_name, keys)]
        return [r for r in records if r.status == "pending"]

    @staticmethod
    def _key(mission_id: str, interrupt_id: str) -> dict[str, Any]:
        return {"mission_id": {"S": mission_id}, "interrupt_id": {"S": interrupt_id}}

    @staticmethod
    def _decode(raw: dict[str, Any]) -> InterruptRecord:
        item = deserialize(raw)
        item.pop("expires_at", None)
        item.pop("waiting", None)
        return InterruptRecord.model_validate(item)
