"""Users' schedules in DynamoDB (missions.ports.schedules.ScheduleStore).

Layout (missions.core.specs.SCHEDULES): partition = user id, sort key = schedule id ("s_<hex>"), the record
as JSON in `body` and a `version` each change increments (a read-modify-write is conditional on it). Each
user's partition also holds their count (sort key COUNT_KEY, attribute `n`): a create puts the schedule and
adds one to the count in one transaction, conditional on the count being under the limit, so two creates at
once cannot both take the last place; a delete removes the schedule and takes one off in one transaction.
Everything of a user is one partition: listed by a query, erased by deleting it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from missions.adapters.dynamodb._items import condition_failed, query_all, query_partition, write_batches
from missions.core.errors import ConflictError, NotFound, ScheduleLimitReached
from missions.core.mission.envelope import utcnow
from missions.core.triggers.schedules import Firing, ScheduleRecord, ScheduleState

COUNT_KEY = "#count"  # sorts before every "s_..." schedule id
_ATTEMPTS = 5  # optimistic read-modify-write retries before giving up with a ConflictError


class DynamoScheduleStore:
    def __init__(self, table_name: str, client: Any):
        self.table_name = table_name
        self._client = client

    # -- reads --------------------------------------------------------------------------------------

    def _read(self, user_id: str, schedule_id: str) -> tuple[ScheduleRecord, int]:
        found = self._client.get_item(
            TableName=self.table_name,
            Key=self._key(user_id, schedule_id),
            ConsistentRead=True,
        ).get("Item")
        if not found or schedule_id == COUNT_KEY:
            raise NotFound(f"no schedule {schedule_id}")
        return ScheduleRecord.model_validate_json(found["body"]["S"]), int(found["version"]["N"])

    def get(self, user_id: str, schedule_id: str) -> ScheduleRecord:
        return self._read(user_id, schedule_id)[0]

    def list(self, user_id: str) -> list[ScheduleRecord]:
        items = query_all(
            self._client,
            TableName=self.table_name,
            KeyConditionExpression="user_id = :u AND begins_with(schedule_id, :s)",
            ExpressionAttributeValues={":u": {"S": user_id}, ":s": {"S": "s_"}},
            ConsistentRead=True,
        )
        records = [ScheduleRecord.model_validate_json(item["body"]["S"]) for item in items]
        return sorted(records, key=lambda r: (r.created_at, r.schedule_id))

    # -- writes -------------------------------------------------------------------------------------

    def create(self, record: ScheduleRecord, limit: int) -> None:
        writes: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": self._key(record.user_id, COUNT_KEY),
                    "UpdateExpression": "ADD n :one",
                    "ConditionExpression": "attribute_not_exists(n) OR n < :limit",
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":limit": {"N": str(limit)}},
                }
            },
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": self._item(record, 1),
                    "ConditionExpression": "attribute_not_exists(schedule_id)",
                }
            },
        ]
        try:
            self._client.transact_write_items(TransactItems=writes)
        except ClientError as exc:
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if reasons[:1] == ["ConditionalCheckFailed"]:
                raise ScheduleLimitReached(
                    f"you have {limit} schedules, the most you may have; delete one to make room"
                ) from exc
            if len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
                raise ConflictError(f"schedule {record.schedule_id} exists") from exc
            raise

    def set_state(self, user_id: str, schedule_id: str, state: ScheduleState) -> ScheduleRecord:
        return self._change(
            user_id, schedule_id, lambda r: r.model_copy(update={"state": state, "updated_at": utcnow()})
        )

    def record_firing(self, user_id: str, schedule_id: str, firing: Firing) -> None:
        self._change(user_id, schedule_id, lambda r: r.model_copy(update={"firings": r.fired(firing)}))

    def _change(
        self, user_id: str, schedule_id: str, change: Callable[[ScheduleRecord], ScheduleRecord]
    ) -> ScheduleRecord:
        for _ in range(_ATTEMPTS):
            record, version = self._read(user_id, schedule_id)
            changed = change(record)
            try:
                self._client.put_item(
                    TableName=self.table_name,
                    Item=self._item(changed, version + 1),
                    ConditionExpression="version = :read",
                    ExpressionAttributeValues={":read": {"N": str(version)}},
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                continue  # changed (or deleted) meanwhile: read it again
            return changed
        raise ConflictError(f"schedule {schedule_id} kept changing; try again")

    def delete(self, user_id: str, schedule_id: str) -> bool:
        writes: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self.table_name,
                    "Key": self._key(user_id, schedule_id),
                    "ConditionExpression": "attribute_exists(schedule_id)",
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": self._key(user_id, COUNT_KEY),
                    "UpdateExpression": "ADD n :minus",
                    "ExpressionAttributeValues": {":minus": {"N": "-1"}},
                }
            },
        ]
        try:
            self._client.transact_write_items(TransactItems=writes)
        except ClientError as exc:
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if reasons[:1] == ["ConditionalCheckFailed"]:
                return False
            raise
        return True

    def delete_all(self, user_id: str) -> int:
        keys = query_partition(
            self._client,
            self.table_name,
            "user_id",
            user_id,
            ProjectionExpression="user_id, schedule_id",
            ConsistentRead=True,
        )
        write_batches(self._client, self.table_name, [{"DeleteRequest": {"Key": key}} for key in keys])
        return len(keys)

    @staticmethod
    def _key(user_id: str, schedule_id: str) -> dict[str, Any]:
        return {"user_id": {"S": user_id}, "schedule_id": {"S": schedule_id}}

    def _item(self, record: ScheduleRecord, version: int) -> dict[str, Any]:
        return {
            **self._key(record.user_id, record.schedule_id),
            "body": {"S": record.model_dump_json()},
            "version": {"N": str(version)},
        }


__all__ = ["COUNT_KEY", "DynamoScheduleStore"]
