"""moto's DynamoDB, patched: each request is atomic, as in DynamoDB.

11. moto serves requests from many threads at once (each execution runs in a thread of its own, and so
   does each request to the dev server) on plain dicts. A read racing a write could fail (RuntimeError:
   dictionary changed size), and a TransactWriteItems copies each table it touches and, when cancelled
   (a condition failed: the dispatcher's claim on a full running set), puts the copies back, undoing
   every write other threads made meanwhile: a queue entry, a released slot, a claim, so a queued
   mission could wait forever. moto now serves them one at a time (re-entrant: a write's stream record
   may invoke a function that writes again, in the same thread).
17. moto answers a query on a table's key by walking and sorting every item of the table, so the
   emulation slowed with every mission it had ever run (each event appended queries the events table).
   A key query now sees only the queried partition, as DynamoDB reads it; index queries are moto's own.
"""

from __future__ import annotations

import threading
from typing import Any

from missions.local.moto._mechanism import Patch

_DYNAMODB = threading.RLock()


def _one_request_at_a_time(self: Any) -> Any:
    """moto's own DynamoDB request handling, holding the one lock every DynamoDB request takes."""
    with _DYNAMODB:
        return ONE_REQUEST_AT_A_TIME.original(self)


ONE_REQUEST_AT_A_TIME = Patch(
    "moto.dynamodb.responses:DynamoHandler",
    "call_action",
    _one_request_at_a_time,
    "11: moto serves DynamoDB requests from many threads at once on plain dicts; one at a time, as atomic",
)


class _OnePartition:
    """A table as a query on its key sees it: only the queried partition, in range-key order (what moto's
    `all_items` gives, filtered to that hash key). Everything else is the table's own."""

    def __init__(self, table: Any, hash_key: Any) -> None:
        self._table = table
        self._hash_key = hash_key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def all_items(self) -> list[Any]:
        partition = self._table.items.get(self._hash_key)  # .get: moto's defaultdict must not grow
        if partition is None:
            return []
        if not self._table.range_key_attr:
            return [partition]
        return sorted(partition.values(), key=lambda item: item.range_key)


def _query_one_partition(
    self: Any,
    hash_key: Any,
    range_comparison: Any,
    range_objs: Any,
    limit: Any,
    exclusive_start_key: Any,
    scan_index_forward: Any,
    projection_expressions: Any,
    index_name: Any = None,
    consistent_read: bool = False,
    filter_expression: Any = None,
    hash_key_conditions: Any = None,
    range_key_conditions: Any = None,
    **filter_kwargs: Any,
) -> Any:
    """moto's own query, over the queried partition only when the query is on the table's key."""
    table = self if index_name or hash_key is None else _OnePartition(self, hash_key)
    return QUERY_ONE_PARTITION.original(
        table,
        hash_key,
        range_comparison,
        range_objs,
        limit,
        exclusive_start_key,
        scan_index_forward,
        projection_expressions,
        index_name,
        consistent_read,
        filter_expression,
        hash_key_conditions=hash_key_conditions,
        range_key_conditions=range_key_conditions,
        **filter_kwargs,
    )


QUERY_ONE_PARTITION = Patch(
    "moto.dynamodb.models.table:Table",
    "query",
    _query_one_partition,
    "17: moto walks and sorts every item of a table for a key query; only the queried partition",
)
PATCHES = (ONE_REQUEST_AT_A_TIME, QUERY_ONE_PARTITION)
