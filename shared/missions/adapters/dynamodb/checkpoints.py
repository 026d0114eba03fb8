"""DynamoDB adapter of missions.ports.checkpoints: the checkpoints table (missions.core.specs.CHECKPOINTS)."""

from __future__ import annotations

import json
import zlib
from typing import Any

from botocore.exceptions import ClientError

from missions.adapters.dynamodb._items import (
    DynamoTable,
    compressed,
    condition_failed,
    deserialize,
    expiry,
    query_partition,
    read_item,
    serialize,
    write_batches,
)
from missions.ports.checkpoints import Checkpoint


class DynamoCheckpointStore(DynamoTable):
    """Checkpoints table: thread_id / checkpoint_id. The whole envelope (a snapshot) or the delta, and
    the stage records, are compact JSON: a number comes back as the very type it was written
    (DynamoDB's numbers would turn every float and int into a Decimal), and an attribute holds any key.
    Each is stored compressed (zlib, as binary): a checkpoint is written at every stage, and JSON of
    tool outputs compresses several times, so most of a stage's write units went to its checkpoint.
    Checkpoints written before as text still read."""

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        item = checkpoint.model_dump(mode="json", exclude=set(_JSON_ATTRIBUTES))
        for name in _JSON_ATTRIBUTES:
            value = getattr(checkpoint, name)
            if value is not None and value != []:
                item[name] = compressed(value if name != "records" else [r.model_dump(mode="json") for r in value])
        expires = expiry(self.ttl_seconds)
        if expires is not None:
            item["expires_at"] = expires
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item=serialize(item),
                ConditionExpression="attribute_not_exists(checkpoint_id)",
            )
        except ClientError as exc:
            if condition_failed(exc):  # a retried stage: history does not fork
                return self.get(checkpoint.thread_id, checkpoint.checkpoint_id)
            raise
        return checkpoint

    def get(self, thread_id: str, checkpoint_id: str) -> Checkpoint:
        item = read_item(
            self._client,
            self.table_name,
            {"thread_id": {"S": thread_id}, "checkpoint_id": {"S": checkpoint_id}},
            f"checkpoint {thread_id}/{checkpoint_id}",
        )
        return self._decode(item)

    def list(self, thread_id: str) -> list[Checkpoint]:
        items = query_partition(self._client, self.table_name, "thread_id", thread_id, ConsistentRead=True)
        return [self._decode(item) for item in items]

    def delete_thread(self, thread_id: str) -> int:
        keys = query_partition(
            self._client, self.table_name, "thread_id", thread_id, ProjectionExpression="thread_id, checkpoint_id"
        )
        write_batches(self._client, self.table_name, [{"DeleteRequest": {"Key": key}} for key in keys])
        return len(keys)

    def latest(self, thread_id: str) -> Checkpoint | None:
        page = self._client.query(
            TableName=self.table_name,
            KeyConditionExpression="thread_id = :t",
            ExpressionAttributeValues={":t": {"S": thread_id}},
            ConsistentRead=True,
            ScanIndexForward=False,
            Limit=1,
        )
        items = page.get("Items", [])
        return self._decode(items[0]) if items else None

    @staticmethod
    def _decode(raw: dict[str, Any]) -> Checkpoint:
        item = deserialize(raw)
        item.pop("expires_at", None)
        for name in _JSON_ATTRIBUTES:
            if name in item:
                stored = item[name]
                item[name] = json.loads(zlib.decompress(stored) if isinstance(stored, bytes) else stored)
        return Checkpoint.model_validate(item)


_JSON_ATTRIBUTES = ("envelope", "delta", "records", "progress")  # a checkpoint's attributes kept as JSON text
