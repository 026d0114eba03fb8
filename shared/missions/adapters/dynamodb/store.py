"""DynamoDB adapters of the store ports (and the blob store of `missions.core.offload`).

Clients are injected (or created lazily in the constructor, never at import time) and only
the low-level client is used, with boto3's TypeSerializer/TypeDeserializer. DynamoDB has no
float type: floats are written as Decimal (through their shortest repr, so they round-trip
exactly) and read back as float, integral numbers as int.

Table layouts follow `missions.core.specs` (the same specs the CDK stack deploys).
"""

from __future__ import annotations

import json
import time
import zlib
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError
from pydantic import TypeAdapter

from missions.core.artifacts import Artifact, check_artifact
from missions.core.envelope import InterruptResponse, utcnow
from missions.core.errors import ConflictError, NotFound, TransitionRefused
from missions.core.events import Event
from missions.core.offload import blob_scope
from missions.core.specs import BLOB_INLINE_LIMIT, MISSION_SUMMARY, TableSpec
from missions.core.status import MissionStatus
from missions.ports.store import (
    Checkpoint,
    InterruptRecord,
    MissionRecord,
    MissionSummary,
    cost_of,
    event_position,
    parse_position,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, WriteRequestTypeDef

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

_CONDITION_FAILED = "ConditionalCheckFailedException"
_BATCH_SIZE = 25
_BATCH_GET_SIZE = 100
_BATCH_ATTEMPTS = 8


# --------------------------------------------------------------------------- tables


def table_definition(spec: TableSpec, name: str) -> dict[str, Any]:
    """CreateTable kwargs for a spec (all key attributes are strings)."""
    definition: dict[str, Any] = {
        "TableName": name,
        "KeySchema": spec.key_schema(),
        "AttributeDefinitions": [{"AttributeName": attr, "AttributeType": "S"} for attr in spec.attributes()],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if spec.indexes:
        definition["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index.name,
                "KeySchema": [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
                + ([{"AttributeName": index.sort_key, "KeyType": "RANGE"}] if index.sort_key else []),
                "Projection": {"ProjectionType": index.projection_type}
                | ({"NonKeyAttributes": list(index.non_key_attributes)} if index.non_key_attributes else {}),
            }
            for index in spec.indexes
        ]
    if spec.stream:
        definition["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return definition


def time_to_live(spec: TableSpec, name: str) -> dict[str, Any] | None:
    """UpdateTimeToLive kwargs for a spec, or None when the table has no TTL attribute."""
    if not spec.ttl_attribute:
        return None
    return {
        "TableName": name,
        "TimeToLiveSpecification": {"Enabled": True, "AttributeName": spec.ttl_attribute},
    }


# --------------------------------------------------------------------------- (de)serialization


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


def _serialize(item: dict[str, Any]) -> dict[str, AttributeValueTypeDef]:
    return {k: _serializer.serialize(_to_dynamo(v)) for k, v in item.items()}


def _value(value: Any) -> AttributeValueTypeDef:
    return _serializer.serialize(_to_dynamo(value))


def _deserialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _from_dynamo(_deserializer.deserialize(v)) for k, v in item.items()}


def _condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED


def _write_batches(client: Any, table_name: str, requests: list[WriteRequestTypeDef]) -> None:
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


def _expires_at(ttl_seconds: int | None) -> int | None:
    return int(time.time()) + int(ttl_seconds) if ttl_seconds else None


def _query_all(client: Any, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while True:
        page = client.query(**kwargs)
        items.extend(page.get("Items", []))
        last = page.get("LastEvaluatedKey")
        if not last:
            return items
        kwargs["ExclusiveStartKey"] = last


@cache
def _mission_field_adapter(name: str) -> TypeAdapter[Any]:
    annotation = MissionRecord.model_fields[name].annotation
    if annotation is None:  # pydantic fills it for every declared field
        raise TypeError(f"mission field {name!r} has no annotation")
    return TypeAdapter(annotation)


# --------------------------------------------------------------------------- missions


class DynamoMissionStore:
    """Missions table: key mission_id; GSIs by_user (user_id, created_at) and by_capability (capability,
    created_at), which hold a mission's summary (specs.MISSION_SUMMARY), and by_status (status,
    completed_at), which holds its keys. Unset fields are absent, not NULL: an index key may not be NULL.

    Nothing an index holds changes while a mission runs, so the update each stage makes (its stage,
    counters, next stage) writes the table alone. What listings show of a stage and a cost is copied
    into `listed_stage` and `listed_cost_usd` by the writes that move a mission to a status other than
    running (and by any plain update of them); listings read a running mission's record itself. The
    `result` is stored compressed (zlib of its JSON): it is most of a finished mission's item, and every
    later write of the item (feedback, archiving) costs its size again."""

    INDEX = "by_user"
    STATUS_INDEX = "by_status"
    LISTED = ("listed_stage", "listed_cost_usd")

    def __init__(self, table_name: str, client: Any = None):
        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")

    def create(self, record: MissionRecord) -> None:
        item = record.model_dump(mode="json", exclude_none=True)
        if record.result is not None:
            item["result"] = _compressed(record.result)
        item["listed_cost_usd"] = cost_of(record.counters)
        if record.stage is not None:
            item["listed_stage"] = record.stage
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item=_serialize(item),
                ConditionExpression="attribute_not_exists(mission_id)",
            )
        except ClientError as exc:
            if _condition_failed(exc):
                raise ConflictError(f"mission {record.mission_id} exists") from None
            raise

    def get(self, mission_id: str) -> MissionRecord:
        response = self._client.get_item(
            TableName=self.table_name, Key={"mission_id": {"S": mission_id}}, ConsistentRead=True
        )
        if "Item" not in response:
            raise NotFound(f"mission {mission_id}")
        return mission_record(response["Item"])

    def update(self, mission_id: str, **fields: Any) -> None:
        if "status" in fields:
            raise ValueError("a mission's status changes only through missions.service.lifecycle (transition)")
        self._write(mission_id, fields, allowed_from=None)

    def transition(self, mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> MissionRecord:
        written = self._write(mission_id, {**fields, "status": status}, allowed_from=allowed_from)
        assert written is not None
        return written

    def add_note(self, mission_id: str, note: dict[str, Any], allowed_from: frozenset[str], limit: int) -> None:
        """One conditional list_append: the status allows it and the list is shorter than `limit`."""
        froms = sorted(allowed_from)
        values: dict[str, Any] = {f":from{i}": {"S": value} for i, value in enumerate(froms)}
        values |= {":note": {"L": [_value(note)]}, ":empty": {"L": []}, ":limit": {"N": str(limit)}}
        values[":now"] = {"S": utcnow()}
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"mission_id": {"S": mission_id}},
                UpdateExpression="SET #n = list_append(if_not_exists(#n, :empty), :note), updated_at = :now",
                ConditionExpression=(
                    f"attribute_exists(mission_id) AND #st IN ({', '.join(f':from{i}' for i in range(len(froms)))})"
                    " AND (attribute_not_exists(#n) OR size(#n) < :limit)"
                ),
                ExpressionAttributeNames={"#n": "notes", "#st": "status"},
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            current = self.get(mission_id)  # NotFound when missing
            if current.status not in allowed_from:
                raise TransitionRefused(mission_id, current.status, "noted") from None
            raise ConflictError(f"mission {mission_id} already has {limit} notes") from None

    def discard(self, mission_id: str) -> bool:
        try:
            self._client.delete_item(
                TableName=self.table_name,
                Key={"mission_id": {"S": mission_id}},
                ConditionExpression="attribute_not_exists(execution_arn) AND #st IN (:c, :q, :r)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":c": {"S": "created"}, ":q": {"S": "queued"}, ":r": {"S": "running"}},
            )
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise
        return True

    def _write(
        self, mission_id: str, fields: dict[str, Any], allowed_from: frozenset[str] | None
    ) -> MissionRecord | None:
        """The update; with `allowed_from` (a transition) the record as written, returned by the write
        itself (ReturnValues ALL_NEW costs no read unit)."""
        fields.pop("updated_at", None)
        unknown = set(fields) - set(MissionRecord.model_fields)
        if unknown:
            raise ValueError(f"unknown mission fields: {sorted(unknown)}")
        if "mission_id" in fields:
            raise ValueError("mission_id cannot be updated")
        values = {name: _mission_field_adapter(name).validate_python(v) for name, v in fields.items()}
        values = {name: _mission_field_adapter(name).dump_python(v, mode="json") for name, v in values.items()}
        values["updated_at"] = utcnow()
        names = {f"#f{i}": name for i, name in enumerate(values)}
        kept = [i for i, value in enumerate(values.values()) if value is not None]
        removed = [i for i, value in enumerate(values.values()) if value is None]
        attr_values = {
            f":v{i}": _value(_compressed(value) if name == "result" else value)
            for i, (name, value) in enumerate(values.items())
            if value is not None
        }
        sets = [f"#f{i} = :v{i}" for i in kept]
        extra_names: dict[str, str] = {"#pk": "mission_id"}
        self._listed(values, sets, extra_names, attr_values)
        expression = "SET " + ", ".join(sets)
        if removed:
            expression += " REMOVE " + ", ".join(f"#f{i}" for i in removed)
        condition = "attribute_exists(#pk)"
        if allowed_from is not None:  # the lifecycle's guard: one conditional write, no read first
            froms = sorted(allowed_from)
            condition += f" AND #st IN ({', '.join(f':from{i}' for i in range(len(froms)))})"
            extra_names["#st"] = "status"
            attr_values.update({f":from{i}": {"S": value} for i, value in enumerate(froms)})
        try:
            response = self._client.update_item(
                TableName=self.table_name,
                Key={"mission_id": {"S": mission_id}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames={**names, **extra_names},
                ExpressionAttributeValues=attr_values,
                ReturnValues="ALL_NEW" if allowed_from is not None else "NONE",
            )
        except ClientError as exc:
            if _condition_failed(exc):
                current = self.get(mission_id)  # NotFound when missing; else the status refused it
                raise TransitionRefused(mission_id, current.status, str(fields.get("status"))) from None
            raise
        return mission_record(response["Attributes"]) if allowed_from is not None else None

    @staticmethod
    def _listed(values: dict[str, Any], sets: list[str], names: dict[str, str], attr_values: dict[str, Any]) -> None:
        """What listings show of the stage and the cost, kept by the writes that can change it for them: a
        move to any status but running (from this write's values, else from the stored ones), or a plain
        update of them. A running mission's stage reports write neither, so they write no index."""
        if values.get("status") == MissionStatus.RUNNING:
            return
        moving = "status" in values
        if "stage" in values or moving:
            names["#ls"] = "listed_stage"
            if "stage" in values:
                sets.append("#ls = :ls")
                attr_values[":ls"] = _value(values["stage"])  # NULL when it has none
            else:
                sets.append("#ls = if_not_exists(#stg, :nostage)")
                names["#stg"] = "stage"
                attr_values[":nostage"] = {"NULL": True}
        if "counters" in values or moving:
            names["#lc"] = "listed_cost_usd"
            if "counters" in values:
                sets.append("#lc = :lc")
                attr_values[":lc"] = _value(cost_of(values["counters"]))
            else:
                sets.append("#lc = if_not_exists(#ctr.#cost, :nocost)")
                names |= {"#ctr": "counters", "#cost": "cost_usd"}
                attr_values[":nocost"] = {"N": "0"}

    def set_feedback(self, mission_id: str, feedback: dict[str, Any]) -> None:
        """Record feedback exactly once, however many requests race to give it."""
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"mission_id": {"S": mission_id}},
                UpdateExpression="SET #fb = :fb, updated_at = :now",
                ConditionExpression="attribute_exists(mission_id) AND (attribute_not_exists(#fb) OR #fb = :null)",
                ExpressionAttributeNames={"#fb": "feedback"},
                ExpressionAttributeValues={":fb": _value(feedback), ":now": {"S": utcnow()}, ":null": {"NULL": True}},
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            self.get(mission_id)  # NotFound when it does not exist
            raise ConflictError(f"mission {mission_id} already has feedback") from None

    def ended_before(self, status: str, before: str, limit: int = 100) -> list[MissionRecord]:
        """The index holds the keys: the missions it names are read whole (retention archives all of them),
        and kept if they still are as it says (an index lags its table)."""
        if limit <= 0:
            return []
        response = self._client.query(
            TableName=self.table_name,
            IndexName=self.STATUS_INDEX,
            KeyConditionExpression="#s = :s AND completed_at < :before",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": status}, ":before": {"S": before}},
            Limit=limit,
        )
        keys = [{"mission_id": item["mission_id"]} for item in response.get("Items", [])]
        records = [mission_record(item) for item in batch_get(self._client, self.table_name, keys)]
        return [r for r in records if r.status == status and r.completed_at is not None and r.completed_at < before]

    def list_for_user(self, user_id: str, limit: int = 50) -> list[MissionSummary]:
        if limit <= 0:
            return []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.INDEX,
            "KeyConditionExpression": "user_id = :u",
            "ExpressionAttributeValues": {":u": {"S": user_id}},
            "ScanIndexForward": False,
        }
        entries: list[dict[str, Any]] = []
        while len(entries) < limit:
            page = self._client.query(**kwargs, Limit=limit - len(entries))
            entries += page.get("Items", [])
            if not page.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return mission_summaries(self._client, self.table_name, entries)


def mission_record(raw: dict[str, Any]) -> MissionRecord:
    """A mission's item, whole, as a record."""
    item = _deserialize(raw)
    for name in DynamoMissionStore.LISTED:
        item.pop(name, None)
    if isinstance(item.get("result"), bytes):  # compressed (a record written before is a map)
        item["result"] = json.loads(zlib.decompress(item["result"]))
    return MissionRecord.model_validate(item)


def mission_summaries(client: Any, table_name: str, entries: list[dict[str, Any]]) -> list[MissionSummary]:
    """Summaries from entries of a summary index (by_user, by_capability), in their order. A running
    mission's (or one written before the index kept `listed_cost_usd`) is made from its record, read
    with the others' in one batch; the rest from the entry itself."""
    whole = [{"mission_id": e["mission_id"]} for e in entries if _needs_record(e)]
    found = {item["mission_id"]["S"]: item for item in batch_get(client, table_name, whole)} if whole else {}
    summaries: list[MissionSummary] = []
    for entry in entries:
        mission_id = entry["mission_id"]["S"]
        if not _needs_record(entry):
            summaries.append(_entry_summary(entry))
        elif mission_id in found:  # else deleted since the index saw it
            summaries.append(MissionSummary.of(mission_record(found[mission_id])))
    return summaries


def _needs_record(entry: dict[str, Any]) -> bool:
    return entry.get("status", {}).get("S") == MissionStatus.RUNNING or "listed_cost_usd" not in entry


def _entry_summary(raw: dict[str, Any]) -> MissionSummary:
    """A summary from an index entry (one that holds more, an index projecting ALL, gives the same)."""
    item = _deserialize({k: v for k, v in raw.items() if k in _SUMMARY_ENTRY})
    item["stage"] = item.pop("listed_stage", None)
    item["cost_usd"] = item.pop("listed_cost_usd", 0.0)
    return MissionSummary.model_validate(item)


_SUMMARY_ENTRY = frozenset({"mission_id", "created_at", *MISSION_SUMMARY})


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


def _compressed(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(), 6)


# --------------------------------------------------------------------------- checkpoints


class DynamoCheckpointStore:
    """Checkpoints table: thread_id / checkpoint_id. The whole envelope (a snapshot) or the delta, and
    the stage records, are compact JSON: a number comes back as the very type it was written
    (DynamoDB's numbers would turn every float and int into a Decimal), and an attribute holds any key.
    Each is stored compressed (zlib, as binary): a checkpoint is written at every stage, and JSON of
    tool outputs compresses several times, so most of a stage's write units went to its checkpoint.
    Checkpoints written before as text still read."""

    def __init__(self, table_name: str, client: Any = None, ttl_seconds: int | None = None):
        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")
        self.ttl_seconds = ttl_seconds

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        item = checkpoint.model_dump(mode="json", exclude=set(_JSON_ATTRIBUTES))
        for name in _JSON_ATTRIBUTES:
            value = getattr(checkpoint, name)
            if value is not None and value != []:
                item[name] = _compressed(value if name != "records" else [r.model_dump(mode="json") for r in value])
        expires = _expires_at(self.ttl_seconds)
        if expires is not None:
            item["expires_at"] = expires
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item=_serialize(item),
                ConditionExpression="attribute_not_exists(checkpoint_id)",
            )
        except ClientError as exc:
            if _condition_failed(exc):  # a retried stage: history does not fork
                return self.get(checkpoint.thread_id, checkpoint.checkpoint_id)
            raise
        return checkpoint

    def get(self, thread_id: str, checkpoint_id: str) -> Checkpoint:
        response = self._client.get_item(
            TableName=self.table_name,
            Key={"thread_id": {"S": thread_id}, "checkpoint_id": {"S": checkpoint_id}},
            ConsistentRead=True,
        )
        if "Item" not in response:
            raise NotFound(f"checkpoint {thread_id}/{checkpoint_id}")
        return self._decode(response["Item"])

    def list(self, thread_id: str) -> list[Checkpoint]:
        items = _query_all(
            self._client,
            TableName=self.table_name,
            KeyConditionExpression="thread_id = :t",
            ExpressionAttributeValues={":t": {"S": thread_id}},
            ConsistentRead=True,
        )
        return [self._decode(item) for item in items]

    def delete_thread(self, thread_id: str) -> int:
        keys = _query_all(
            self._client,
            TableName=self.table_name,
            KeyConditionExpression="thread_id = :t",
            ExpressionAttributeValues={":t": {"S": thread_id}},
            ProjectionExpression="thread_id, checkpoint_id",
        )
        _write_batches(self._client, self.table_name, [{"DeleteRequest": {"Key": key}} for key in keys])
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
        item = _deserialize(raw)
        item.pop("expires_at", None)
        for name in _JSON_ATTRIBUTES:
            if name in item:
                stored = item[name]
                item[name] = json.loads(zlib.decompress(stored) if isinstance(stored, bytes) else stored)
        return Checkpoint.model_validate(item)


