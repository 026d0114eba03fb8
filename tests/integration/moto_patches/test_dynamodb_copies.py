"""Patches 22 and 23 (missions.local.moto.dynamodb), tested against moto itself: what moto copied whole
(an update's parsed tree through deepcopy's memo, every table a transaction touches) is copied by the
piece, and every update and transaction answers and writes as moto's own did."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.integration.moto_patches.conftest import REGION, Aws


@contextmanager
def _deep_copies(cls: type) -> Iterator[list[str]]:
    """Every `copy.deepcopy` of an instance of `cls` meanwhile (a true deep copy, counted)."""
    copies: list[str] = []

    def counted(self: Any, memo: dict[int, Any]) -> Any:
        copies.append(type(self).__name__)
        made = object.__new__(type(self))
        memo[id(self)] = made
        made.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return made

    cls.__deepcopy__ = counted  # type: ignore[attr-defined]
    try:
        yield copies
    finally:
        del cls.__deepcopy__  # type: ignore[attr-defined]


def _table(dynamodb: Any, name: str, **extra: Any) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}]
        + [{"AttributeName": "state", "AttributeType": "S"}] * bool(extra),
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )


def _updates(dynamodb: Any) -> dict[str, Any]:
    """Three items updated three times by one expression (SET, arithmetic, list_append, ADD, REMOVE)."""
    expression = "SET #n = if_not_exists(#n, :zero) + :one, #tags = list_append(if_not_exists(#tags, :empty), :t) " + (
        "ADD #seen :s REMOVE #gone"
    )
    for n in range(3):
        for pk in ("a", "b", "c"):
            dynamodb.update_item(
                TableName="counters",
                Key={"pk": {"S": pk}},
                UpdateExpression=expression,
                ExpressionAttributeNames={"#n": "n", "#tags": "tags", "#seen": "seen", "#gone": "gone"},
                ExpressionAttributeValues={
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                    ":empty": {"L": []},
                    ":t": {"L": [{"S": f"{pk}{n}"}]},
                    ":s": {"SS": [f"{pk}{n}"]},
                },
            )
    return {i["pk"]["S"]: i for i in dynamodb.scan(TableName="counters")["Items"]}


def test_an_update_copies_its_parsed_tree_node_by_node_and_writes_what_moto_wrote(aws: Aws) -> None:
    """Patch 22."""
    import boto3
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import Node

    # Given a table
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    _table(dynamodb, "counters")

    # When items are updated by the patched validator, then by moto's own (copy.deepcopy), each counted
    with _deep_copies(Node) as patched_copies:
        patched = _updates(dynamodb)
    dynamodb.delete_table(TableName="counters")
    _table(dynamodb, "counters")
    with pytest.MonkeyPatch.context() as stock_moto, _deep_copies(Node) as stock_copies:
        # undone here, before the patches are put back as the test found them (not after, over them)
        stock_moto.setattr(validators, "deepcopy", copy.deepcopy)
        stock = _updates(dynamodb)

    # Then both wrote the same items, each its own updates, and only moto's own deep-copied the tree
    assert patched == stock
    assert patched["b"]["n"] == {"N": "3"} and patched["b"]["tags"] == {"L": [{"S": f"b{n}"} for n in range(3)]}
    assert stock_copies, "moto's validator no longer deep-copies the tree: patch 22 may be unneeded"
    assert patched_copies == []


def _transactions(dynamodb: Any) -> list[Any]:
    """A committed transaction, then three that do not commit: each answer, and the table after each."""
    from botocore.exceptions import ClientError

    refused_check = {
        "ConditionCheck": {
            "TableName": "orders",
            "Key": {"pk": {"S": "o7"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }
    put_new = {"Put": {"TableName": "orders", "Item": {"pk": {"S": "new"}, "state": {"S": "open"}}}}
    move = {
        "Update": {
            "TableName": "orders",
            "Key": {"pk": {"S": "o3"}},
            "UpdateExpression": "SET #s = :s REMOVE note",
            "ExpressionAttributeNames": {"#s": "state"},
            "ExpressionAttributeValues": {":s": {"S": "shipped"}},
        }
    }
    delete = {"Delete": {"TableName": "orders", "Key": {"pk": {"S": "o5"}}}}
    answers: list[Any] = []
    for items in (
        [move, {"Delete": {"TableName": "orders", "Key": {"pk": {"S": "o9"}}}}],  # commits
        [put_new, move, delete, refused_check],  # cancelled by its last condition
        [put_new, move, {"Update": {**move["Update"], "Key": {"pk": {"S": "o3"}}}}],  # o3 twice: refused
        [{"Update": {**move["Update"], "UpdateExpression": "SET #s = :s + :s"}}, put_new],  # invalid update
    ):
        try:
            dynamodb.transact_write_items(TransactItems=items)
            answers.append("committed")
        except ClientError as error:
            answers.append((error.response["Error"]["Code"], error.response.get("CancellationReasons")))
        scanned = sorted(dynamodb.scan(TableName="orders")["Items"], key=lambda i: i["pk"]["S"])
        by_state = [
            sorted(i["pk"]["S"] for i in dynamodb.query(**_by_state(state))["Items"]) for state in ("open", "shipped")
        ]
        answers.append((scanned, by_state))
    return answers


def _by_state(state: str) -> dict[str, Any]:
    return {
        "TableName": "orders",
        "IndexName": "by_state",
        "KeyConditionExpression": "#s = :s",
        "ExpressionAttributeNames": {"#s": "state"},
        "ExpressionAttributeValues": {":s": {"S": state}},
    }


def _orders(dynamodb: Any) -> None:
    _table(
        dynamodb,
        "orders",
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_state",
                "KeySchema": [{"AttributeName": "state", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    for n in range(200):  # a table worth copying
        item = {"pk": {"S": f"o{n}"}, "state": {"S": "open"}, "note": {"S": f"order {n}"}}
        dynamodb.put_item(TableName="orders", Item=item)
    dynamodb.query(**_by_state("open"))  # the index's partitions are kept from here on (patch 18)


def test_a_transaction_keeps_its_items_not_its_tables_and_answers_and_writes_as_moto_did(aws: Aws) -> None:
    """Patch 23: committed, cancelled by a condition, refused for naming an item twice, refused for an
    invalid update: the same answers, items and index answers as moto's own, which copies the table."""
    import boto3
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    from missions.local.moto.dynamodb import TRANSACT_BY_ITEM

    # Given a table of 200 items with an index, by the patched transaction and by moto's own
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    _orders(dynamodb)

    # When the same four transactions run on each, tables' copies counted
    with _deep_copies(Table) as patched_copies:
        patched = _transactions(dynamodb)
    dynamodb.delete_table(TableName="orders")
    _orders(dynamodb)
    with pytest.MonkeyPatch.context() as stock_moto, _deep_copies(Table) as stock_copies:
        stock_moto.setattr(models, "copy", copy)
        stock_moto.setattr(models.DynamoDBBackend, "transact_write_items", TRANSACT_BY_ITEM.original)
        stock = _transactions(dynamodb)

    # Then each answered and left the items and the index as moto's own did, and no table was copied
    assert patched == stock
    assert patched[0] == "committed" and patched[2][0] == "TransactionCanceledException"
    assert [answer[0] for answer in patched[4::2]] == ["ValidationException", "ValidationException"]
    scanned, by_state = patched[-1]
    assert len(scanned) == 199 and "new" not in by_state[0] and by_state[1] == ["o3"]
    assert stock_copies, "moto no longer copies a transaction's tables: patch 23 may be unneeded"
    assert patched_copies == []
