"""The dispatcher's store on DynamoDB (table `missions.core.specs.DISPATCH`: partition "pk", sort "sk").

Items:
  pk "queue#<user>",   sk QueueEntry.sort_key  one queued mission; "entry" holds it as JSON, so a
                                               Query on the partition reads the queue in order
  pk "running#<user>", sk "running"            the user's running set: "running", a string set of
                                               mission ids (absent when empty)
  pk "pending#<n>",    sk "<user>#<sort key>"  a request noted before its record was written, until
                                               it is queued (the reconciler's journal)
  pk "claimed#<n>",    sk "<user>#<sort key>"  a claimed entry, until its start settled it
  pk "held#<reason>",  sk "<user>#<sort key>"  an entry held out of the queue (its user's daily budget is
                                               spent, or its key is busy): one partition per reason, so a
                                               release reads every user's held entries with one Query
  pk "key#<user>",     sk "<key>"              "holder": the mission of the key (a conversation, a
                                               concurrency key) that may run; changed only conditionally

Journal items carry "since" (nanoseconds) and the entry; their partitions are spread over
`JOURNAL_SHARDS` by mission id, so the reconciler reads a few partitions instead of scanning the
table, and no single partition takes every start's writes.

A claim is one TransactWriteItems (delete the entry if it exists + put its claim + add the id to
the set if it has room or already holds it), so a slot is never taken for an entry someone else
claimed, and a claimed entry is never lost before it started.
Under load DynamoDB cancels writes that race a transaction on the same item (TransactionConflict);
botocore does not retry those, so they are retried here with jittered backoff. The
transaction's ClientRequestToken is left to botocore: it generates one per call and reuses it on
its own retries, so a retried claim that had in fact committed is not taken for a lost one (a
token derived from the entry would let two drainers both "win" the same entry).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import boto3
from botocore.exceptions import ClientError

from missions.ports.dispatch import Claim, QueueEntry, Stranded

T = TypeVar("T")

_RUNNING_SK = "running"
_CONFLICT_ATTEMPTS = 10
JOURNAL_SHARDS = 8


def _code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def _reasons(exc: ClientError) -> list[str]:
    return [reason.get("Code", "") for reason in exc.response.get("CancellationReasons") or []]


def _room(mission_id: str, limit: int) -> tuple[str, dict[str, Any]]:
    """The running set's condition for adding `mission_id` (fewer than `limit` ids, or it holds it already),
    with the values of the ADD and of the condition."""
    values: dict[str, Any] = {":id": {"SS": [mission_id]}, ":idv": {"S": mission_id}}
    if limit < 1:  # no room at all: only a mission already holding a slot
        return "contains(#r, :idv)", values
    values[":limit"] = {"N": str(limit)}
    return "attribute_not_exists(#r) OR size(#r) < :limit OR contains(#r, :idv)", values


class _Conflict(Exception):
    """A write raced a transaction on the same item: nothing was written, try again."""


def _retrying(write: Callable[[], T]) -> T:
    for attempt in range(_CONFLICT_ATTEMPTS):
        try:
            return write()
        except _Conflict:
            time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
    raise RuntimeError(f"dispatch write still conflicting after {_CONFLICT_ATTEMPTS} attempts")


class DynamoDispatchStore:
    """`missions.service.dispatch.DispatchStore` on the DISPATCH table."""

    def __init__(self, table_name: str, client: Any = None, clock: Callable[[], int] = time.time_ns):
        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")
        self._clock = clock

    # ----------------------------------------------------------------------- queue

    def enqueue(self, entry: QueueEntry) -> None:
        item = {
            "pk": {"S": _queue_pk(entry.user_id)},
            "sk": {"S": entry.sort_key},
            "mission_id": {"S": entry.mission_id},
            "entry": {"S": entry.model_dump_json()},
        }

        def put() -> None:
            try:
                self._client.put_item(TableName=self.table_name, Item=item)
            except ClientError as exc:
                if _code(exc) == "TransactionConflictException":
                    raise _Conflict from None
                raise

        _retrying(put)

    def front(self, user_id: str, count: int) -> list[QueueEntry]:
        page = self._client.query(**self._queue_query(user_id), Limit=count)
        return [_entry(item) for item in page.get("Items", [])]

    def queued(self, user_id: str) -> list[QueueEntry]:
        return self._entries(self._queue_query(user_id))

    def _entries(self, query: dict[str, Any]) -> list[QueueEntry]:
        """Every entry a query finds, page after page."""
        entries: list[QueueEntry] = []
        while True:
            page = self._client.query(**query)
            entries += [_entry(item) for item in page.get("Items", [])]
            if not page.get("LastEvaluatedKey"):
                return entries
            query = {**query, "ExclusiveStartKey": page["LastEvaluatedKey"]}

    def remove(self, entry: QueueEntry) -> bool:
        return self._conditional(
            lambda: self._client.delete_item(
                TableName=self.table_name,
                Key=_held_key(entry) if entry.held is not None else _queue_key(entry),
                ConditionExpression="attribute_exists(pk)",
            )
        )

    # ----------------------------------------------------------------------- held out of the queue

    def hold(self, entry: QueueEntry) -> None:
        assert entry.held is not None, "a held entry names why it is held"
        item = {**_held_key(entry), "mission_id": {"S": entry.mission_id}, "entry": {"S": entry.model_dump_json()}}
        self._client.put_item(TableName=self.table_name, Item=item)

    def held(self, reason: str, user_id: str | None = None) -> list[QueueEntry]:
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk" + (" AND begins_with(sk, :user)" if user_id is not None else ""),
            "ExpressionAttributeValues": {
                ":pk": {"S": f"held#{reason}"},
                **({":user": {"S": f"{user_id}#"}} if user_id is not None else {}),
            },
            "ConsistentRead": True,
        }
        return self._entries(kwargs)

    def unhold(self, entry: QueueEntry) -> bool:
        queued = entry.model_copy(update={"held": None})

        def transact() -> bool:
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {
                            "Delete": {
                                "TableName": self.table_name,
                                "Key": _held_key(entry),
                                "ConditionExpression": "attribute_exists(pk)",
                            }
                        },
                        {
                            "Put": {
                                "TableName": self.table_name,
                                "Item": {
                                    **_queue_key(queued),
                                    "mission_id": {"S": queued.mission_id},
                                    "entry": {"S": queued.model_dump_json()},
                                },
                            }
                        },
                    ]
                )
                return True
            except ClientError as exc:
                if _code(exc) != "TransactionCanceledException":
                    raise
                reasons = _reasons(exc) + [""]
                if reasons[0] == "ConditionalCheckFailed":
                    return False
                if "TransactionConflict" in reasons:
                    raise _Conflict from None
                raise

        return _retrying(transact)

    # ----------------------------------------------------------------------- keys

    def key_holder(self, user_id: str, key: str) -> str | None:
        found = self._client.get_item(TableName=self.table_name, Key=_key_key(user_id, key), ConsistentRead=True)
        return found["Item"]["holder"]["S"] if "Item" in found else None

    def take_key(self, user_id: str, key: str, mission_id: str, expected: str | None) -> bool:
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        if expected is not None:
            condition = {
                "ConditionExpression": "holder = :expected",
                "ExpressionAttributeValues": {":expected": {"S": expected}},
            }
        item = {**_key_key(user_id, key), "holder": {"S": mission_id}}
        return self._conditional(lambda: self._client.put_item(TableName=self.table_name, Item=item, **condition))

    def drop_key(self, user_id: str, key: str, mission_id: str) -> bool:
        return self._conditional(
            lambda: self._client.delete_item(
                TableName=self.table_name,
                Key=_key_key(user_id, key),
                ConditionExpression="holder = :m",
                ExpressionAttributeValues={":m": {"S": mission_id}},
            )
        )

    def _conditional(self, write: Callable[[], Any]) -> bool:
        """A conditional write: True when it was made, False when its condition failed."""

        def attempt() -> bool:
            try:
                write()
                return True
            except ClientError as exc:
                if _code(exc) == "ConditionalCheckFailedException":
                    return False
                if _code(exc) == "TransactionConflictException":
                    raise _Conflict from None
                raise

        return _retrying(attempt)

    # ----------------------------------------------------------------------- running set

    def claim(self, entry: QueueEntry, limit: int) -> Claim:
        room, values = _room(entry.mission_id, limit)

        def transact() -> Claim:
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {
                            "Delete": {
                                "TableName": self.table_name,
                                "Key": _queue_key(entry),
                                "ConditionExpression": "attribute_exists(pk)",
                            }
                        },
                        {"Put": {"TableName": self.table_name, "Item": self._journal_item("claimed", entry)}},
                        {
                            "Update": {
                                "TableName": self.table_name,
                                "Key": _running_key(entry.user_id),
                                "UpdateExpression": "ADD #r :id",
                                "ConditionExpression": room,
                                "ExpressionAttributeNames": {"#r": "running"},
                                "ExpressionAttributeValues": values,
                            }
                        },
                    ]
                )
                return Claim.CLAIMED
            except ClientError as exc:
                if _code(exc) != "TransactionCanceledException":
                    raise
                reasons = _reasons(exc) + ["", "", ""]
                if reasons[0] == "ConditionalCheckFailed":
                    return Claim.GONE
                if reasons[2] == "ConditionalCheckFailed":
                    return Claim.FULL
                if "TransactionConflict" in reasons:
                    raise _Conflict from None
                raise

        return _retrying(transact)

    def take_slot(self, user_id: str, mission_id: str, limit: int) -> bool:
        room, values = _room(mission_id, limit)
        return self._conditional(
            lambda: self._client.update_item(
                TableName=self.table_name,
                Key=_running_key(user_id),
                UpdateExpression="ADD #r :id",
                ConditionExpression=room,
                ExpressionAttributeNames={"#r": "running"},
                ExpressionAttributeValues=values,
            )
        )

    def release(self, user_id: str, mission_id: str) -> None:
        def delete() -> None:
            try:
                self._client.update_item(
                    TableName=self.table_name,
                    Key=_running_key(user_id),
                    UpdateExpression="DELETE #r :id",
                    ExpressionAttributeNames={"#r": "running"},
                    ExpressionAttributeValues={":id": {"SS": [mission_id]}},
                )
            except ClientError as exc:
                if _code(exc) == "TransactionConflictException":
                    raise _Conflict from None
                raise

        _retrying(delete)

    def running(self, user_id: str) -> set[str]:
        response = self._client.get_item(TableName=self.table_name, Key=_running_key(user_id), ConsistentRead=True)
        return set(response.get("Item", {}).get("running", {}).get("SS", []))

    # ----------------------------------------------------------------------- journal

    def intend(self, entry: QueueEntry) -> None:
        self._client.put_item(TableName=self.table_name, Item=self._journal_item("pending", entry))

    def forget(self, entry: QueueEntry) -> None:
        self._client.delete_item(TableName=self.table_name, Key=_journal_key("pending", entry))

    def settle(self, entry: QueueEntry) -> None:
        self._client.delete_item(TableName=self.table_name, Key=_journal_key("claimed", entry))

    def placed(self, entry: QueueEntry) -> bool:
        held = [_held_key(entry)] if entry.held is not None else []
        for key in (*held, _queue_key(entry), _journal_key("claimed", entry)):
            found = self._client.get_item(
                TableName=self.table_name, Key=key, ConsistentRead=True, ProjectionExpression="pk"
            )
            if "Item" in found:
                return True
        return False

    def stranded(self, before: int) -> list[Stranded]:
        kept: list[Stranded] = []
        for kind in ("pending", "claimed"):
            for shard in range(JOURNAL_SHARDS):
                kwargs: dict[str, Any] = {
                    "TableName": self.table_name,
                    "KeyConditionExpression": "pk = :pk",
                    "FilterExpression": "since < :before",
                    "ExpressionAttributeValues": {":pk": {"S": f"{kind}#{shard}"}, ":before": {"N": str(before)}},
                    "ConsistentRead": True,
                }
                while True:
                    page = self._client.query(**kwargs)
                    kept += [
                        Stranded(kind=kind, entry=_entry(item), since=int(item["since"]["N"]))
                        for item in page.get("Items", [])
                    ]
                    if not page.get("LastEvaluatedKey"):
                        break
                    kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(kept, key=lambda item: item.since)

    def _journal_item(self, kind: _Journal, entry: QueueEntry) -> dict[str, Any]:
        return {
            **_journal_key(kind, entry),
            "mission_id": {"S": entry.mission_id},
            "since": {"N": str(self._clock())},
            "entry": {"S": entry.model_dump_json()},
        }

    # ----------------------------------------------------------------------- helpers

    def _queue_query(self, user_id: str) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": _queue_pk(user_id)}},
            "ConsistentRead": True,
        }


def _queue_pk(user_id: str) -> str:
    return f"queue#{user_id}"


def _queue_key(entry: QueueEntry) -> dict[str, Any]:
    return {"pk": {"S": _queue_pk(entry.user_id)}, "sk": {"S": entry.sort_key}}


def _key_key(user_id: str, key: str) -> dict[str, Any]:
    return {"pk": {"S": f"key#{user_id}"}, "sk": {"S": key}}


def _held_key(entry: QueueEntry) -> dict[str, Any]:
    return {"pk": {"S": f"held#{entry.held}"}, "sk": {"S": f"{entry.user_id}#{entry.sort_key}"}}


_Journal = Literal["pending", "claimed"]


def _journal_key(kind: _Journal, entry: QueueEntry) -> dict[str, Any]:
    shard = int(hashlib.sha256(entry.mission_id.encode()).hexdigest()[:8], 16) % JOURNAL_SHARDS
    return {"pk": {"S": f"{kind}#{shard}"}, "sk": {"S": f"{entry.user_id}#{entry.sort_key}"}}


def _running_key(user_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"running#{user_id}"}, "sk": {"S": _RUNNING_SK}}


def _entry(item: dict[str, Any]) -> QueueEntry:
    return QueueEntry.model_validate_json(item["entry"]["S"])
