"""The blob store of `missions.core.mission.offload` on DynamoDB and S3: a mission's blobs live in the checkpoints
table (missions.core.specs.CHECKPOINTS), the big ones in S3."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

from missions.adapters.dynamodb._items import condition_failed
from missions.core.mission.offload import blob_scope
from missions.core.specs import BLOB_INLINE_LIMIT

BLOB_PREFIX = "blobs/"  # a mission's big blobs: blobs/<mission id>/<sha256>


def blob_thread(mission_id: str) -> str:
    """The checkpoints table's partition of a mission's blobs."""
    return f"blob#{mission_id}"


class DynamoBlobStore:
    """Content-addressed blobs of a mission: small ones inline in the checkpoints table, big ones in S3.

    A key is "<mission id>/<sha256>" (missions.core.mission.offload.blob_key): its item lives under thread_id
    f"blob#{mission id}", checkpoint_id the hash, so a mission's blobs are one partition; a blob bigger
    than `inline_limit` goes to s3://{bucket}/blobs/{mission id}/{sha256} first, then a pointer item is
    written, so a pointer never leads nowhere. Keys written before blobs were scoped (a bare hash) live
    under thread_id f"blob#{key}", checkpoint_id "blob", and in S3 under blobs/{key[:2]}/{key}.
    """

    def __init__(
        self,
        table_name: str,
        bucket: str,
        client: Any = None,
        s3_client: Any = None,
        inline_limit: int = BLOB_INLINE_LIMIT,
    ):
        self.table_name = table_name
        self.bucket = bucket
        self._client = client or boto3.client("dynamodb")
        self._s3 = s3_client or boto3.client("s3")
        self.inline_limit = inline_limit

    @staticmethod
    def s3_key(key: str) -> str:
        scope = blob_scope(key)
        if scope is None:
            return f"blobs/{key[:2]}/{key}"
        return f"{BLOB_PREFIX}{scope}/{key.rpartition('/')[2]}"

    @staticmethod
    def _item_key(key: str) -> dict[str, Any]:
        scope = blob_scope(key)
        if scope is None:
            return {"thread_id": {"S": f"blob#{key}"}, "checkpoint_id": {"S": "blob"}}
        return {"thread_id": {"S": blob_thread(scope)}, "checkpoint_id": {"S": key.rpartition("/")[2]}}

    def put(self, key: str, data: bytes) -> None:
        item = self._item_key(key)
        if len(data) <= self.inline_limit:
            item["data"] = {"B": bytes(data)}
            item["size"] = {"N": str(len(data))}
        else:
            s3_key = self.s3_key(key)
            self._s3.put_object(Bucket=self.bucket, Key=s3_key, Body=bytes(data))
            item["s3_key"] = {"S": s3_key}
            item["size"] = {"N": str(len(data))}
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(checkpoint_id)",
            )
        except ClientError as exc:
            if not condition_failed(exc):  # same key means same content: nothing to do
                raise

    def get(self, key: str) -> bytes:
        response = self._client.get_item(TableName=self.table_name, Key=self._item_key(key), ConsistentRead=True)
        item = response.get("Item")
        if item is None:
            raise KeyError(key)
        if "data" in item:
            return bytes(item["data"]["B"])
        try:
            obj = self._s3.get_object(Bucket=self.bucket, Key=item["s3_key"]["S"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise KeyError(key) from None
            raise
        return obj["Body"].read()
