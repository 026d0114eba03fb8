"""DynamoDB adapter of missions.ports.events: the events table (missions.core.specs.EVENTS)."""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from missions.adapters.dynamodb._items import DynamoTable, condition_failed, deserialize, expiry, query_all
from missions.core.errors import ConflictError
from missions.core.mission.events import Event
from missions.ports.events import event_position, parse_position

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef


class DynamoEventStore(DynamoTable):
    """Events table: mission_id / position. A batch (a stage's events, an answer's, a cancel's) is one
    item, its events compressed together (zlib of their JSON), at position "e<batch:012d>"; a batch too
    big for one item (PART_BYTES compressed) goes on in parts "e<batch:012d>+<first event's index:06d>",
    which sort after it and before the next batch. An event's cursor is its batch and its index in it
    (`event_position`), whatever part holds it.

    The batch sequence needs no counter: an append puts its batch at the number after the mission's last
    item only if that is still free (a conditional put); a writer that lost the race reads the last item
    again (one consistent query). The store remembers the last batch it wrote or read of each of its
    recent missions (a warm function appends a mission's next stage), so a stage's events usually cost
    the write of one small item and no read: a number that went stale only loses the put, then reads.
    When the last item belongs to the same batch id, the batch is rewritten in place (a retry): its parts
    are put again and parts the retry no longer needs are deleted.

    Items written before batches held several events (one event an item, "e<sequence:012d>", and a
    counter item "c") are read as batches of one event, and appends go on after them."""

    PART_BYTES = 350 * 1024  # a compressed part, leaving room in a 400 KB item for its keys and attributes
    FIRST = "e"  # every position of an event item starts with it (the old counter item, "c", sorts before)
    ATTEMPTS = 20  # conditional puts lost to concurrent writers before giving up
    PAGE_ITEMS = 10  # items a read queries at a time: enough for a page of events, few read needlessly
    REMEMBERED = 1024  # missions whose last batch the store keeps in mind

    def __init__(self, table_name: str, client: Any = None, ttl_seconds: int | None = None):
        super().__init__(table_name, client, ttl_seconds)
        self._last_known: OrderedDict[str, tuple[int, str | None]] = OrderedDict()
        self._lock = threading.Lock()

    # -- writing -----------------------------------------------------------------------------------

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        if not events:
            return
        parts = self.pack(events, self.PART_BYTES)
        last = self._remembered(mission_id)
        for _ in range(self.ATTEMPTS):
            if last is None:
                last = self._last(mission_id)
            if last is not None and last[1] == batch_id:  # a retry of the last batch: in place
                self._rewrite(mission_id, last[0], batch_id, parts)
                return
            sequence = last[0] + 1 if last is not None else 1
            first, *rest = parts
            if not self._put(mission_id, sequence, batch_id, first, "attribute_not_exists(#p)"):
                last = None  # another writer took that place (or what was remembered went stale): read
                continue
            for part in rest:  # under this batch's number: no other writer puts there
                self._put(mission_id, sequence, batch_id, part, None)
            self._remember(mission_id, (sequence, batch_id))
            return
        raise ConflictError(f"events of {mission_id}: too many concurrent writers")

    def _remembered(self, mission_id: str) -> tuple[int, str | None] | None:
        with self._lock:
            return self._last_known.get(mission_id)

    def _remember(self, mission_id: str, last: tuple[int, str | None]) -> None:
        with self._lock:
            self._last_known[mission_id] = last
            self._last_known.move_to_end(mission_id)
            while len(self._last_known) > self.REMEMBERED:
                self._last_known.popitem(last=False)

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
        expires = expiry(self.ttl_seconds)
        if expires is not None:
            item["expires_at"] = {"N": str(expires)}
        kwargs: dict[str, Any] = {"TableName": self.table_name, "Item": item}
        if condition is not None:
            kwargs |= {"ConditionExpression": condition, "ExpressionAttributeNames": {"#p": "position"}}
        try:
            self._client.put_item(**kwargs)
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def _rewrite(self, mission_id: str, sequence: int, batch_id: str, parts: list[tuple[int, bytes]]) -> None:
        """The batch again, in its place: its parts put anew, and any part of the try before that this one
        no longer has deleted."""
        before = {
            item["position"]["S"]
            for item in query_all(
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
            item = deserialize(raw)
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
