"""Patch 11 (missions.local.moto.dynamodb), tested against moto itself: each request is atomic."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.integration.moto_patches.conftest import REGION, Aws


def test_a_cancelled_transaction_undoes_no_other_threads_write(aws: Aws) -> None:
    import sys
    import threading

    import boto3
    from botocore.exceptions import ClientError

    # Given a table, and a thread whose transactions are cancelled over and over (a condition fails)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    key = [{"AttributeName": "pk", "KeyType": "HASH"}]
    attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
    dynamodb.create_table(TableName="t", KeySchema=key, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST")
    for n in range(200):  # a table worth copying: moto copies it for each transaction
        dynamodb.put_item(TableName="t", Item={"pk": {"S": f"old-{n}"}})
    done, errors = threading.Event(), []
    refused = {"Put": {"TableName": "t", "Item": {"pk": {"S": "x"}}, "ConditionExpression": "attribute_exists(pk)"}}

    def cancelled_transactions() -> None:
        while not done.is_set():
            try:
                dynamodb.transact_write_items(TransactItems=[refused])
            except ClientError:
                pass  # cancelled, as it should be
            except Exception as exc:
                errors.append(exc)

    # When another thread writes and reads meanwhile, threads switching as often as they can
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    other = threading.Thread(target=cancelled_transactions)
    other.start()
    try:
        for n in range(200):
            dynamodb.put_item(TableName="t", Item={"pk": {"S": f"new-{n}"}})
            dynamodb.get_item(TableName="t", Key={"pk": {"S": f"old-{n}"}})
    finally:
        done.set()
        other.join()
        sys.setswitchinterval(interval)

    # Then every write it was told had happened is there, and no request failed
    kept = dynamodb.scan(TableName="t", Select="COUNT")["Count"]
    assert (kept, errors) == (400, [])


def _keyed_table(client: Any, name: str) -> None:
    """A table keyed by a string `pk` alone."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def test_dynamodb_transactions_and_writes_from_many_threads_do_not_collide(aws: Aws) -> None:
    # Given a table that transactions and plain writes hit at once, from several threads (patch 11)
    import boto3

    client = boto3.client("dynamodb", region_name=REGION)
    _keyed_table(client, "race")
    for batch in range(40):  # a table big enough that copying it takes a while
        items = [{"PutRequest": {"Item": {"pk": {"S": f"old-{batch}-{n}"}}}} for n in range(25)]
        client.batch_write_item(RequestItems={"race": items})
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for n in range(80):
                key = {"pk": {"S": f"{worker}-{n}"}}
                if n % 2:
                    client.put_item(TableName="race", Item=key)
                else:
                    client.transact_write_items(TransactItems=[{"Put": {"TableName": "race", "Item": key}}])
        except BaseException as exc:  # reported below
            failures.append(exc)

    # When four threads write 320 more, half of them in transactions (each copies the whole table)
    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then every write landed and none failed
    assert failures == []
    assert client.scan(TableName="race", Select="COUNT")["Count"] == 1320


def test_a_key_query_reads_only_its_partition_and_answers_as_moto_did(aws: Aws) -> None:
    """Patch 17: the same pages, in the same order, as moto's walk of the whole table gave; other
    partitions are not read."""
    import boto3
    from moto.dynamodb.models.table import Table

    from missions.local.moto.dynamodb import QUERY_ONE_PARTITION

    # Given a table of many partitions with range keys
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.create_table(
        TableName="events",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for p in range(20):
        for n in (5, 1, 9, 3, 7, 2):
            dynamodb.put_item(TableName="events", Item={"pk": {"S": f"m{p}"}, "sk": {"N": str(n)}, "v": {"N": str(p)}})
    queries = [
        {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "m7"}}},
        {
            "KeyConditionExpression": "pk = :p AND sk > :s",
            "ExpressionAttributeValues": {":p": {"S": "m3"}, ":s": {"N": "2"}},
            "ScanIndexForward": False,
            "Limit": 2,
        },
        {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "absent"}}},
    ]

    def pages(query: dict[str, Any]) -> list[Any]:
        found, start = [], None
        while True:
            page = dynamodb.query(TableName="events", **query, **({"ExclusiveStartKey": start} if start else {}))
            found.append((page["Items"], page.get("LastEvaluatedKey")))
            start = page.get("LastEvaluatedKey")
            if not start:
                return found

    # When each query is answered with the patch and by moto's own walk of the table
    patched = [pages(q) for q in queries]
    walks: list[int] = []
    real_all_items = Table.all_items
    Table.query = QUERY_ONE_PARTITION.original  # type: ignore[method-assign]
    Table.all_items = lambda self: walks.append(1) or real_all_items(self)  # type: ignore[method-assign]
    try:
        stock = [pages(q) for q in queries]
    finally:
        Table.query = QUERY_ONE_PARTITION.replacement  # type: ignore[method-assign]
        Table.all_items = real_all_items  # type: ignore[method-assign]
    # Then the answers are the same, page by page, and only moto's own query walked the whole table
    assert walks, "moto's own query no longer walks the table: patch 17 may be unneeded"
    assert patched == stock
    assert [len(page[0]) for page in patched[1]] == [2, 2, 0]  # 3, 5, 7, 9 after 2, two a page


