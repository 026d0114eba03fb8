"""DynamoDB adapter of missions.ports.artifacts: the artifacts table (missions.core.specs.ARTIFACTS)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from missions.adapters.dynamodb._items import (
    DynamoTable,
    condition_failed,
    deserialize,
    expiry,
    query_partition,
    read_item,
    serialize,
)
from missions.core.errors import ConflictError, NotFound
from missions.core.mission.artifacts import Artifact, check_artifact


class DynamoArtifactStore(DynamoTable):
    """Artifacts table: mission_id / key = "<path>#<version:06d>", so a Query lists them in order."""

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
            expires = expiry(self.ttl_seconds)
            if expires is not None:
                item["expires_at"] = expires
            try:
                self._client.put_item(
                    TableName=self.table_name,
                    Item=serialize(item),
                    ConditionExpression="attribute_not_exists(#k)",
                    ExpressionAttributeNames={"#k": "key"},
                )
                return artifact
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
        raise ConflictError(f"artifact {path} of {mission_id}: too many concurrent writers")

    def get(self, mission_id: str, path: str, version: int | None = None) -> Artifact:
        if version is None:
            latest = self._latest(mission_id, path)
            if latest is None:
                raise NotFound(f"artifact {path} of {mission_id}")
            return latest
        item = read_item(
            self._client,
            self.table_name,
            {"mission_id": {"S": mission_id}, "key": {"S": self._key(path, version)}},
            f"artifact {path} v{version} of {mission_id}",
        )
        return self._decode(item)

    def list(self, mission_id: str) -> list[Artifact]:
        items = query_partition(self._client, self.table_name, "mission_id", mission_id, ConsistentRead=True)
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
        item = deserialize(raw)
        item.pop("expires_at", None)
        item.pop("key", None)
        item["content"] = json.loads(item["content"])
        return Artifact.model_validate(item)
