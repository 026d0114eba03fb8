"""Patch 11 (missions.local.moto.dynamodb), tested against moto itself: each request is atomic."""

from __future__ import annotations

import threading

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


def test_dynamodb_transactions_and_writes_from_many_threads_do_not_collide(aws: Aws) -> None:
    # Given a table that transactions and plain writes hit at once, from several threads (patch 11)
    import boto3

    client = boto3.client("dynamodb", region_name=REGION)
    client.create_table(
        TableName="race",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
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
