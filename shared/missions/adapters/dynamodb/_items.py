"""What every DynamoDB adapter here shares: the codec between plain Python and attribute values, the
paged and batched requests, and a consistent read and a create of one item.

Only the low-level client is used, with boto3's TypeSerializer/TypeDeserializer. DynamoDB has no
float type: floats are written as Decimal (through their shortest repr, so they round-trip exactly)
and read back as float, integral numbers as int.
"""

from __future__ import annotations

import json
import time
import zlib
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from missions.core.errors import ConflictError, NotFound

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, WriteRequestTypeDef

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

_CONDITION_FAILED = "ConditionalCheckFailedException"
_BATCH_SIZE = 25
_BATCH_GET_SIZE = 100
_BATCH_ATTEMPTS = 8


class DynamoTable:
    """A store on one table: its name, a client (boto3's default, made when the store is, never at import),
    and how long its items live (`ttl_seconds`; None keeps them)."""

    def __init__(self, table_name: str, client: Any = None, ttl_seconds: int | None = None):
        self.table_name = table_name
        self._client = client if client is not None else default_client()
        self.ttl_seconds = ttl_seconds


def default_client() -> Any:
    import boto3

    return boto3.client("dynamodb")


def _to_dynamo(value: Any) -> Any:
    """JSON-plain Python -> values TypeSerializer accepts (floats become Decimal)."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int, bytes, Binary, Decimal)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"DynamoDB cannot store the number {value!r}")
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {str(k): _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_dynamo(v) for v in value]
    raise TypeError(f"cannot store {type(value).__name__} in DynamoDB")


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent  # 'n', 'N' or 'F' for NaN and infinities
        if value == value.to_integral_value() and isinstance(exponent, int) and exponent >= 0:
            return int(value)
        return float(value)
    if isinstance(value, Binary):
        return bytes(value.value)  # type: ignore[attr-defined]  # boto3-stubs omit Binary.value
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_from_dynamo(v) for v in value]
    if isinstance(value, set):  # never written by these adapters; be lenient on read
        return [_from_dynamo(v) for v in value]
    return value


def serialize(item: dict[str, Any]) -> dict[str, AttributeValueTypeDef]:
    return {k: _serializer.serialize(_to_dynamo(v)) for k, v in item.items()}


def attribute_value(value: Any) -> AttributeValueTypeDef:
    return _serializer.serialize(_to_dynamo(value))


def deserialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _from_dynamo(_deserializer.deserialize(v)) for k, v in item.items()}


def condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED


def read_item(client: Any, table_name: str, key: dict[str, Any], missing: str) -> dict[str, Any]:
    """The item under `key`, read consistently; NotFound(`missing`) when there is none."""
    response = client.get_item(TableName=table_name, Key=key, ConsistentRead=True)
    if "Item" not in response:
        raise NotFound(missing)
    item: dict[str, Any] = response["Item"]
    return item


def create_item(client: Any, table_name: str, item: dict[str, Any], key_attribute: str, exists: str) -> None:
    """Write a new item; ConflictError(`exists`) when one with its key is there already."""
    try:
        client.put_item(TableName=table_name, Item=item, ConditionExpression=f"attribute_not_exists({key_attribute})")
    except ClientError as exc:
        if condition_failed(exc):
            raise ConflictError(exists) from None
        raise


def write_batches(client: Any, table_name: str, requests: list[WriteRequestTypeDef]) -> None:
    """BatchWriteItem in batches of 25, retrying unprocessed items with backoff."""
    for start in range(0, len(requests), _BATCH_SIZE):
        pending: dict[str, list[WriteRequestTypeDef]] = {table_name: requests[start : start + _BATCH_SIZE]}
        for attempt in range(_BATCH_ATTEMPTS):
            response = client.batch_write_item(RequestItems=pending)
            pending = {k: v for k, v in (response.get("UnprocessedItems") or {}).items() if v}
            if not pending:
                break
            time.sleep(min(0.05 * 2**attempt, 2.0))
        else:
            left = sum(len(v) for v in pending.values())
            raise RuntimeError(f"{left} writes to {table_name} still unprocessed after {_BATCH_ATTEMPTS} attempts")


def expiry(ttl_seconds: int | None) -> int | None:
    return int(time.time()) + int(ttl_seconds) if ttl_seconds else None


def query_all(client: Any, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while True:
        page = client.query(**kwargs)
        items.extend(page.get("Items", []))
        last = page.get("LastEvaluatedKey")
        if not last:
            return items
        kwargs["ExclusiveStartKey"] = last


def query_partition(client: Any, table_name: str, key: str, value: str, **options: Any) -> list[dict[str, Any]]:
    """Every item of one partition (string key `key` = `value`), all pages; `options` add to the query
    (ConsistentRead, ProjectionExpression, ...)."""
    return query_all(
        client,
        TableName=table_name,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": key},
        ExpressionAttributeValues={":pk": {"S": value}},
        **options,
    )


def batch_get(client: Any, table_name: str, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items with these keys, in their order, missing ones left out: BatchGetItem, 100 keys a request,
    unprocessed keys retried with backoff. Eventually consistent, as the index reads that name them are."""

    def identity(item: dict[str, Any], names: Any) -> tuple[Any, ...]:
        return tuple(json.dumps(item[name], sort_keys=True) for name in sorted(names))

    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for start in range(0, len(keys), _BATCH_GET_SIZE):
        pending: dict[str, Any] = {table_name: {"Keys": keys[start : start + _BATCH_GET_SIZE]}}
        for attempt in range(_BATCH_ATTEMPTS):
            response = client.batch_get_item(RequestItems=pending)
            for item in response.get("Responses", {}).get(table_name, []):
                found[identity(item, keys[0])] = item
            pending = {k: v for k, v in (response.get("UnprocessedKeys") or {}).items() if v.get("Keys")}
            if not pending:
                break
            time.sleep(min(0.05 * 2**attempt, 2.0))
        else:
            raise RuntimeError(f"reads of {table_name} still unprocessed after {_BATCH_ATTEMPTS} attempts")
    return [found[identity(key, key)] for key in keys if identity(key, key) in found]


def compressed(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(), 6)
