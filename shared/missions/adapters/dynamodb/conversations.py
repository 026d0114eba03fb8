"""Conversations in DynamoDB (missions.core.specs.CONVERSATIONS): the ConversationStore adapter.

One item per (owner, conversation_id) holding the working memory as JSON, a version for conditional
writes, and `expires_at` (TTL): a conversation nobody continues is forgotten after CONVERSATION_TTL_DAYS.
"""

from __future__ import annotations

import time
from typing import Any

from missions.core.memory.conversation import WorkingMemory
from missions.ports.conversations import VersionConflict

CONVERSATION_TTL_DAYS = 30


class DynamoConversationStore:
    def __init__(self, table_name: str, client: Any = None, ttl_days: int = CONVERSATION_TTL_DAYS):
        self.table_name, self.ttl_days = table_name, ttl_days
        if client is None:
            import boto3

            client = boto3.client("dynamodb")
        self._client = client

    def get(self, user_id: str, conversation_id: str) -> tuple[WorkingMemory, int] | None:
        item = self._client.get_item(
            TableName=self.table_name,
            Key={"owner": {"S": user_id}, "conversation_id": {"S": conversation_id}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        return WorkingMemory.model_validate_json(item["memory"]["S"]), int(item["version"]["N"])

    def put(self, memory: WorkingMemory, expected_version: int) -> None:
        condition = "attribute_not_exists(conversation_id)" if expected_version == 0 else "version = :expected"
        values = {":expected": {"N": str(expected_version)}} if expected_version else {}
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item={
                    "owner": {"S": memory.user_id},
                    "conversation_id": {"S": memory.conversation_id},
                    "memory": {"S": memory.model_dump_json()},
                    "version": {"N": str(expected_version + 1)},
                    "updated_at": {"S": memory.updated_at},
                    "expires_at": {"N": str(int(time.time()) + self.ttl_days * 86400)},
                },
                ConditionExpression=condition,
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            raise VersionConflict(f"conversation {memory.conversation_id} changed meanwhile") from None

    def list(self, user_id: str, limit: int = 50) -> list[WorkingMemory]:
        items = self._client.query(
            TableName=self.table_name,
            KeyConditionExpression="#o = :o",
            ExpressionAttributeNames={"#o": "owner"},
            ExpressionAttributeValues={":o": {"S": user_id}},
        ).get("Items", [])
        found = [WorkingMemory.model_validate_json(item["memory"]["S"]) for item in items]
        return sorted(found, key=lambda m: m.updated_at, reverse=True)[:limit]

    def delete(self, user_id: str, conversation_id: str) -> bool:
        response = self._client.delete_item(
            TableName=self.table_name,
            Key={"owner": {"S": user_id}, "conversation_id": {"S": conversation_id}},
            ReturnValues="ALL_OLD",
        )
        return bool(response.get("Attributes"))
