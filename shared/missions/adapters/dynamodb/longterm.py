"""The DynamoDB long-term memory (table layout: `missions.core.specs.MEMORY`).

One item per memory: owner = "<user>#<seg1/seg2/...>" (partition), key (sort), namespace_head
(the first segment, for the `by_namespace_head` index), user_id, namespace, value (compact JSON:
DynamoDB has no float type and JSON keeps values exactly as given), embedding (little-endian
float32, 1 KB at 256 dimensions), created_at and updated_at.

Writes are read-then-PutItem guarded on created_at rather than one UpdateItem with
if_not_exists: both keep created_at, but moto streams an UpdateItem that creates an item as a
keys-only INSERT followed by a MODIFY, while a PutItem streams one INSERT, as DynamoDB does.
"""

from __future__ import annotations

import builtins
import json
import sys
from array import array
from typing import Any

import boto3
from botocore.exceptions import ClientError

from missions.adapters.embeddings import HashingEmbedder, cosine
from missions.adapters.memory.longterm import (
    LongTermWrites,
    Write,
    check_names,
    check_query,
    encode_value,
    searchable_text,
)
from missions.core.errors import ConflictError
from missions.core.memory.longterm import (
    MemoryChange,
    MemoryChangeKind,
    MemoryItem,
    Namespace,
    check_key,
    check_namespace,
)
from missions.core.mission.envelope import utcnow
from missions.core.specs import MEMORY
from missions.ports.memory import Embedder

INDEX = MEMORY.indexes[0].name  # by_namespace_head
_PUT_ATTEMPTS = 5
_CONDITION_FAILED = "ConditionalCheckFailedException"
_NAMES = {
    "#o": "owner",
    "#k": "key",
    "#v": "value",
    "#e": "embedding",
    "#c": "created_at",
    "#u": "updated_at",
}
_KINDS: dict[str, MemoryChangeKind] = {"INSERT": "added", "MODIFY": "updated", "REMOVE": "deleted"}


def owner_of(user_id: str, namespace: Namespace) -> str:
    return f"{user_id}#{'/'.join(namespace)}"


def pack_embedding(vector: list[float]) -> bytes:
    floats = array("f", vector)
    if sys.byteorder == "big":
        floats.byteswap()
    return floats.tobytes()


def unpack_embedding(data: bytes) -> list[float]:
    floats = array("f")
    floats.frombytes(bytes(data))
    if sys.byteorder == "big":
        floats.byteswap()
    return floats.tolist()


