"""A user's share of every table and bucket, for export and erasure (missions.ports.accounts).

Each store is found from the user's id or their mission ids by the layout its own adapter writes
(named here from that adapter, never restated): one query per partition, no scan.

  missions       by_user index -> mission ids; records read whole (erased last: it indexes the rest)
  events, interrupts, artifacts   partition = mission id
  checkpoints    threads <mission>, <mission>#tools (tool journal) and blob#<mission> (offloaded fields,
                 missions.core.mission.offload.blob_key), and s3://<blob bucket>/blobs/<mission>/
  dispatch       queue#<user>, running#<user>, the reconciler's journal shards and held#<reason> (sort key
                 "<user>#..."), key#<user> (the keys their missions hold)
  conversations  partition = user
  memory         memory_by_user index (every namespace of the user: preferences, learnings, summaries, ...)
  repositories   by_owner index; each one's snapshots and upload under the owner's prefixes in the
                 snapshot bucket, every version (the bucket is versioned)
  idempotency    partition user#<user> (missions.adapters.dynamodb.idempotency)
  usage          mission#<mission> (each model call), totals#<user> (the user's sums), spend#<user> (their
                 dollars per day) and budget#<user> (their own daily budget)
                 (missions.adapters.dynamodb.agents)

Not per user, so neither exported nor erased: per-capability learnings (counts and averages over every
user's feedback, no user id in them), webhook delivery ids (per source), everyone's usage totals
(totals#*: sums with no user in them), and agent configuration versions with their audit trail (the
operators' record of who changed a prompt; an operator's name there is kept as the service's record).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from missions.adapters.dynamodb import dispatch as dispatch_layout
from missions.adapters.dynamodb._items import batch_get, deserialize, query_all, write_batches
from missions.adapters.dynamodb.artifacts import DynamoArtifactStore
from missions.adapters.dynamodb.blobs import BLOB_PREFIX, blob_thread
from missions.adapters.dynamodb.events import DynamoEventStore
from missions.adapters.dynamodb.idempotency import user_partition
from missions.adapters.dynamodb.interrupts import DynamoInterruptStore
from missions.adapters.dynamodb.missions import mission_record
from missions.core.cost.budget import dollars
from missions.core.mission.refs import SNAPSHOT_PREFIX, UPLOAD_PREFIX, owner_segment
from missions.core.specs import CHECKPOINTS, DISPATCH, EVENTS, INTERRUPTS, MEMORY, REPOSITORIES, USAGE, TableSpec
from missions.ports.checkpoints import TOOL_JOURNAL_SUFFIX
from missions.ports.dispatch import HOLD_REASONS

Record = tuple[str, dict[str, Any]]


class _Table:
    """One table's items, read by partition or index and deleted by their keys."""

    def __init__(self, spec: TableSpec, name: str, client: Any):
        self.spec, self.name, self.client = spec, name, client

    def partition(self, value: str, *, sort_prefix: str | None = None, keys_only: bool = False) -> list[dict[str, Any]]:
        names = {"#p": self.spec.partition_key}
        values: dict[str, Any] = {":p": {"S": value}}
        condition = "#p = :p"
        if sort_prefix is not None and self.spec.sort_key:
            names["#s"] = self.spec.sort_key
            values[":s"] = {"S": sort_prefix}
            condition += " AND begins_with(#s, :s)"
        extra: dict[str, Any] = {}
        if keys_only:
            extra["ProjectionExpression"] = ", ".join(f"#k{i}" for i in range(len(self.spec.keys)))
            names.update({f"#k{i}": key for i, key in enumerate(self.spec.keys)})
        return query_all(
            self.client,
            TableName=self.name,
            KeyConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
            **extra,
        )

    def indexed(self, index: str, attribute: str, value: str) -> list[dict[str, Any]]:
        """The entries of an index for one value (what it projects: at least the table's keys)."""
        return query_all(
            self.client,
            TableName=self.name,
            IndexName=index,
            KeyConditionExpression="#a = :v",
            ExpressionAttributeNames={"#a": attribute},
            ExpressionAttributeValues={":v": {"S": value}},
        )

    def whole(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return batch_get(self.client, self.name, [self.key(e) for e in entries]) if entries else []

    def key(self, item: dict[str, Any]) -> dict[str, Any]:
        return {k: item[k] for k in self.spec.keys}

    def delete_partitions(self, values: Sequence[str]) -> int:
        """Delete every item of these partitions (missions' events, questions, artifacts), in shared batches."""
        return self.delete([key for value in values for key in self.partition(value, keys_only=True)])

    def delete(self, items: list[dict[str, Any]]) -> int:
        requests: list[Any] = [{"DeleteRequest": {"Key": self.key(item)}} for item in items]
        write_batches(self.client, self.name, requests)
        return len(requests)


class MissionRecords:
    """The missions table: a user's mission records (with their notes, feedback and result)."""

    name = "missions"
    INDEX = "by_user"

    def __init__(self, table_name: str, client: Any):
        from missions.core.specs import MISSIONS

        self._table = _Table(MISSIONS, table_name, client)

    def mission_ids(self, user_id: str) -> list[str]:
        return [e["mission_id"]["S"] for e in self._table.indexed(self.INDEX, "user_id", user_id)]

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        keys = [{"mission_id": {"S": m}} for m in mission_ids]
        for raw in self._table.whole(keys):
            record = mission_record(raw)
            if record.user_id == user_id:
                yield "mission", record.model_dump(mode="json", exclude={"pause_token"})

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        keys = [{"mission_id": {"S": m}} for m in mission_ids]
        mine = [raw for raw in self._table.whole(keys) if raw.get("user_id", {}).get("S") == user_id]
        return self._table.delete(mine)


class MissionEvents:
    name = "events"

    def __init__(self, table_name: str, client: Any):
        self._table = _Table(EVENTS, table_name, client)
        self._store = DynamoEventStore(table_name, client=client)

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for mission_id in mission_ids:
            after: str | None = None
            while True:
                events, cursor = self._store.read(mission_id, after=after, limit=500)
                for event in events:
                    yield "event", event.model_dump(mode="json")
                if not events or cursor == after:
                    break
                after = cursor

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        return self._table.delete_partitions(mission_ids)


class MissionInterrupts:
    """Questions asked and the answers given."""

    name = "interrupts"

    def __init__(self, table_name: str, client: Any):
        self._table = _Table(INTERRUPTS, table_name, client)

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for mission_id in mission_ids:
            for raw in self._table.partition(mission_id):
                record = DynamoInterruptStore._decode(raw)
                yield "interrupt", record.model_dump(mode="json", exclude={"task_token"})

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        return self._table.delete_partitions(mission_ids)


class MissionArtifacts:
    name = "artifacts"

    def __init__(self, table_name: str, client: Any):
        from missions.core.specs import ARTIFACTS

        self._table = _Table(ARTIFACTS, table_name, client)
        self._store = DynamoArtifactStore(table_name, client=client)

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for mission_id in mission_ids:
            for artifact in self._store.list(mission_id):
                yield "artifact", artifact.model_dump(mode="json")

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        return self._table.delete_partitions(mission_ids)


class MissionCheckpoints:
    """Checkpoints, tool journals and offloaded blobs (table and bucket). Not exported: they are the
    runtime's copies of a mission's state, whose outcome the export holds (record, events, artifacts)."""

    name = "checkpoints"

    def __init__(self, table_name: str, client: Any, bucket: str | None, s3_client: Any):
        self._table = _Table(CHECKPOINTS, table_name, client)
        self._bucket, self._s3 = bucket, s3_client

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        return iter(())

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        erased = 0
        if self._bucket:  # objects before the pointers to them: a rerun still finds what is left
            for mission_id in mission_ids:
                erased += delete_objects(self._s3, self._bucket, f"{BLOB_PREFIX}{mission_id}/", versions=False)
        threads = [thread for m in mission_ids for thread in (m, m + TOOL_JOURNAL_SUFFIX, blob_thread(m))]
        return erased + self._table.delete_partitions(threads)


class MissionUsage:
    """Every model call of the user's missions (mission#<id>), and the user's own totals (totals#<user>);
    `totals=False`: the missions' calls only (retention's pruning keeps what the user spent)."""

    name = "usage"

    def __init__(self, table_name: str, client: Any, *, totals: bool = True):
        self._table = _Table(USAGE, table_name, client)
        self._totals = totals

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for mission_id in mission_ids:
            for raw in self._table.partition(f"mission#{mission_id}"):
                yield "model_call", json.loads(raw["body"]["S"])
        for raw in self._table.partition(f"totals#{user_id}"):
            yield "usage_total", {k: v for k, v in deserialize(raw).items() if k not in ("pk",)}
        for raw in self._table.partition(f"spend#{user_id}"):
            yield "daily_spend", {"day": raw["sk"]["S"], "spent_usd": dollars(int(raw["cost_units"]["N"]))}
        for raw in self._table.partition(f"budget#{user_id}"):
            yield "daily_budget", {"daily_budget_usd": dollars(int(raw["usd_units"]["N"]))}

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        totals = [f"{kind}#{user_id}" for kind in ("totals", "spend", "budget")] if self._totals else []
        return self._table.delete_partitions([*(f"mission#{m}" for m in mission_ids), *totals])


class UserDispatch:
    """The user's queue, running set and the reconciler's journal entries of theirs."""

    name = "dispatch"

    def __init__(self, table_name: str, client: Any):
        self._table = _Table(DISPATCH, table_name, client)

    def _items(self, user_id: str) -> list[dict[str, Any]]:
        items = self._table.partition(dispatch_layout._queue_pk(user_id))
        items += self._table.partition(dispatch_layout._running_key(user_id)["pk"]["S"])
        for kind in ("pending", "claimed"):
            for shard in range(dispatch_layout.JOURNAL_SHARDS):
                items += self._table.partition(f"{kind}#{shard}", sort_prefix=f"{user_id}#")
        for reason in HOLD_REASONS:
            items += self._table.partition(f"held#{reason}", sort_prefix=f"{user_id}#")
        items += self._table.partition(f"key#{user_id}")
        return items

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for raw in self._items(user_id):
            item = deserialize(raw)
            if "entry" in item:
                yield "queued", json.loads(item["entry"])

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        return self._table.delete(self._items(user_id))


class UserConversations:
    name = "conversations"

    def __init__(self, table_name: str, client: Any):
        from missions.core.specs import CONVERSATIONS

        self._table = _Table(CONVERSATIONS, table_name, client)

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for raw in self._table.partition(user_id):
            yield "conversation", json.loads(raw["memory"]["S"])

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        return self._table.delete(self._table.partition(user_id, keys_only=True))


class UserMemory:
    """Long-term memory in every namespace: learned preferences, mission summaries, notices, your own."""

    name = "memory"
    INDEX = "memory_by_user"

    def __init__(self, table_name: str, client: Any):
        self._table = _Table(MEMORY, table_name, client)

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for raw in self._table.whole(self._table.indexed(self.INDEX, "user_id", user_id)):
            item = deserialize(raw)
            yield (
                "memory",
                {
                    "namespace": list(item.get("namespace") or []),
                    "key": item["key"],
                    "value": json.loads(item["value"]),
                    "created_at": item.get("created_at"),
                    "updated_at": item.get("updated_at"),
                },
            )

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        return self._table.delete(self._table.indexed(self.INDEX, "user_id", user_id))


class UserRepositories:
    """Repositories the user registered (metadata exported), their snapshots and uploads (erased, every
    version of them: the snapshot bucket is versioned)."""

    name = "repositories"
    INDEX = "by_owner"

    def __init__(self, table_name: str, client: Any, bucket: str | None, s3_client: Any):
        self._table = _Table(REPOSITORIES, table_name, client)
        self._bucket, self._s3 = bucket, s3_client

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for raw in self._table.indexed(self.INDEX, "owner", user_id):
            yield "repository", deserialize(raw)

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        erased = 0
        if self._bucket:  # the objects first: a record left by a failure still names what to erase
            for prefix in (SNAPSHOT_PREFIX, UPLOAD_PREFIX):
                erased += delete_objects(self._s3, self._bucket, f"{prefix}{owner_segment(user_id)}/", versions=True)
        return erased + self._table.delete(self._table.indexed(self.INDEX, "owner", user_id))


class UserIdempotencyRecords:
    """Idempotency-Key records: the responses kept for replay (24 hours)."""

    name = "idempotency"

    def __init__(self, table_name: str, client: Any):
        from missions.core.specs import IDEMPOTENCY

        self._table = _Table(IDEMPOTENCY, table_name, client)

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[Record]:
        for raw in self._table.partition(user_partition(user_id)):
            yield "idempotency_record", deserialize(raw)

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        return self._table.delete(self._table.partition(user_partition(user_id), keys_only=True))


def delete_objects(s3: Any, bucket: str, prefix: str, *, versions: bool) -> int:
    """Delete every object under the prefix (with `versions`, every version and delete marker of each:
    a versioned bucket keeps a deleted object's data otherwise); how many objects there were."""
    erased = 0
    if versions:
        pages = s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            found = [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
            erased += sum(1 for v in page.get("Versions", []) if v.get("IsLatest"))
            _delete(s3, bucket, [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in found])
        return erased
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        erased += len(found)
        _delete(s3, bucket, found)
    return erased


def _delete(s3: Any, bucket: str, objects: list[dict[str, str]]) -> None:
    for start in range(0, len(objects), 1000):
        response = s3.delete_objects(Bucket=bucket, Delete={"Objects": objects[start : start + 1000], "Quiet": True})
        if response.get("Errors"):
            first = response["Errors"][0]
            raise RuntimeError(f"S3 kept {len(response['Errors'])} object(s) under {bucket}: {first.get('Message')}")


__all__ = [
    "MissionArtifacts",
    "MissionCheckpoints",
    "MissionEvents",
    "MissionInterrupts",
    "MissionRecords",
    "UserConversations",
    "UserDispatch",
    "UserIdempotencyRecords",
    "UserMemory",
    "UserRepositories",
    "delete_objects",
]
