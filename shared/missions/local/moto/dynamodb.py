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
   A key query now sees only the queried partition, as DynamoDB reads it.
18. moto answers an index (GSI or LSI) query the same way: a walk over every item of the table. Each
   table an index query reaches keeps, per index, its partitions (the index's hash-key values -> the
   items that have them), built at the first such query and kept up to date by every write that can
   change an item (a put, a delete, an update, in place, including a transaction's); an index query sees
   only the queried partition, the rest of the answer (order, pages, conditions, filters) is moto's own.
   The partitions live on the table object, so a cancelled transaction's copy of the table, put back,
   carries partitions that name its own items.
20. moto writes each response from the service's model, member by member: every attribute of every
   item returned goes through the ten members of an AttributeValue, each looked up under its aliases,
   about a quarter of an UpdateItem's CPU. An AttributeValue that is already what the wire carries
   (strings, numbers as strings, sets of them, booleans, NULL, maps and lists of such) is written as
   it is; anything else (a binary, which is base64-encoded) is moto's own.
21. moto parses an UpdateItem's expression twice per request (its handler, then its backend), and the
   runtime's writes use a few templated expressions over and over. Each expression is parsed once (the
   least recently used of `UPDATE_EXPRESSIONS` dropped): the tree is only read (the handler looks for
   placeholders; the backend's validator works on its own deep copy of it).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from missions.local.moto._mechanism import Patch

_PARTITIONS = "_missions_index_partitions"  # the table's attribute holding its indexes' partitions (18)

_DYNAMODB = threading.RLock()
UPDATE_EXPRESSIONS = 1024  # update expressions parsed once (patch 21)


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


def _moto_order(item: Any) -> Any:
    """moto's `Table.all_items` order, which its own query starts from (ties keep it)."""
    return (item.hash_key, item.range_key) if item.range_key else item.hash_key


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


class _IndexPartitions:
    """One index's partitions: its hash-key values -> {the table's key of an item: the item}."""

    def __init__(self, hash_attrs: tuple[str, ...], items: list[Any]) -> None:
        self.hash_attrs = hash_attrs
        self.partitions: dict[tuple[Any, ...], dict[tuple[Any, Any], Any]] = {}
        self._placed: dict[tuple[Any, Any], tuple[Any, ...]] = {}  # an item's key -> its partition's values
        for item in items:
            self.place((item.hash_key, item.range_key), item)

    def place(self, key: tuple[Any, Any], item: Any) -> None:
        """The item under `key` is now `item` (None: gone): it leaves its old partition for its new one."""
        old = self._placed.pop(key, None)
        if old is not None:
            partition = self.partitions[old]
            del partition[key]
            if not partition:
                del self.partitions[old]
        if item is None:
            return
        values = tuple(item.attrs.get(name) for name in self.hash_attrs)
        if all(value is not None for value in values):  # DynamoDB indexes only the items that have its key
            self.partitions.setdefault(values, {})[key] = item
            self._placed[key] = values

    def items(self, values: tuple[Any, ...]) -> list[Any]:
        return sorted(self.partitions.get(values, {}).values(), key=_moto_order)


def _index_partitions(table: Any, index: Any) -> _IndexPartitions:
    """The index's partitions, built at its first query (one walk), then kept by the writes' patches."""
    hash_attrs = tuple(key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH")
    kept: dict[tuple[str, tuple[str, ...]], _IndexPartitions] = table.__dict__.setdefault(_PARTITIONS, {})
    found = kept.get((index.name, hash_attrs))  # by schema too: an index made again may differ
    if found is None:
        found = kept[(index.name, hash_attrs)] = _IndexPartitions(hash_attrs, _every_item(table))
    return found


def _every_item(table: Any) -> list[Any]:
    if not table.range_key_attr:
        return list(table.items.values())
    return [item for partition in table.items.values() for item in partition.values()]


def _replace(table: Any, hash_key: Any, range_key: Any) -> None:
    """After a write to the item under this key: each kept index places what is there now."""
    kept = table.__dict__.get(_PARTITIONS)
    if not kept:
        return
    range_key = range_key if table.range_key_attr else None
    partition = table.items.get(hash_key)  # .get: moto's defaultdict must not grow
    item = partition if partition is None or not table.range_key_attr else partition.get(range_key)
    for partitions in kept.values():
        partitions.place((hash_key, range_key), item)


class _OneIndexPartition:
    """A table as an index query on one of the index's partitions sees it: that partition's items, in
    moto's own order. Everything else is the table's own."""

    def __init__(self, table: Any, items: list[Any]) -> None:
        self._table = table
        self._items = items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def all_items(self) -> list[Any]:
        return self._items


def _index_view(table: Any, index_name: str, hash_key_conditions: Any) -> Any:
    """The one partition an index query names, or the table itself (moto's own walk, and its own
    errors) when the query names no index the table has, or not exactly the index's hash key."""
    index = next((i for i in table.all_indexes() if i.name == index_name), None)
    if index is None:
        return table
    hash_attrs = [key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH"]
    conditions = dict(hash_key_conditions or [])
    if not hash_attrs or sorted(conditions) != sorted(hash_attrs):
        return table
    values = tuple(conditions[name] for name in hash_attrs)
    return _OneIndexPartition(table, _index_partitions(table, index).items(values))


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
    """moto's own query, over the queried partition only: of the table's key, or of an index's."""
    if index_name:
        table = _index_view(self, index_name, hash_key_conditions)
    else:
        table = self if hash_key is None else _OnePartition(self, hash_key)
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
    "17, 18: moto walks every item of a table for a key or index query; only the queried partition",
)


def _indexed_put(
    self: Any,
    item_attrs: dict[str, Any],
    expected: dict[str, Any] | None = None,
    condition_expression: str | None = None,
    expression_attribute_names: dict[str, str] | None = None,
    expression_attribute_values: dict[str, Any] | None = None,
    overwrite: bool = False,
    return_values_on_condition_check_failure: str | None = None,
) -> Any:
    """moto's own put; then the indexes' partitions place the new item (it replaced any old one)."""
    item = INDEXED_PUT.original(
        self,
        item_attrs,
        expected,
        condition_expression,
        expression_attribute_names,
        expression_attribute_values,
        overwrite,
        return_values_on_condition_check_failure,
    )
    _replace(self, item.hash_key, item.range_key)
    return item


INDEXED_PUT = Patch(
    "moto.dynamodb.models.table:Table",
    "put_item",
    _indexed_put,
    "18: an index query's partitions follow each put",
)


def _indexed_delete(self: Any, hash_key: Any, range_key: Any) -> Any:
    """moto's own delete; then the item leaves its indexes' partitions."""
    item = INDEXED_DELETE.original(self, hash_key, range_key)
    _replace(self, hash_key, range_key)
    return item


INDEXED_DELETE = Patch(
    "moto.dynamodb.models.table:Table",
    "delete_item",
    _indexed_delete,
    "18: an index query's partitions follow each delete",
)


def _indexed_update(
    self: Any,
    table_name: str,
    key: dict[str, dict[str, Any]],
    update_expression: str,
    expression_attribute_names: dict[str, Any],
    expression_attribute_values: dict[str, Any],
    attribute_updates: dict[str, Any] | None = None,
    expected: dict[str, Any] | None = None,
    condition_expression: str | None = None,
    return_values_on_condition_check_failure: str | None = None,
) -> Any:
    """moto's own update (it changes the item in place, a transaction's too); then, whatever it did
    before it returned or raised, the item's indexes' partitions place it again."""
    try:
        return INDEXED_UPDATE.original(
            self,
            table_name,
            key,
            update_expression,
            expression_attribute_names,
            expression_attribute_values,
            attribute_updates,
            expected,
            condition_expression,
            return_values_on_condition_check_failure,
        )
    finally:
        table = self.tables.get(table_name)
        if table is not None and table.hash_key_attr in key:
            from moto.dynamodb.models.dynamo_type import DynamoType

            range_value = key.get(table.range_key_attr) if table.range_key_attr else None
            _replace(
                table, DynamoType(key[table.hash_key_attr]), None if range_value is None else DynamoType(range_value)
            )


INDEXED_UPDATE = Patch(
    "moto.dynamodb.models:DynamoDBBackend",
    "update_item",
    _indexed_update,
    "18: an index query's partitions follow each update, made in place",
)
_STRINGS = frozenset({"S", "N"})
_STRING_SETS = frozenset({"SS", "NS"})
_BOOLEANS = frozenset({"NULL", "BOOL"})


def _as_on_the_wire(value: Any) -> Any:
    """The AttributeValue as JSON carries it (a copy), or None when it holds what moto must encode."""
    if type(value) is not dict:
        return None
    plain: dict[str, Any] = {}
    for member, inner in value.items():
        if inner is None:  # moto writes no member without a value
            continue
        if (member in _STRINGS and type(inner) is str) or (member in _BOOLEANS and type(inner) is bool):
            plain[member] = inner
        elif member in _STRING_SETS and type(inner) is list and all(type(i) is str for i in inner):
            plain[member] = list(inner)
        elif member == "M" and type(inner) is dict:
            entries = {name: _as_on_the_wire(entry) for name, entry in inner.items()}
            if any(entry is None for entry in entries.values()):
                return None
            plain[member] = entries
        elif member == "L" and type(inner) is list:
            elements = [_as_on_the_wire(element) for element in inner]
            if any(element is None for element in elements):
                return None
            plain[member] = elements
        else:
            return None
    return plain


def _attribute_value_as_is(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
    """An AttributeValue written as it is when it already is what the wire carries; else moto's own."""
    if key and shape.name == "AttributeValue":
        plain = _as_on_the_wire(value)
        if plain is not None:
            self._default_serialize(serialized, plain, shape, key)
            return
    ATTRIBUTE_VALUE_AS_IS.original(self, serialized, value, shape, key)


ATTRIBUTE_VALUE_AS_IS = Patch(
    "moto.core.serialize:BaseJSONSerializer",
    "_serialize_type_structure",
    _attribute_value_as_is,
    "20: moto writes every attribute of a response through the AttributeValue's ten members",
)


def _parsed_once(original: Callable[[str], Any]) -> classmethod[Any, [str], Any]:
    """moto's parse of an update expression, once per expression (the tree is shared: never changed)."""

    @functools.lru_cache(maxsize=UPDATE_EXPRESSIONS)
    def parsed(expression_str: str) -> Any:
        return original(expression_str)

    def make(cls: Any, expression_str: str) -> Any:
        return parsed(expression_str)

    return classmethod(make)


UPDATE_PARSED_ONCE = Patch(
    "moto.dynamodb.parsing.expressions:UpdateExpressionParser",
    "make",
    _parsed_once,
    "21: moto parses an update expression twice per request; once per expression",
    wraps=True,
)
PATCHES = (
    ONE_REQUEST_AT_A_TIME,
    QUERY_ONE_PARTITION,
    INDEXED_PUT,
    INDEXED_DELETE,
    INDEXED_UPDATE,
    ATTRIBUTE_VALUE_AS_IS,
    UPDATE_PARSED_ONCE,
)
