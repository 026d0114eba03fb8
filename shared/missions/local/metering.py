"""Counts what a mission uses on the local emulation, so its AWS bill can be estimated.

    with LocalCloud(["code_analysis"]) as cloud, Meter(cloud) as meter:
        outcome = meter.run("code_analysis", goal)          # cloud.run, with the start billed
        cost = estimate(meter.usage_for(outcome.mission_id))

How each line is counted (priced by missions.core.cost.infrastructure):
- Lambda: every in-process invocation (`moto_patches.observe`), failed ones too: one request and its
  duration rounded up to 1 ms times the function's memory. Durations are this machine's, warm:
  a cold start's init (billed by AWS since August 2025) is not included.
- Step Functions Standard: one transition per state entered, from the mission's execution history.
- Step Functions Express (a mission's segments): one request per segment, and its duration (start to
  stop as this machine ran it, under moto: longer than AWS's) rounded up to 100 ms times one 64 MB
  chunk; the transitions inside are counted too, though Express does not bill them.
- DynamoDB, S3, EventBridge: botocore handlers on the cloud's clients (and on clients created
  while the meter runs) count each call made from inside a Lambda handler, or inside
  `billed()`: what the harness does on a mission's behalf (starting it, answering it), which
  AWS runs in the API Lambda. What the harness does to watch a mission (status polls, reading
  events and history) is not the mission's cost and is not counted; neither is the API
  Lambda request itself.
- DynamoDB units follow AWS's rules on the stored items, read from moto itself: a write costs
  the larger of the item before and after (conditional failures too). Each global secondary
  index (its projection as specs declares) costs what AWS charges it, on its entry (the
  table's and the index's keys plus the attributes it projects): a put when the item enters
  it, a delete when the item leaves it, a delete and a put when one of its keys changes, one
  write of the larger entry when an attribute it projects changes, and nothing when the write
  leaves its entry as it was (an update of attributes it does not project, a failed condition)
  or the item is in it neither before nor after. An index write is a plain write, even inside a
  transaction. GetItem and BatchGetItem cost the full item even when projected. Query and Scan
  cost the summed size of the items returned (an index's entries, on an index), which
  undercounts filtered or projected ones (AWS bills what it read). moto processes every item of
  a batch, so there are no unprocessed items to leave out.
- Write units are also kept per table and index (`write_units_by_table`), for the bench's split, with
  what the same writes would cost if nothing were rounded up to a whole KB (`write_floor_by_table`), and
  everything is also kept per source (`by_source`: the function whose handler made the call, or
  "harness" for `billed()` ones), so the bench can measure the cost model's per-stage figures
  (missions.core.cost.figures).

One mission at a time: the meter sums everything since it started (or `reset()`), and
`usage_for` refuses a mission if the meter saw another one start, but for its sub-missions (a stage
that delegates, missions.service.delegation): what they use is the mission's cost, counted with it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from missions.core.cost.infrastructure import (
    WRITE_UNIT_BYTES,
    Usage,
    billed_events,
    express_gb_seconds,
    item_size,
    lambda_gb_seconds,
    read_units,
    write_units,
)
from missions.core.specs import TABLES, Index
from missions.local import moto as moto_patches
from missions.local.emulation import ACCOUNT, REGION, LocalCloud, MissionOutcome

S3_PUTS = {"PutObject", "CopyObject", "ListObjects", "ListObjectsV2", "CreateMultipartUpload", "UploadPart"}
S3_GETS = {"GetObject", "HeadObject"}
_STATE = "missions_meter"  # where a call's pre-call snapshot waits in botocore's request context
_MANY_TABLES = "(several tables)"  # a BatchGetItem's or TransactGetItems' reads, by source


@dataclass
class SourceUsage:
    """What one source (a function, or the harness) used: its usage, its write and read units per table (the
    table's spec id; an index's writes count for its table), and its Lambda duration in ms."""

    usage: Usage = field(default_factory=Usage)
    writes: dict[str, int] = field(default_factory=dict)
    reads: dict[str, float] = field(default_factory=dict)
    lambda_ms: float = 0.0


@dataclass(frozen=True)
class Invocation:
    function_name: str
    duration_ms: float
    memory_mb: int


@dataclass
class _Write:
    """One item a write request touches, sized before the call and after it."""

    table: str
    key: dict[str, Any]
    item_bytes: int = 0  # the item a Put sends (a failed conditional Put stores nothing)
    transactional: bool = False
    before: dict[str, Any] | None = field(default=None, repr=False)


class Meter:
    """Records the billable usage of the missions a LocalCloud runs (one at a time)."""

    def __init__(self, cloud: LocalCloud):
        self.cloud = cloud
        self._lock = threading.Lock()
        self._billed: ContextVar[bool] = ContextVar(f"missions_meter_billed_{id(self)}", default=False)
        self._active = False
        self._stop_observing: Any = None
        self._emitters: list[Any] = []
        # physical table name -> (its spec's id, its keys, its indexes)
        self._tables = {
            getattr(cloud.settings, f"{spec.id}_table"): (spec.id, spec.keys, spec.indexes) for spec in TABLES
        }
        self.reset()

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def attach(cls, cloud: LocalCloud) -> Meter:
        """A started meter (stop it with `stop()`), for when a `with` block does not fit."""
        return cls(cloud).start()

    def start(self) -> Meter:
        import boto3

        clients = [self.cloud.dynamodb, self.cloud.s3, self.cloud.events_client, self.cloud.sfn]
        # clients copy their session's handlers when created: the session's reach later ones
        session = [boto3.DEFAULT_SESSION.events] if boto3.DEFAULT_SESSION is not None else []
        self._emitters = [client.meta.events for client in clients] + session
        for emitter in self._emitters:
            emitter.register("before-parameter-build", self._before, unique_id=f"{_STATE}-{id(self)}-before")
            emitter.register("after-call", self._after, unique_id=f"{_STATE}-{id(self)}-after")
        self._stop_observing = moto_patches.observe(self._on_invocation)
        self._active = True
        return self

    def stop(self) -> None:
        self._active = False
        if self._stop_observing is not None:
            self._stop_observing()
            self._stop_observing = None
        for emitter in self._emitters:
            emitter.unregister("before-parameter-build", unique_id=f"{_STATE}-{id(self)}-before")
            emitter.unregister("after-call", unique_id=f"{_STATE}-{id(self)}-after")
        self._emitters = []

    def __enter__(self) -> Meter:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget what was counted, to meter the next mission."""
        with self._lock:
            self._usage = Usage()
            self._table_writes: dict[str, dict[str, int]] = {}
            self._table_floor: dict[str, dict[str, float]] = {}
            self._sources: dict[str, SourceUsage] = {}
            self.invocations: list[Invocation] = []
            self._started: set[str] = set()

    # -- reading -----------------------------------------------------------------------------

    @contextmanager
    def billed(self) -> Iterator[None]:
        """Count the calls this thread makes in the block as the mission's."""
        token = self._billed.set(True)
        try:
            yield
        finally:
            self._billed.reset(token)

    def run(self, capability: str, goal: str, timeout: float = 120.0, **kwargs: Any) -> MissionOutcome:
        """`LocalCloud.run`, with the start billed (in AWS it runs in the API Lambda)."""
        with self.billed():
            mission_id = self.cloud.start(capability, goal, **kwargs)
        self.cloud.wait(mission_id, timeout)
        return self.cloud.outcome(mission_id)

    def usage(self) -> Usage:
        """Everything counted so far, but the state transitions (they come from a history)."""
        with self._lock:
            return self._usage

    def write_units_by_table(self) -> dict[str, dict[str, int]]:
        """The write units counted so far, per table (its spec's id) and within it per part: "table" for
        the table's own items, an index's name for that index's entries."""
        with self._lock:
            return {table: dict(parts) for table, parts in sorted(self._table_writes.items())}

    def write_floor_by_table(self) -> dict[str, dict[str, float]]:
        """Per table: the item writes it took ("items", an index's entries included) and the units they
        would cost unrounded ("units": each at least one, else its bytes over 1 KB; an index entry as
        written). Against `write_units_by_table`, what rounding up to whole KBs adds to these writes."""
        with self._lock:
            return {table: dict(floor) for table, floor in sorted(self._table_floor.items())}

    def by_source(self) -> dict[str, SourceUsage]:
        """What was counted so far per source: a function's name, or "harness" (the `billed()` calls).
        Lambda requests and durations count for the function invoked; state transitions are not here."""
        with self._lock:
            return {
                name: replace(found, writes=dict(found.writes), reads=dict(found.reads))
                for name, found in self._sources.items()
            }

    def usage_for(self, mission_id: str) -> Usage:
        """What the mission used, its sub-missions' share included (each one's machine and segments)."""
        missions = self._with_sub_missions(mission_id)
        others = self._started - missions
        if others:
            raise ValueError(f"the meter also saw {sorted(others)} start: meter one mission at a time")
        transitions = sum(
            1
            for mission in sorted(missions)
            for event in self.cloud.history(mission, segments=False)
            if event["type"].endswith("StateEntered")
        )
        segments = [segment for mission in sorted(missions) for segment in self.cloud.segments(mission)]
        express = Usage(
            express_requests=len(segments),
            express_gb_seconds=sum(
                express_gb_seconds((s["stopDate"] - s["startDate"]).total_seconds() * 1000)
                for s in segments
                if s.get("stopDate")
            ),
            express_transitions=sum(
                1
                for s in segments
                for event in self.cloud.execution_history(s["executionArn"])
                if event["type"].endswith("StateEntered")
            ),
        )
        return replace(self.usage() + express, state_transitions=transitions)

    def _with_sub_missions(self, mission_id: str) -> set[str]:
        """The mission and the started missions below it (a sub-mission's record names its parent)."""
        parents: dict[str, str | None] = {}
        for started in self._started - {mission_id}:
            parent = self.cloud.runtime.missions.get(started).parent
            parents[started] = parent.get("mission_id") if parent else None

        def below(mission: str, seen: frozenset[str] = frozenset()) -> bool:
            parent = parents.get(mission)
            if parent is None or mission in seen:
                return False
            return parent == mission_id or below(parent, seen | {mission})

        return {mission_id} | {started for started in parents if below(started)}

    # -- counting ----------------------------------------------------------------------------

    def _add(self, usage: Usage, source: str | None = None) -> None:
        with self._lock:
            self._usage = self._usage + usage
            found = self._source(source or moto_patches.invoking() or "harness")
            found.usage = found.usage + usage

    def _source(self, name: str) -> SourceUsage:
        """(under the lock)"""
        return self._sources.setdefault(name, SourceUsage())

    def _on_invocation(self, function_name: str, duration_ms: float, memory_mb: int) -> None:
        if not self._active:
            return
        with self._lock:
            self.invocations.append(Invocation(function_name, duration_ms, memory_mb))
        self._add(
            Usage(lambda_requests=1, lambda_gb_seconds=lambda_gb_seconds(duration_ms, memory_mb)), source=function_name
        )
        with self._lock:
            self._source(function_name).lambda_ms += duration_ms

    def _counts(self) -> bool:
        return self._active and (moto_patches.invoking() is not None or self._billed.get())

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        """Snapshot the request (and, for DynamoDB writes, the items as they were before it)."""
        starting = model.service_model.service_name == "stepfunctions" and model.name == "StartExecution"
        if not (self._counts() or (self._active and starting)):
            return
        writes = list(_writes(model.name, params)) if model.service_model.service_name == "dynamodb" else []
        for write in writes:
            write.before = self._stored(write.table, write.key)
        context[_STATE] = (dict(params), writes)

    def _after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if _STATE not in context:
            return
        params, writes = context.pop(_STATE)
        service, operation = model.service_model.service_name, model.name
        if service == "stepfunctions" and operation == "StartExecution":
            if params.get("stateMachineArn") in self.cloud.state_machines.values():  # a mission, not its segment
                with self._lock:
                    self._started.add(params.get("name", ""))
        elif service == "dynamodb":
            units = sum(self._write_units(write) for write in writes)
            reads = self._read_units(operation, params, parsed)
            self._add(Usage(dynamodb_write_units=units, dynamodb_read_units=reads))
            if reads:
                table = self._tables.get(params.get("TableName", ""), (_MANY_TABLES,))[0]
                with self._lock:
                    found = self._source(moto_patches.invoking() or "harness")
                    found.reads[table] = found.reads.get(table, 0.0) + reads
        elif service == "s3":
            self._add(Usage(s3_puts=int(operation in S3_PUTS), s3_gets=int(operation in S3_GETS)))
        elif service == "events" and operation == "PutEvents":
            self._add(Usage(events_published=sum(billed_events(_entry_bytes(e)) for e in params.get("Entries", []))))

    # -- DynamoDB ----------------------------------------------------------------------------

    def _stored(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        """The item as moto stores it now (typed, like a response's), or None."""
        from moto.dynamodb.exceptions import MockValidationException, ResourceNotFoundException
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        try:  # a bad request fails in moto as it would in AWS: the meter must not fail it first
            stored = dynamodb_backends[ACCOUNT][REGION].get_table(table)
            hash_key = DynamoType(key[stored.hash_key_attr])
            range_key = DynamoType(key[stored.range_key_attr]) if stored.range_key_attr else None
            item = stored.get_item(hash_key, range_key)
        except (KeyError, ResourceNotFoundException, MockValidationException):
            return None
        return {name: value.to_regular_json() for name, value in item.attrs.items()} if item else None

    def _write_units(self, write: _Write) -> int:
        after = self._stored(write.table, write.key)
        size = max(write.item_bytes, *(item_size(i) for i in (write.before, after) if i is not None), 0)
        name, table_keys, indexes = self._tables.get(write.table, (write.table, (), ()))
        parts = {"table": write_units(size, transactional=write.transactional)}
        for index in indexes:
            parts[index.name] = index_write_units(index, table_keys, write.before, after)
        unrounded = max(1.0, size / WRITE_UNIT_BYTES) * (2 if write.transactional else 1)
        entries = [units for part, units in parts.items() if part != "table" and units]
        with self._lock:
            counted = self._table_writes.setdefault(name, {})
            for part, units in parts.items():
                counted[part] = counted.get(part, 0) + units
            floor = self._table_floor.setdefault(name, {"items": 0, "units": 0.0})
            floor["items"] += 1 + len(entries)
            floor["units"] += unrounded + sum(entries)
            by_source = self._source(moto_patches.invoking() or "harness").writes
            by_source[name] = by_source.get(name, 0) + sum(parts.values())
        return sum(parts.values())

    def _read_units(self, operation: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
        consistent = bool(params.get("ConsistentRead"))
        if operation == "GetItem":
            return self._key_read(params["TableName"], params["Key"], consistent=consistent)
        if operation in ("Query", "Scan"):
            return read_units(sum(item_size(i) for i in parsed.get("Items", [])), consistent=consistent)
        if operation == "BatchGetItem":
            return sum(
                self._key_read(table, key, consistent=bool(request.get("ConsistentRead")))
                for table, request in params.get("RequestItems", {}).items()
                for key in request["Keys"]
            )
        if operation == "TransactGetItems":
            return sum(
                self._key_read(get["Get"]["TableName"], get["Get"]["Key"], transactional=True)
                for get in params.get("TransactItems", [])
            )
        return 0.0

    def _key_read(self, table: str, key: dict[str, Any], **kind: bool) -> float:
        """A read of one item by key costs its full stored size (a missing item: the minimum)."""
        stored = self._stored(table, key)
        return read_units(item_size(stored) if stored else 0, **kind)


def index_entry(index: Index, table_keys: tuple[str, ...], item: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the index holds of an item (typed, as stored): None when the item is not in it (a key missing)."""
    if item is None or any(key not in item for key in index.keys):
        return None
    return {name: value for name, value in item.items() if index.holds(table_keys, name)}


def index_write_units(
    index: Index, table_keys: tuple[str, ...], before: dict[str, Any] | None, after: dict[str, Any] | None
) -> int:
    """What a write of the item costs the index, by AWS's rules (plain writes of the index's own entries)."""
    old, new = index_entry(index, table_keys, before), index_entry(index, table_keys, after)
    if old is None:  # the item entered the index, or is in it neither before nor after
        return 0 if new is None else write_units(item_size(new))
    if new is None:  # it left the index
        return write_units(item_size(old))
    if old == new:  # nothing the index holds changed
        return 0
    if any(old[key] != new[key] for key in index.keys):  # moved within the index: a delete and a put
        return write_units(item_size(old)) + write_units(item_size(new))
    return write_units(max(item_size(old), item_size(new)))


def _writes(operation: str, params: dict[str, Any]) -> Iterator[_Write]:
    """The items a DynamoDB request writes, with the key that finds each."""
    if operation == "PutItem":
        yield _Write(params["TableName"], params["Item"], item_size(params["Item"]))
    elif operation in ("UpdateItem", "DeleteItem"):
        yield _Write(params["TableName"], params["Key"])
    elif operation == "BatchWriteItem":
        for table, requests in params.get("RequestItems", {}).items():
            for request in requests:
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    yield _Write(table, item, item_size(item))
                else:
                    yield _Write(table, request["DeleteRequest"]["Key"])
    elif operation == "TransactWriteItems":
        for entry in params.get("TransactItems", []):
            (body,) = entry.values()
            item = body.get("Item")
            yield _Write(body["TableName"], item or body["Key"], item_size(item) if item else 0, transactional=True)


def _entry_bytes(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge bills it: its text fields, plus 14 bytes for a Time."""
    text = [entry.get("Source", ""), entry.get("DetailType", ""), entry.get("Detail", ""), *entry.get("Resources", [])]
    return sum(len(t.encode()) for t in text) + (14 if entry.get("Time") else 0)
