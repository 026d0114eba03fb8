"""DynamoDB adapters of missions.ports.missions: the missions table (missions.core.specs.MISSIONS)."""

from __future__ import annotations

import json
import zlib
from functools import cache
from typing import Any

from botocore.exceptions import ClientError
from pydantic import TypeAdapter

from missions.adapters.dynamodb._items import (
    DynamoTable,
    attribute_value,
    batch_get,
    compressed,
    condition_failed,
    create_item,
    deserialize,
    read_item,
    serialize,
)
from missions.core.errors import ConflictError, TransitionRefused
from missions.core.mission.envelope import utcnow
from missions.core.mission.status import MissionStatus
from missions.core.specs import MISSION_SUMMARY
from missions.ports.missions import MissionRecord, MissionSummary, cost_of


@cache
def _mission_field_adapter(name: str) -> TypeAdapter[Any]:
    annotation = MissionRecord.model_fields[name].annotation
    if annotation is None:  # pydantic fills it for every declared field
        raise TypeError(f"mission field {name!r} has no annotation")
    return TypeAdapter(annotation)


class DynamoMissionStore(DynamoTable):
    """Missions table: key mission_id; GSIs by_user (user_id, created_at) and by_capability (capability,
    created_at), which hold a mission's summary (specs.MISSION_SUMMARY), and by_status (status,
    completed_at), which holds its keys. Unset fields are absent, not NULL: an index key may not be NULL.

    Nothing an index holds changes while a mission runs (its stages' progress is in their checkpoints,
    missions.service.progress). What listings show of a stage and a cost is copied into `listed_stage` and
    `listed_cost_usd` by the writes that move a mission to a status other than running (and by any plain
    update of them); listings read a running mission's record itself, and its newest checkpoint. The
    `result` is stored compressed (zlib of its JSON): it is most of a finished mission's item, and every
    later write of the item (feedback, archiving) costs its size again."""

    INDEX = "by_user"
    STATUS_INDEX = "by_status"
    LISTED = ("listed_stage", "listed_cost_usd")

    def create(self, record: MissionRecord) -> None:
        item = record.model_dump(mode="json", exclude_none=True)
        for link in ("lineage", "children"):  # only a delegation writes them: others' items stay as small
            if not item.get(link):
                item.pop(link, None)
        if record.result is not None:
            item["result"] = compressed(record.result)
        item["listed_cost_usd"] = cost_of(record.counters)
        if record.stage is not None:
            item["listed_stage"] = record.stage
        create_item(self._client, self.table_name, serialize(item), "mission_id", f"mission {record.mission_id} exists")

    def get(self, mission_id: str) -> MissionRecord:
        item = read_item(self._client, self.table_name, {"mission_id": {"S": mission_id}}, f"mission {mission_id}")
        return mission_record(item)

    def update(self, mission_id: str, **fields: Any) -> None:
        if "status" in fields:
            raise ValueError("a mission's status changes only through missions.service.lifecycle (transition)")
        self._write(mission_id, fields, allowed_from=None)

    def transition(self, mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> MissionRecord:
        written = self._write(mission_id, {**fields, "status": status}, allowed_from=allowed_from)
        assert written is not None
        return written

    def drop_pending(self, mission_id: str, interrupt_id: str) -> MissionRecord:
        """DynamoDB removes a list element by position: the write names the position it read and is
        conditional on the id still being there (and the mission interrupted); a concurrent answer that
        moved it makes the condition fail, and the position is read again."""
        for _ in range(5):
            pending = self.get(mission_id).pending_interrupts or []
            if interrupt_id not in pending:
                raise ConflictError(f"question {interrupt_id} of mission {mission_id} is not pending")
            at = pending.index(interrupt_id)
            try:
                response = self._client.update_item(
                    TableName=self.table_name,
                    Key={"mission_id": {"S": mission_id}},
                    UpdateExpression=f"REMOVE #p[{at}] SET updated_at = :now",
                    ConditionExpression="#st = :interrupted AND #p[" + str(at) + "] = :id",
                    ExpressionAttributeNames={"#p": "pending_interrupts", "#st": "status"},
                    ExpressionAttributeValues={
                        ":interrupted": {"S": MissionStatus.INTERRUPTED.value},
                        ":id": {"S": interrupt_id},
                        ":now": {"S": utcnow()},
                    },
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                continue
            return mission_record(response["Attributes"])
        raise ConflictError(f"question {interrupt_id} of mission {mission_id} could not be marked answered: retry")

    def add_note(self, mission_id: str, note: dict[str, Any], allowed_from: frozenset[str], limit: int) -> None:
        """One conditional list_append: the status allows it and the list is shorter than `limit`."""
        froms = sorted(allowed_from)
        values: dict[str, Any] = {f":from{i}": {"S": value} for i, value in enumerate(froms)}
        values |= {":note": {"L": [attribute_value(note)]}, ":empty": {"L": []}, ":limit": {"N": str(limit)}}
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
            if not condition_failed(exc):
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
            if condition_failed(exc):
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
            f":v{i}": attribute_value(compressed(value) if name == "result" else value)
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
            if condition_failed(exc):
                current = self.get(mission_id)  # NotFound when missing; else the status refused it
                raise TransitionRefused(mission_id, current.status, str(fields.get("status"))) from None
            raise
        return mission_record(response["Attributes"]) if allowed_from is not None else None

    @staticmethod
    def _listed(values: dict[str, Any], sets: list[str], names: dict[str, str], attr_values: dict[str, Any]) -> None:
        """What listings show of the stage and the cost, kept by the writes that can change it for them: a
        move to any status but running (from this write's values, else from the stored ones), or a plain
        update of them. A write that keeps a mission running writes neither, so it writes no index."""
        if values.get("status") == MissionStatus.RUNNING:
            return
        moving = "status" in values
        if "stage" in values or moving:
            names["#ls"] = "listed_stage"
            if "stage" in values:
                sets.append("#ls = :ls")
                attr_values[":ls"] = attribute_value(values["stage"])  # NULL when it has none
            else:
                sets.append("#ls = if_not_exists(#stg, :nostage)")
                names["#stg"] = "stage"
                attr_values[":nostage"] = {"NULL": True}
        if "counters" in values or moving:
            names["#lc"] = "listed_cost_usd"
            if "counters" in values:
                sets.append("#lc = :lc")
                attr_values[":lc"] = attribute_value(cost_of(values["counters"]))
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
                ExpressionAttributeValues={
                    ":fb": attribute_value(feedback),
                    ":now": {"S": utcnow()},
                    ":null": {"NULL": True},
                },
            )
        except ClientError as exc:
            if not condition_failed(exc):
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
    item = deserialize(raw)
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
    item = deserialize({k: v for k, v in raw.items() if k in _SUMMARY_ENTRY})
    item["stage"] = item.pop("listed_stage", None)
    item["cost_usd"] = item.pop("listed_cost_usd", 0.0)
    return MissionSummary.model_validate(item)


_SUMMARY_ENTRY = frozenset({"mission_id", "created_at", *MISSION_SUMMARY})


class DynamoMissionsByCapability(DynamoTable):
    """A capability's recent missions, for metrics and the nightly evaluation: GSI "by_capability"
    (capability, created_at), every page followed. Its entries hold the missions' summaries
    (specs.MISSION_SUMMARY); running missions are read whole, in one batch, for where they are and what
    they cost so far (`mission_summaries`).

    GSI reads are eventually consistent: a mission created a moment ago may be missing, which
    metrics tolerate.
    """

    INDEX = "by_capability"

    def list(self, capability: str, since_iso: str) -> list[MissionSummary]:
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.INDEX,
            "KeyConditionExpression": "#c = :c AND #t >= :since",
            "ExpressionAttributeNames": {"#c": "capability", "#t": "created_at"},
            "ExpressionAttributeValues": {":c": {"S": capability}, ":since": {"S": since_iso}},
            "ScanIndexForward": True,
        }
        entries: list[dict[str, Any]] = []
        while True:
            page = self._client.query(**kwargs)
            entries += page.get("Items", [])
            if not page.get("LastEvaluatedKey"):
                return mission_summaries(self._client, self.table_name, entries)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