def _pages(dynamodb: Any, table: str, query: dict[str, Any]) -> list[Any]:
    """Every page of a query, following LastEvaluatedKey, as (items, last key, count, scanned count)."""
    found, start = [], None
    while True:
        page = dynamodb.query(TableName=table, **query, **({"ExclusiveStartKey": start} if start else {}))
        start = page.get("LastEvaluatedKey")
        found.append((page["Items"], start, page["Count"], page["ScannedCount"]))
        if not start:
            return found


def _answers(dynamodb: Any, table: str, queries: list[dict[str, Any]], *, stock: bool) -> tuple[list[Any], int]:
    """Each query's pages, by the patched query or (stock) moto's own; and how often the whole table
    was walked (moto's `Table.all_items`) meanwhile."""
    from moto.dynamodb.models.table import Table

    from missions.local.moto.dynamodb import QUERY_ONE_PARTITION

    walks: list[int] = []
    real_all_items = Table.all_items
    Table.all_items = lambda self: walks.append(1) or real_all_items(self)  # type: ignore[method-assign]
    if stock:
        Table.query = QUERY_ONE_PARTITION.original  # type: ignore[method-assign]
    try:
        return [_pages(dynamodb, table, q) for q in queries], len(walks)
    finally:
        Table.query = QUERY_ONE_PARTITION.replacement  # type: ignore[method-assign]
        Table.all_items = real_all_items  # type: ignore[method-assign]


