"""moto's DynamoDB, patched: each request is atomic, as in DynamoDB.

11. moto serves requests from many threads at once (each execution runs in a thread of its own, and so
   does each request to the dev server) on plain dicts. A read racing a write could fail (RuntimeError:
   dictionary changed size), and a TransactWriteItems put back what it had copied when cancelled (a
   condition failed: the dispatcher's claim on a full running set), undoing every write other threads
   made meanwhile: a queue entry, a released slot, a claim, so a queued mission could wait forever.
   moto now serves them one at a time (re-entrant: a write's stream record may invoke a function that
   writes again, in the same thread).
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
22. moto's update validator takes that copy with `copy.deepcopy`, which walks every node's attributes
   through its memo: about a tenth of an UpdateItem's CPU. The tree is copied node by node (each node's
   children copied, its parent the new parent); anything in it that is not a node or a plain value
   is `copy.deepcopy`'s.
23. moto backs up each table a TransactWriteItems touches by copying the whole table (every item, and
   the index partitions of patch 18), so a transaction costs in proportion to the table's history. A
   transaction now keeps a copy of each item it names, as it was, and a cancelled one (or one refused
   part-way) puts those items back, each in its indexes' partitions too; the tables are not copied.
   As with moto's copies, a stream record a cancelled write emitted stays (DynamoDB emits none).
29. moto checks an update expression at every node of its tree, each check walking the subtree below:
   that it has at most one SET, one ADD and one REMOVE clause, and that no two of its actions name
   overlapping paths. Quadratic in the expression's actions (the mission record's writes set a dozen
   fields): about a tenth of the dev server's CPU. Each check runs once, at the root, whose walk finds
   every clause and path the checks below it would: what was refused still is.
30. moto's validators walk the tree ten times per update, and at every node each asks its processing map
   for the node kinds it handles, building the map and a tuple of its keys again. The kinds are a
   traverser class's own: each class's are taken once.
"""

from __future__ import annotations

import copy
import functools
import threading
import types
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
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _copy_tree(x: Any, memo: Any = None, _nil: Any = None) -> Any:
    """`copy.deepcopy` as moto's validator calls it, with a parsed expression's tree copied node by node."""
    from moto.dynamodb.parsing.ast_nodes import Node  # type: ignore[attr-defined]

    if isinstance(x, Node) and x.parent is None:  # a tree's root (a subtree would copy its parents too)
        return _copied_node(x, None, Node)
    return copy.deepcopy(x, memo)


def _copied_node(node: Any, parent: Any, node_type: type) -> Any:
    copied = object.__new__(type(node))
    for name, value in vars(node).items():
        if name == "children" and type(value) is list:
            value = [
                _copied_node(child, copied, node_type)
                if isinstance(child, node_type)
                else child
                if type(child) in _ATOMS
                else copy.deepcopy(child)
                for child in value
            ]
        elif name == "parent":
            value = parent
        elif type(value) not in _ATOMS:
            value = copy.deepcopy(value)
        copied.__dict__[name] = value
    return copied


UPDATE_TREE_COPIED_PLAINLY = Patch(
    "moto.dynamodb.parsing.validators",
    "deepcopy",
    _copy_tree,
    "22: moto's update validator deep-copies the parsed tree through deepcopy's memo; node by node",
)


def _tables_kept_as_they_are(standard: types.ModuleType) -> types.ModuleType:
    """What moto's DynamoDB models see as `copy`: the standard module, except that a table is not copied
    (the transaction's items are, by patch 23)."""
    from moto.dynamodb.models.table import Table

    def deepcopy(x: Any, memo: Any = None, _nil: Any = None) -> Any:
        return x if isinstance(x, Table) else standard.deepcopy(x, memo)

    module = types.ModuleType("copy", "copy, tables kept as they are (missions.local.moto patch 23)")
    module.__dict__.update({name: getattr(standard, name) for name in ("copy", "Error")})
    module.deepcopy = deepcopy  # type: ignore[attr-defined]
    return module