_JSON_ATTRIBUTES = ("envelope", "delta", "records")  # a checkpoint's attributes kept as JSON text


# --------------------------------------------------------------------------- events


class DynamoEventStore:
    """Events table: mission_id / position. A batch (a stage's events, an answer's, a cancel's) is one
    item, its events compressed together (zlib of their JSON), at position "e<batch:012d>"; a batch too
    big for one item (PART_BYTES compressed) goes on in parts "e<batch:012d>+<first event's index:06d>",
    which sort after it and before the next batch. An event's cursor is its batch and its index in it
    (`event_position`), whatever part holds it.

    The batch sequence needs no counter: an append reads the mission's last item (one consistent query)
    and puts its batch at the next number only if that is still free (a conditional put); a writer that
    lost the race reads again. So appending a stage's events costs the write of one small item and the
    read of another. When the last item belongs to the same batch id, the batch is rewritten in place
    (a retry): its parts are put again and parts the retry no longer needs are deleted.

    Items written before batches held several events (one event an item, "e<sequence:012d>", and a
    counter item "c") are read as batches of one event, and appends go on after them."""

    PART_BYTES = 350 * 1024  # a compressed part, leaving room in a 400 KB item for its keys and attributes
    FIRST = "e"  # every position of an event item starts with it (the old counter item, "c", sorts before)
    ATTEMPTS = 20  # conditional puts lost to concurrent writers before giving up
    PAGE_ITEMS = 10  # items a read queries at a time: enough for a page of events, few read needlessly

    def __init__(self, table_name: str, client: Any = None, ttl_seconds: int | None = None):
        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")
        self.ttl_seconds = ttl_seconds

    # -- writing -----------------------------------------------------------------------------------

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        if not events:
            return
        parts = self.pack(events, self.PART_BYTES)
        for _ in range(self.ATTEMPTS):
            last = self._last(mission_id)
            if last is not None and last[1] == batch_id:  # a retry of the last batch: in place
                self._rewrite(mission_id, last[0], batch_id, parts)
                return
            sequence = last[0] + 1 if last is not None else 1
            first, *rest = parts
            if not self._put(mission_id, sequence, batch_id, first, "attribute_not_exists(#p)"):
                continue  # another writer took that place: read again
            for part in rest:  # under this batch's number: no other writer puts there
                self._put(mission_id, sequence, batch_id, part, None)
            return
        raise ConflictError(f"events of {mission_id}: too many concurrent writers")

    @staticmethod
    def pack(events: list[Event], limit: int) -> list[tuple[int, bytes]]:
        """The batch's parts: (index of its first event, its events compressed), as few as fit `limit`."""
        docs = [event.model_dump(mode="json", exclude={"mission_id", "position"}) for event in events]

        def parts(start: int, end: int) -> list[tuple[int, bytes]]:
            text = json.dumps(docs[start:end], separators=(",", ":"), ensure_ascii=False)
            blob = zlib.compress(text.encode(), 6)
            if len(blob) <= limit:
                return [(start, blob)]
            if end - start == 1:
                raise ValueError(f"an event of {len(text)} bytes ({len(blob)} compressed) does not fit in an item")
            middle = (start + end) // 2
            return parts(start, middle) + parts(middle, end)

        return parts(0, len(docs))

    def _last(self, mission_id: str) -> tuple[int, str | None] | None:
        """(batch number, batch id) of the mission's last item, or None before its first event."""
        page = self._client.query(
            TableName=self.table_name,
            KeyConditionExpression="mission_id = :m AND begins_with(#p, :e)",
            ExpressionAttributeNames={"#p": "position", "#b": "batch_id"},
            ExpressionAttributeValues={":m": {"S": mission_id}, ":e": {"S": self.FIRST}},
            ProjectionExpression="#p, #b",
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = page.get("Items", [])
        if not items:
            return None
        position = items[0]["position"]["S"]
        return int(position[1:13]), items[0].get("batch_id", {}).get("S")

    def _put(
        self, mission_id: str, sequence: int, batch_id: str, part: tuple[int, bytes], condition: str | None
    ) -> bool:
        """Put one part; False when the condition failed."""
        first, blob = part
        item: dict[str, AttributeValueTypeDef] = {
            "mission_id": {"S": mission_id},
            "position": {"S": self._key(sequence, first)},
            "batch_id": {"S": batch_id},
            "first": {"N": str(first)},
            "events": {"B": blob},
        }
        expires = _expires_at(self.ttl_seconds)
        if expires is not None:
            item["expires_at"] = {"N": str(expires)}
        kwargs: dict[str, Any] = {"TableName": self.table_name, "Item": item}
        if condition is not None:
            kwargs |= {"ConditionExpression": condition, "ExpressionAttributeNames": {"#p": "position"}}
        try:
            self._client.put_item(**kwargs)
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise
        return True

    def _rewrite(self, mission_id: str, sequence: int, batch_id: str, parts: list[tuple[int, bytes]]) -> None:
        """The batch again, in its place: its parts put anew, and any part of the try before that this one
        no longer has deleted."""
        before = {
            item["position"]["S"]
            for item in _query_all(
                self._client,
                TableName=self.table_name,
                KeyConditionExpression="mission_id = :m AND begins_with(#p, :b)",
                ExpressionAttributeNames={"#p": "position"},
                ExpressionAttributeValues={":m": {"S": mission_id}, ":b": {"S": self._key(sequence, 0)}},
                ProjectionExpression="#p",
                ConsistentRead=True,
            )
        }
        for part in parts:
            self._put(mission_id, sequence, batch_id, part, None)
        for position in sorted(before - {self._key(sequence, first) for first, _ in parts}):
            self._client.delete_item(
                TableName=self.table_name, Key={"mission_id": {"S": mission_id}, "position": {"S": position}}
            )

    @staticmethod
    def _key(sequence: int, first: int) -> str:
        return f"e{sequence:012d}" + (f"+{first:06d}" if first else "")

    # -- reading -----------------------------------------------------------------------------------

    def read(self, mission_id: str, after: str | None = None, limit: int = 100) -> tuple[list[Event], str | None]:
        cursor = parse_position(after) if after is not None else (0, 0)
        if limit <= 0:
            return [], after
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "ConsistentRead": True,
            # from the cursor's batch on (its events after the cursor, and every later batch)
            "KeyConditionExpression": "mission_id = :m AND #p >= :from",
            "ExpressionAttributeNames": {"#p": "position"},
            "ExpressionAttributeValues": {
                ":m": {"S": mission_id},
                ":from": {"S": self._key(cursor[0], 0) if after is not None else self.FIRST},
            },
        }
        events: list[Event] = []
        while len(events) < limit:
            page = self._client.query(**kwargs, Limit=min(limit - len(events) + 1, self.PAGE_ITEMS))
            for raw in page.get("Items", []):
                for place, event in self._decode(mission_id, raw):
                    if place > cursor:
                        events.append(event)
                if len(events) >= limit:
                    break
            if len(events) >= limit or not page.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        events = events[:limit]
        return events, (events[-1].position if events else after)

    @staticmethod
    def _decode(mission_id: str, raw: dict[str, Any]) -> list[tuple[tuple[int, int], Event]]:
        """The events an item holds, each with its place (batch, index)."""
        sequence = int(raw["position"]["S"][1:13])
        if "events" not in raw:  # written one event an item: a batch of one
            item = _deserialize(raw)
            item.pop("expires_at", None)
            item["position"] = event_position(sequence, 0)
            return [((sequence, 0), Event.model_validate(item))]
        first = int(raw["first"]["N"])
        docs = json.loads(zlib.decompress(bytes(raw["events"]["B"])))
        return [
            (
                (sequence, first + offset),
                Event.model_validate(
                    {**doc, "mission_id": mission_id, "position": event_position(sequence, first + offset)}
                ),
            )
            for offset, doc in enumerate(docs)
        ]