def test_an_index_query_reads_only_its_partition_and_answers_as_moto_did_through_every_kind_of_write(
    aws: Aws,
) -> None:
    """Patch 18: global and local secondary indexes, with and without a range key; key conditions,
    filters, projections, both directions, pages of a Limit; before and after puts, updates in place
    (one moving an item to another partition, one removing its index key), deletes, batch writes and
    transactions, a cancelled one among them: the same pages as moto's walk of the whole table."""
    import boto3
    from botocore.exceptions import ClientError

    # Given a table with three indexes, and items in many of their partitions (some in none)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    strings = ["pk", "user", "at", "state"]
    dynamodb.create_table(
        TableName="orders",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in strings]
        + [{"AttributeName": "sk", "AttributeType": "N"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_user",
                "KeySchema": [
                    {"AttributeName": "user", "KeyType": "HASH"},
                    {"AttributeName": "at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by_state",
                "KeySchema": [{"AttributeName": "state", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        LocalSecondaryIndexes=[
            {
                "IndexName": "by_at",
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for p in range(12):
        for n in (5, 1, 4, 3, 2):
            item = {"pk": {"S": f"m{p}"}, "sk": {"N": str(n)}, "at": {"S": f"2026-0{(p * n) % 9 + 1}"}}
            if (p + n) % 4:  # the others have no user: in no partition of by_user
                item["user"] = {"S": f"u{p % 3}"}
            item["state"] = {"S": "open" if n % 2 else "done"}
            dynamodb.put_item(TableName="orders", Item=item)
    user = "user = :u"
    queries = [
        {"IndexName": "by_user", "KeyConditionExpression": user, "ExpressionAttributeValues": {":u": {"S": "u1"}}},
        {
            "IndexName": "by_user",
            "KeyConditionExpression": f"{user} AND #at BETWEEN :a AND :b",
            "ExpressionAttributeNames": {"#at": "at"},
            "ExpressionAttributeValues": {":u": {"S": "u2"}, ":a": {"S": "2026-03"}, ":b": {"S": "2026-07"}},
            "ScanIndexForward": False,
            "Limit": 3,
        },
        {
            "IndexName": "by_user",
            "KeyConditionExpression": f"{user} AND begins_with(#at, :a)",
            "FilterExpression": "#state = :s",
            "ExpressionAttributeNames": {"#at": "at", "#state": "state"},
            "ExpressionAttributeValues": {":u": {"S": "u0"}, ":a": {"S": "2026-0"}, ":s": {"S": "open"}},
            "Limit": 4,
        },
        {
            "IndexName": "by_state",
            "KeyConditionExpression": "#state = :s",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {":s": {"S": "done"}},
            "Limit": 7,
        },
        {
            "IndexName": "by_at",
            "KeyConditionExpression": "pk = :p AND #at > :a",
            "ProjectionExpression": "sk, #at",
            "ExpressionAttributeNames": {"#at": "at"},
            "ExpressionAttributeValues": {":p": {"S": "m5"}, ":a": {"S": "2026-02"}},
            "ScanIndexForward": False,
        },
        {"IndexName": "by_user", "KeyConditionExpression": user, "ExpressionAttributeValues": {":u": {"S": "u9"}}},
    ]

    # When the queries are answered, patched and by moto, before and after every kind of write
    before, before_walks = _answers(dynamodb, "orders", queries, stock=False)
    before_stock, _ = _answers(dynamodb, "orders", queries, stock=True)
    key = {"pk": {"S": "m4"}, "sk": {"N": "1"}}
    dynamodb.update_item(  # moved to another user's partition, in place
        TableName="orders",
        Key=key,
        UpdateExpression="SET #u = :u",
        ExpressionAttributeNames={"#u": "user"},
        ExpressionAttributeValues={":u": {"S": "u2"}},
    )
    dynamodb.update_item(
        TableName="orders",
        Key={"pk": {"S": "m1"}, "sk": {"N": "2"}},
        UpdateExpression="REMOVE #u",
        ExpressionAttributeNames={"#u": "user"},
    )
    dynamodb.put_item(
        TableName="orders",
        Item={"pk": {"S": "m2"}, "sk": {"N": "5"}, "user": {"S": "u1"}, "at": {"S": "2026-05"}, "state": {"S": "done"}},
    )
    dynamodb.delete_item(TableName="orders", Key={"pk": {"S": "m7"}, "sk": {"N": "3"}})
    dynamodb.batch_write_item(
        RequestItems={
            "orders": [
                {
                    "PutRequest": {
                        "Item": {
                            "pk": {"S": "m20"},
                            "sk": {"N": "1"},
                            "user": {"S": "u2"},
                            "at": {"S": "2026-04"},
                            "state": {"S": "open"},
                        }
                    }
                },
                {"DeleteRequest": {"Key": {"pk": {"S": "m8"}, "sk": {"N": "4"}}}},
            ]
        }
    )
    moved = {
        "Update": {
            "TableName": "orders",
            "Key": {"pk": {"S": "m9"}, "sk": {"N": "2"}},
            "UpdateExpression": "SET #u = :u",
            "ExpressionAttributeNames": {"#u": "user"},
            "ExpressionAttributeValues": {":u": {"S": "u0"}},
        }
    }
    dynamodb.transact_write_items(TransactItems=[moved])
    undone = dict(moved["Update"], Key={"pk": {"S": "m10"}, "sk": {"N": "3"}})
    refused = {
        "ConditionCheck": {
            "TableName": "orders",
            "Key": {"pk": {"S": "absent"}, "sk": {"N": "1"}},
            "ConditionExpression": "attribute_exists(pk)",
        }
    }
    try:
        dynamodb.transact_write_items(TransactItems=[{"Update": undone}, refused])
    except ClientError as error:
        assert error.response["Error"]["Code"] == "TransactionCanceledException"
    after, after_walks = _answers(dynamodb, "orders", queries, stock=False)
    after_stock, stock_walks = _answers(dynamodb, "orders", queries, stock=True)

    # Then the answers are moto's own, page by page, and only moto's own query walked the whole table
    assert stock_walks, "moto's own query no longer walks the table: patch 18 may be unneeded"
    assert (before_walks, after_walks) == (0, 0)
    assert before == before_stock
    assert after == after_stock
    assert after != before  # the writes changed what the queries find
    assert [len(page[0]) for page in after[3]] == [7, 7, 7, 3]  # by_state "done": 24 items, 7 a page


def test_attribute_values_are_written_as_they_are_and_answer_as_moto_wrote_them(aws: Aws) -> None:
    """Patch 20: what the client reads of every kind of attribute is what moto's own serializer gave;
    only a binary still goes through the AttributeValue's members."""
    import boto3
    from moto.core.serialize import BaseJSONSerializer, ResponseSerializer

    from missions.local.moto.dynamodb import ATTRIBUTE_VALUE_AS_IS

    # Given items holding every kind of attribute, one of them binaries
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    key = [{"AttributeName": "pk", "KeyType": "HASH"}]
    dynamodb.create_table(
        TableName="kinds",
        KeySchema=key,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    plain = {
        "pk": {"S": "plain"},
        "empty": {"S": ""},
        "n": {"N": "-1.50"},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2.5"]},
        "null": {"NULL": True},
        "no": {"BOOL": False},
        "map": {"M": {"inner": {"L": [{"S": "x"}, {"M": {}}, {"L": []}, {"N": "3"}]}, "flag": {"BOOL": True}}},
    }
    binary = {
        "pk": {"S": "binary"},
        "b": {"B": b"\x00\xff"},
        "bs": {"BS": [b"1", b"2"]},
        "m": {"M": {"b": {"B": b"z"}}},
    }
    for item in (plain, binary):
        dynamodb.put_item(TableName="kinds", Item=item)
    update = {
        "TableName": "kinds",
        "Key": {"pk": {"S": "plain"}},
        "UpdateExpression": "SET n = :n",  # the same each time: both answers see the same item
        "ExpressionAttributeValues": {":n": {"N": "-1.50"}},
        "ReturnValues": "ALL_NEW",
    }

    def answers() -> list[Any]:
        return [
            dynamodb.get_item(TableName="kinds", Key={"pk": {"S": "plain"}})["Item"],
            dynamodb.get_item(TableName="kinds", Key={"pk": {"S": "binary"}})["Item"],
            sorted(dynamodb.scan(TableName="kinds")["Items"], key=lambda i: i["pk"]["S"]),
            dynamodb.update_item(**update)["Attributes"],
        ]

    by_members: list[str] = []  # the attributes (by name) written member by member, moto's way
    real_structure = ResponseSerializer._serialize_type_structure

    def counted(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if shape.name == "AttributeValue":
            by_members.append(key)
        real_structure(self, serialized, value, shape, key)

    # When the same reads and an update are answered with the patch, then by moto's own serializer
    ResponseSerializer._serialize_type_structure = counted  # type: ignore[method-assign]
    try:
        patched, patched_by_members = answers(), sorted(by_members)
        by_members.clear()
        BaseJSONSerializer._serialize_type_structure = ATTRIBUTE_VALUE_AS_IS.original  # type: ignore[method-assign]
        stock = answers()
    finally:
        BaseJSONSerializer._serialize_type_structure = ATTRIBUTE_VALUE_AS_IS.replacement  # type: ignore[method-assign]
        ResponseSerializer._serialize_type_structure = real_structure  # type: ignore[method-assign]

    # Then the client reads the same, and only the binaries went member by member
    assert patched == stock
    assert patched[0] == plain and patched[3] == plain
    assert patched[1]["b"] == {"B": b"\x00\xff"}
    assert len(by_members) > 30, "moto writes attribute values as they are now: patch 20 may be unneeded"
    assert patched_by_members == sorted(["b", "bs", "m", "b"] * 2)  # the binaries (and the map holding one), twice


def test_an_update_expression_is_parsed_once_and_each_update_applies_it_to_its_own_item(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patch 21: the parsed tree is shared, never changed: each update does what its expression says."""
    import boto3
    from botocore.exceptions import ClientError
    from moto.dynamodb.parsing import expressions

    # Given a table, and moto's tokenizer counted (each parse starts with it)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    _keyed_table(dynamodb, "counters")
    tokenized: list[str] = []
    real = expressions.ExpressionTokenizer.make_list

    def counted(expression: str) -> Any:
        tokenized.append(expression)
        return real(expression)

    expression = "SET #n = if_not_exists(#n, :zero) + :one, #tags = list_append(if_not_exists(#tags, :empty), :t)"
    with monkeypatch.context() as counting:
        counting.setattr(expressions.ExpressionTokenizer, "make_list", staticmethod(counted))
        # When three items are updated four times with one expression (and values of their own)
        for n in range(4):
            for pk in ("a", "b", "c"):
                dynamodb.update_item(
                    TableName="counters",
                    Key={"pk": {"S": pk}},
                    UpdateExpression=expression,
                    ExpressionAttributeNames={"#n": "n", "#tags": "tags"},
                    ExpressionAttributeValues={
                        ":zero": {"N": "0"},
                        ":one": {"N": "1"},
                        ":empty": {"L": []},
                        ":t": {"L": [{"S": f"{pk}{n}"}]},
                    },
                )
        # and a malformed expression is sent twice
        refusals = []
        for _ in range(2):
            try:
                dynamodb.update_item(TableName="counters", Key={"pk": {"S": "a"}}, UpdateExpression="SET = oops")
            except ClientError as error:
                refusals.append(error.response["Error"]["Code"])

    # Then each item holds its own four updates, the expression was parsed once, and both refusals came
    items = {i["pk"]["S"]: i for i in dynamodb.scan(TableName="counters")["Items"]}
    for pk in ("a", "b", "c"):
        assert items[pk]["n"] == {"N": "4"}
        assert items[pk]["tags"] == {"L": [{"S": f"{pk}{n}"} for n in range(4)]}
    assert tokenized.count(expression) == 1
    assert refusals == ["ValidationException"] * 2


def test_an_update_expression_is_checked_once_and_what_moto_refused_is_still_refused(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patches 29 and 30: the clause count and the overlapping paths are checked on the whole tree once
    (the node kinds each validator processes taken once), refusing what moto refused."""
    import boto3
    from botocore.exceptions import ClientError
    from moto.dynamodb.parsing.validators import ActionCountValidator

    # Given a table with an item (moto validates an update of a new item twice), and moto's clause check counted
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    _keyed_table(dynamodb, "records")
    dynamodb.put_item(TableName="records", Item={"pk": {"S": "a"}, "gone": {"S": "soon"}})
    checks: list[str] = []
    real = ActionCountValidator.verify_action_counts

    def counted(self: Any, node: Any) -> Any:
        checks.append(type(node).__name__)
        return real(self, node)

    monkeypatch.setattr(ActionCountValidator, "verify_action_counts", counted)
    names = [f"f{i}" for i in range(12)]
    sets = ", ".join(f"#{n} = :{n}" for n in names)

    # When one update sets twelve fields, adds to one and removes one; two updates name a clause twice, and
    # two name one path twice (the second time deep in a long expression)
    dynamodb.update_item(
        TableName="records",
        Key={"pk": {"S": "a"}},
        UpdateExpression=f"SET {sets} ADD #c :one REMOVE #gone",
        ExpressionAttributeNames={**{f"#{n}": n for n in names}, "#c": "c", "#gone": "gone"},
        ExpressionAttributeValues={**{f":{n}": {"S": n} for n in names}, ":one": {"N": "1"}},
    )
    once = len(checks)
    refusals = []
    overlapping = "SET " + ", ".join(f"#a{i} = :v" for i in range(8)) + ", #a = :v, #b = :v, #a = :v"
    for expression in ("SET #a = :v SET #b = :v", "REMOVE #a REMOVE #b", "SET #a = :v REMOVE #a", overlapping):
        try:
            dynamodb.update_item(
                TableName="records",
                Key={"pk": {"S": "a"}},
                UpdateExpression=expression,
                ExpressionAttributeNames={
                    n: n[1:] for n in ("#a", "#b", *(f"#a{i}" for i in range(8))) if n in expression
                },
                **({"ExpressionAttributeValues": {":v": {"S": "v"}}} if ":v" in expression else {}),
            )
        except ClientError as error:
            refusals.append(error.response["Error"]["Message"])

    # Then the first wrote all it said after one check, and the others were refused as moto refuses them
    item = dynamodb.get_item(TableName="records", Key={"pk": {"S": "a"}})["Item"]
    assert {n: item[n]["S"] for n in names} == {n: n for n in names} and item["c"] == {"N": "1"}
    assert "gone" not in item
    assert once == 1
    assert len(refusals) == 4
    assert "SET" in refusals[0] and "REMOVE" in refusals[1]
    assert all("Two document paths overlap" in refusal for refusal in refusals[2:]), refusals