def _item_key(backend: Any, operation: dict[str, Any]) -> tuple[Any, Any, Any] | None:
    """The table and key (hash, range) an operation of a transaction names, or None (moto refuses it)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        _, op = next(iter(operation.items()))
        table = backend.tables[op["TableName"]]
        key = op["Item"] if "Item" in op else op["Key"]
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        return table, DynamoType(key[table.hash_key_attr]), range_key
    except (KeyError, StopIteration, TypeError, AttributeError):
        return None


def _put_back(table: Any, hash_key: Any, range_key: Any, item: Any) -> None:
    """The item under this key is `item` again (None: there was none), in its indexes' partitions too."""
    if table.range_key_attr:
        partition = table.items.get(hash_key)
        if item is not None:
            table.items[hash_key][range_key] = item
        elif partition is not None:
            partition.pop(range_key, None)
            if not partition:
                del table.items[hash_key]
    elif item is not None:
        table.items[hash_key] = item
    else:
        table.items.pop(hash_key, None)
    _replace(table, hash_key, range_key)


def _transact_by_item(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto's own transaction, the items it names kept (copies) and put back if it does not commit."""
    kept = []
    for operation in transact_items[:100]:  # more: moto refuses before it writes anything
        named = _item_key(self, operation)
        if named is not None:
            table, hash_key, range_key = named
            kept.append((table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))))
    try:
        TRANSACT_BY_ITEM.original(self, transact_items)
    except BaseException:
        for table, hash_key, range_key, item in reversed(kept):  # the first copy of a key is the oldest
            _put_back(table, hash_key, range_key, item)
        raise


TABLES_NOT_COPIED = Patch(
    "moto.dynamodb.models",
    "copy",
    _tables_kept_as_they_are,
    "23: moto copies each whole table a transaction touches, to put it back if cancelled",
    wraps=True,
)
TRANSACT_BY_ITEM = Patch(
    "moto.dynamodb.models:DynamoDBBackend",
    "transact_write_items",
    _transact_by_item,
    "23: a transaction keeps the items it names, not the tables, and puts them back if cancelled",
)


def _checked_at_the_root(self: Any, node: Any) -> Any:
    """moto's check of an update expression, on its whole tree once (the traverser's one processor)."""
    from moto.dynamodb.parsing.ast_nodes import UpdateExpression  # type: ignore[attr-defined]

    if isinstance(node, UpdateExpression):
        return self.process(node)
    return self.traverse_node_recursively(node)


CHECKED_ONCE = tuple(
    Patch(
        f"moto.dynamodb.parsing.validators:{validator}",
        "traverse",
        _checked_at_the_root,
        f"29: moto's {validator} checks an update expression at every node, walking the subtree each time",
    )
    for validator in ("ActionCountValidator", "OverlappingPathsValidator")
)
_NODE_KINDS: dict[type, tuple[type, ...]] = {}


def _node_kinds_once(self: Any) -> tuple[type, ...]:
    """The node kinds a traverser processes: its class's processing map's keys, taken once per class."""
    kinds = _NODE_KINDS.get(type(self))
    if kinds is None:
        kinds = _NODE_KINDS.setdefault(type(self), tuple(self._processing_map()))
    return kinds


NODE_KINDS_ONCE = Patch(
    "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser",
    "nodes_to_be_processed",
    _node_kinds_once,
    "30: moto's validators build their processing map again at every node of every walk",
)
PATCHES = (
    ONE_REQUEST_AT_A_TIME,
    QUERY_ONE_PARTITION,
    INDEXED_PUT,
    INDEXED_DELETE,
    INDEXED_UPDATE,
    ATTRIBUTE_VALUE_AS_IS,
    UPDATE_PARSED_ONCE,
    UPDATE_TREE_COPIED_PLAINLY,
    TABLES_NOT_COPIED,
    TRANSACT_BY_ITEM,
    *CHECKED_ONCE,
    NODE_KINDS_ONCE,
)