# --------------------------------------------------------------------------- interrupts


class DynamoInterruptStore:
    """Interrupts table: mission_id / interrupt_id."""

    def __init__(self, table_name: str, client: Any = None, ttl_seconds: int | None = None):
        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")
        self.ttl_seconds = ttl_seconds

    WAITING_INDEX = "waiting"

    def put(self, record: InterruptRecord) -> None:
        item = record.model_dump(mode="json")
        if record.status == "pending":
            item["waiting"] = "pending"  # the sparse index of unanswered questions
        expires = _expires_at(self.ttl_seconds)
        if expires is not None:
            item["expires_at"] = expires
        try:
            self._client.put_item(
                TableName=self.table_name,
                Item=_serialize(item),
                ConditionExpression="attribute_not_exists(interrupt_id) OR #s = :pending",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":pending": {"S": "pending"}},
            )
        except ClientError as exc:
            if _condition_failed(exc):
                raise ConflictError(f"interrupt {record.interrupt_id} is no longer pending") from None
            raise

    def get(self, mission_id: str, interrupt_id: str) -> InterruptRecord:
        response = self._client.get_item(
            TableName=self.table_name, Key=self._key(mission_id, interrupt_id), ConsistentRead=True
        )
        if "Item" not in response:
            raise NotFound(f"interrupt {mission_id}/{interrupt_id}")
        return self._decode(response["Item"])

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
                    ":response": _value(response.model_dump(mode="json")),
                    ":now": {"S": utcnow()},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if not _condition_failed(exc):
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
            if not _condition_failed(exc):
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
            if not _condition_failed(exc):
                raise
            raise NotFound(f"interrupt {mission_id}/{interrupt_id}") from None

    def pending(self, mission_id: str) -> list[InterruptRecord]:
        items = _query_all(
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
        item = _deserialize(raw)
        item.pop("expires_at", None)
        item.pop("waiting", None)
        return InterruptRecord.model_validate(item)


# --------------------------------------------------------------------------- artifacts


class DynamoArtifactStore:
    """Artifacts table: mission_id / key = "<path>#<version:06d>", so a Query lists them in order."""

    def __init__(self, table_name: str, client: Any = None, ttl_seconds: int | None = None):
        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")
        self.ttl_seconds = ttl_seconds

    def put(self, mission_id: str, path: str, content: Any, *, stage: str = "", written_by: str = "") -> Artifact:
        check_artifact(path, content)
        for _ in range(5):  # a concurrent writer took the version: read again and take the next one
            latest = self._latest(mission_id, path)
            if latest is not None and written_by and latest.written_by == written_by:
                return latest
            artifact = Artifact(
                mission_id=mission_id,
                path=path,
                version=(latest.version if latest else 0) + 1,
                content=content,
                stage=stage,
                written_by=written_by,
            )
            item = artifact.model_dump(mode="json", exclude={"content"})
            item["key"] = self._key(path, artifact.version)
            item["content"] = json.dumps(content, separators=(",", ":"), ensure_ascii=False, default=str)
            expires = _expires_at(self.ttl_seconds)
            if expires is not None:
                item["expires_at"] = expires
            try:
                self._client.put_item(
                    TableName=self.table_name,
                    Item=_serialize(item),
                    ConditionExpression="attribute_not_exists(#k)",
                    ExpressionAttributeNames={"#k": "key"},
                )
                return artifact
            except ClientError as exc:
                if not _condition_failed(exc):
                    raise
        raise ConflictError(f"artifact {path} of {mission_id}: too many concurrent writers")

    def get(self, mission_id: str, path: str, version: int | None = None) -> Artifact:
        if version is None:
            latest = self._latest(mission_id, path)
            if latest is None:
                raise NotFound(f"artifact {path} of {mission_id}")
            return latest
        response = self._client.get_item(
            TableName=self.table_name,
            Key={"mission_id": {"S": mission_id}, "key": {"S": self._key(path, version)}},
            ConsistentRead=True,
        )
        if "Item" not in response:
            raise NotFound(f"artifact {path} v{version} of {mission_id}")
        return self._decode(response["Item"])

    def list(self, mission_id: str) -> list[Artifact]:
        items = _query_all(
            self._client,
            TableName=self.table_name,
            KeyConditionExpression="mission_id = :m",
            ExpressionAttributeValues={":m": {"S": mission_id}},
            ConsistentRead=True,
        )
        return [self._decode(item) for item in items]

    def _latest(self, mission_id: str, path: str) -> Artifact | None:
        response = self._client.query(
            TableName=self.table_name,
            KeyConditionExpression="mission_id = :m AND begins_with(#k, :p)",
            ExpressionAttributeNames={"#k": "key"},
            ExpressionAttributeValues={":m": {"S": mission_id}, ":p": {"S": f"{path}#"}},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = response.get("Items", [])
        return self._decode(items[0]) if items else None

    @staticmethod
    def _key(path: str, version: int) -> str:
        return f"{path}#{version:06d}"

    @staticmethod
    def _decode(raw: dict[str, Any]) -> Artifact:
        item = _deserialize(raw)
        item.pop("expires_at", None)
        item.pop("key", None)
        item["content"] = json.loads(item["content"])
        return Artifact.model_validate(item)


# --------------------------------------------------------------------------- blobs

BLOB_PREFIX = "blobs/"  # a mission's big blobs: blobs/<mission id>/<sha256>


def blob_thread(mission_id: str) -> str:
    """The checkpoints table's partition of a mission's blobs."""
    return f"blob#{mission_id}"


class DynamoBlobStore:
    """Content-addressed blobs of a mission: small ones inline in the checkpoints table, big ones in S3.

    A key is "<mission id>/<sha256>" (missions.core.offload.blob_key): its item lives under thread_id
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
            if not _condition_failed(exc):  # same key means same content: nothing to do
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