class DynamoLongTermMemory(LongTermWrites):
    def __init__(self, table_name: str, client: Any = None, embedder: Embedder | None = None) -> None:
        self._table = table_name
        self._client = client or boto3.client("dynamodb")
        self._embedder = embedder or HashingEmbedder()

    # ------------------------------------------------------------------ writes

    def _store(self, user_id: str, key: str, write: Write, *, seen: MemoryItem | None, compare: bool) -> MemoryItem:
        namespace, value, encoded = write.namespace, write.value, write.encoded
        embedding = pack_embedding(write.embedding)
        owner = owner_of(user_id, namespace)
        for _ in range(_PUT_ATTEMPTS):
            current = self._client.get_item(
                TableName=self._table,
                Key=_key(owner, key),
                ConsistentRead=True,
                ProjectionExpression="#c",
                ExpressionAttributeNames={"#c": "created_at"},
            )
            previous = current.get("Item", {}).get("created_at", {}).get("S")
            now = utcnow()
            condition: dict[str, Any] = (
                {"ConditionExpression": "#c = :c", "ExpressionAttributeValues": {":c": {"S": previous}}}
                if previous
                else {"ConditionExpression": "attribute_not_exists(#c)"}
            )
            names = {"#c": "created_at"}
            if compare:  # and the value is still the one the caller read
                if seen is None:
                    condition = {"ConditionExpression": "attribute_not_exists(#c)"}
                else:
                    condition["ConditionExpression"] = "#c = :c AND #v = :seen"
                    condition.setdefault("ExpressionAttributeValues", {":c": {"S": previous or ""}})
                    condition["ExpressionAttributeValues"][":seen"] = {"S": encode_value(seen.value)}
                    names["#v"] = "value"
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item={
                        "owner": {"S": owner},
                        "key": {"S": key},
                        "namespace_head": {"S": namespace[0]},
                        "user_id": {"S": user_id},
                        "namespace": {"L": [{"S": segment} for segment in namespace]},
                        "value": {"S": encoded},
                        "embedding": {"B": embedding},
                        "created_at": {"S": previous or now},
                        "updated_at": {"S": now},
                    },
                    ExpressionAttributeNames=names,
                    **condition,
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED:
                    if compare:
                        raise ConflictError(f"memory {owner}/{key} changed since it was read") from None
                    continue  # deleted or re-created meanwhile: read created_at again
                raise
            return MemoryItem(
                user_id=user_id,
                namespace=list(namespace),
                key=key,
                value=value,
                created_at=previous or now,
                updated_at=now,
            )
        raise ConflictError(f"memory {owner}/{key} kept changing during {_PUT_ATTEMPTS} attempts to write it")

    def delete(self, user_id: str, namespace: Namespace, key: str) -> bool:
        namespace = check_names(user_id, namespace)
        check_key(key)
        response = self._client.delete_item(
            TableName=self._table, Key=_key(owner_of(user_id, namespace), key), ReturnValues="ALL_OLD"
        )
        return bool(response.get("Attributes"))

    # ------------------------------------------------------------------ reads

    def get(self, user_id: str, namespace: Namespace, key: str) -> MemoryItem | None:
        namespace = check_names(user_id, namespace)
        check_key(key)
        response = self._client.get_item(
            TableName=self._table,
            Key=_key(owner_of(user_id, namespace), key),
            ConsistentRead=True,
            ProjectionExpression="#k, #v, #c, #u",
            ExpressionAttributeNames={name: _NAMES[name] for name in ("#k", "#v", "#c", "#u")},
        )
        item = response.get("Item")
        return _item(user_id, namespace, item) if item else None

    def list(self, user_id: str, namespace: Namespace, limit: int = 100) -> list[MemoryItem]:
        namespace = check_names(user_id, namespace)
        if limit <= 0:
            return []
        rows = self._query_owner(owner_of(user_id, namespace), "#k, #v, #c, #u", limit=limit)
        return [_item(user_id, namespace, row) for row in rows]

    def search(
        self, user_id: str, namespace: Namespace, query: str, limit: int = 10
    ) -> builtins.list[tuple[MemoryItem, float]]:
        namespace = check_names(user_id, namespace)
        check_query(query)
        if limit <= 0:
            return []
        rows = self._query_owner(owner_of(user_id, namespace), "#k, #v, #e, #c, #u")
        if not rows:
            return []
        wanted = self._embedder.embed([query])[0]
        items = [_item(user_id, namespace, row) for row in rows]
        vectors = [unpack_embedding(row["embedding"]["B"]) if "embedding" in row else [] for row in rows]
        stale = [i for i, vector in enumerate(vectors) if len(vector) != len(wanted)]  # another embedder wrote them
        if stale:
            fresh = self._embedder.embed([searchable_text(items[i].key, items[i].value) for i in stale])
            for i, vector in zip(stale, fresh, strict=True):
                vectors[i] = vector
        scored = [(item, cosine(wanted, vector)) for item, vector in zip(items, vectors, strict=True)]
        scored.sort(key=lambda pair: (-pair[1], pair[0].key))
        return scored[:limit]

    def users_with(self, namespace_head: str) -> builtins.list[str]:
        check_namespace((namespace_head,))
        users: set[str] = set()
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": INDEX,
            "KeyConditionExpression": "namespace_head = :h",
            "ExpressionAttributeValues": {":h": {"S": namespace_head}},
            "ProjectionExpression": "#o",
            "ExpressionAttributeNames": {"#o": "owner"},
        }
        while True:
            page = self._client.query(**kwargs)
            users.update(row["owner"]["S"].split("#", 1)[0] for row in page.get("Items", []))
            if not page.get("LastEvaluatedKey"):
                return sorted(users)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _query_owner(self, owner: str, projection: str, limit: int | None = None) -> builtins.list[dict[str, Any]]:
        names = {name: _NAMES[name] for name in ("#o", *(part.strip() for part in projection.split(",")))}
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#o = :o",
            "ExpressionAttributeValues": {":o": {"S": owner}},
            "ExpressionAttributeNames": names,
            "ProjectionExpression": projection,
            "ConsistentRead": True,
        }
        rows: builtins.list[dict[str, Any]] = []
        while True:
            if limit is not None:
                kwargs["Limit"] = limit - len(rows)
            page = self._client.query(**kwargs)
            rows.extend(page.get("Items", []))
            if not page.get("LastEvaluatedKey") or (limit is not None and len(rows) >= limit):
                return rows[:limit] if limit is not None else rows
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _key(owner: str, key: str) -> dict[str, Any]:
    return {"owner": {"S": owner}, "key": {"S": key}}


def _item(user_id: str, namespace: Namespace, row: dict[str, Any]) -> MemoryItem:
    return MemoryItem(
        user_id=user_id,
        namespace=list(namespace),
        key=row["key"]["S"],
        value=json.loads(row["value"]["S"]),
        created_at=row["created_at"]["S"],
        updated_at=row["updated_at"]["S"],
    )


# --------------------------------------------------------------------------- streams


def change_from_stream_record(record: dict[str, Any]) -> MemoryChange | None:
    """One DynamoDB Streams record (as Lambda receives it) as a MemoryChange.

    None when the record is not about a memory item (another table, a keys-only stream, an
    image without a JSON value). Only string and list attributes are read: Lambda delivers
    binary ones (the embedding) base64-encoded, the streams API as bytes.
    """
    kind = _KINDS.get(record.get("eventName", ""))
    data = record.get("dynamodb")
    if kind is None or not isinstance(data, dict):
        return None
    record_id = str(record["eventID"]) if record.get("eventID") else None
    old = _image(data.get("OldImage"))
    new = _image(data.get("NewImage"))
    if kind == "deleted":
        if old is None:
            return None
        user_id, namespace, key, old_value = old
        return MemoryChange(
            user_id=user_id, namespace=namespace, key=key, kind=kind, old=old_value, record_id=record_id
        )
    if new is None:
        return None
    user_id, namespace, key, new_value = new
    if old is None:  # a MODIFY of an item that held no memory yet adds one
        return MemoryChange(
            user_id=user_id, namespace=namespace, key=key, kind="added", new=new_value, record_id=record_id
        )
    return MemoryChange(
        user_id=user_id, namespace=namespace, key=key, kind=kind, old=old[3], new=new_value, record_id=record_id
    )


def _image(image: Any) -> tuple[str, list[str], str, Any] | None:
    if not isinstance(image, dict):
        return None
    try:
        user_id, separator, path = image["owner"]["S"].partition("#")
        key = image["key"]["S"]
        value = json.loads(image["value"]["S"])
        if "user_id" in image:
            user_id = image["user_id"]["S"]
        stored = image["namespace"]["L"] if "namespace" in image else None
        namespace = [segment["S"] for segment in stored] if stored else path.split("/")
    except (KeyError, TypeError, ValueError):
        return None
    return (user_id, namespace, key, value) if separator else None
