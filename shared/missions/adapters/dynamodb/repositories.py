"""Repositories table (missions.core.specs.REPOSITORIES): key repository_id; GSI by_owner (owner, created_at).

A repository is small (a name, a URL, a few snapshot descriptions), so it is one item; changes
that depend on what is there (a status guard, appending a snapshot) are conditional writes.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

from missions.adapters.dynamodb._items import (
    attribute_value,
    condition_failed,
    create_item,
    deserialize,
    query_all,
    read_item,
    serialize,
)
from missions.core.errors import ConflictError, NotFound
from missions.core.mission.envelope import utcnow
from missions.ports.repositories import RepositoryRecord, RepositorySnapshot, RepositoryStatus


class DynamoRepositoryStore:
    INDEX = "by_owner"

    def __init__(self, table_name: str, client: Any = None):
        self.table_name = table_name
        self._client = client or boto3.client("dynamodb")

    def create(self, record: RepositoryRecord) -> None:
        create_item(
            self._client,
            self.table_name,
            serialize(record.model_dump(mode="json", exclude_none=True)),
            "repository_id",
            f"repository {record.repository_id} exists",
        )

    def get(self, repository_id: str) -> RepositoryRecord:
        item = read_item(
            self._client, self.table_name, {"repository_id": {"S": repository_id}}, f"repository {repository_id}"
        )
        return RepositoryRecord.model_validate(deserialize(item))

    def list_for_owner(self, owner: str, limit: int = 100) -> list[RepositoryRecord]:
        items = query_all(
            self._client,
            TableName=self.table_name,
            IndexName=self.INDEX,
            KeyConditionExpression="#o = :o",
            ExpressionAttributeNames={"#o": "owner"},
            ExpressionAttributeValues={":o": {"S": owner}},
            ScanIndexForward=False,
        )
        return [RepositoryRecord.model_validate(deserialize(item)) for item in items[:limit]]

    def update(self, repository_id: str, *, expect_status: str | None = None, **fields: Any) -> RepositoryRecord:
        unknown = set(fields) - set(RepositoryRecord.model_fields)
        if unknown or {"repository_id", "owner", "snapshots", "revision"} & set(fields):
            raise ValueError(f"these repository fields cannot be updated: {sorted(fields)}")
        current = self.get(repository_id)  # validates the result before anything is written
        merged = RepositoryRecord.model_validate({**current.model_dump(), **fields, "updated_at": utcnow()})
        values = merged.model_dump(mode="json")
        changed = [name for name in (*fields, "updated_at")]
        names = {f"#f{i}": name for i, name in enumerate(changed)}
        kept = [i for i, name in enumerate(changed) if values[name] is not None]
        removed = [i for i, name in enumerate(changed) if values[name] is None]
        expression = "SET " + ", ".join(f"#f{i} = :v{i}" for i in kept)
        if removed:
            expression += " REMOVE " + ", ".join(f"#f{i}" for i in removed)
        condition = "attribute_exists(repository_id)"
        attr_values = {f":v{i}": attribute_value(values[changed[i]]) for i in kept}
        if expect_status is not None:
            condition += " AND #status = :expected"
            names["#status"] = "status"
            attr_values[":expected"] = {"S": expect_status}
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key={"repository_id": {"S": repository_id}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=attr_values,
            )
        except ClientError as exc:
            if condition_failed(exc):
                latest = self.get(repository_id)  # NotFound if it was deleted meanwhile
                raise ConflictError(f"repository {repository_id} is {latest.status}, not {expect_status}") from None
            raise
        return merged

    def add_snapshot(self, repository_id: str, snapshot: RepositorySnapshot) -> RepositoryRecord:
        for _ in range(5):  # another import changed the list meanwhile: read again
            current = self.get(repository_id)
            snapshots = [s for s in current.snapshots if s.sha256 != snapshot.sha256] + [snapshot]
            now = utcnow()
            try:
                self._client.update_item(
                    TableName=self.table_name,
                    Key={"repository_id": {"S": repository_id}},
                    UpdateExpression=(
                        "SET snapshots = :s, #status = :ready, updated_at = :now, revision = :next REMOVE reason"
                    ),
                    ConditionExpression="attribute_exists(repository_id) AND "
                    "(revision = :seen OR (attribute_not_exists(revision) AND :seen = :zero))",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues={
                        ":s": attribute_value([s.model_dump(mode="json", exclude_none=True) for s in snapshots]),
                        ":ready": {"S": RepositoryStatus.READY},
                        ":now": {"S": now},
                        ":seen": {"N": str(current.revision)},
                        ":next": {"N": str(current.revision + 1)},
                        ":zero": {"N": "0"},
                    },
                )
            except ClientError as exc:
                if condition_failed(exc):
                    continue
                raise
            return current.model_copy(
                update={
                    "snapshots": snapshots,
                    "status": RepositoryStatus.READY,
                    "reason": None,
                    "updated_at": now,
                    "revision": current.revision + 1,
                }
            )
        raise ConflictError(f"repository {repository_id}: too many concurrent imports")

    def delete(self, repository_id: str) -> None:
        try:
            self._client.delete_item(
                TableName=self.table_name,
                Key={"repository_id": {"S": repository_id}},
                ConditionExpression="attribute_exists(repository_id)",
            )
        except ClientError as exc:
            if condition_failed(exc):
                raise NotFound(f"repository {repository_id}") from None
            raise
