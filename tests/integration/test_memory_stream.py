"""The memory table's stream, read back in moto, decodes into the MemoryChanges triggers act on."""

from __future__ import annotations

import base64
from typing import Any

import boto3
import pytest
from moto import mock_aws

from missions.adapters.dynamodb.longterm import DynamoLongTermMemory, change_from_stream_record
from missions.adapters.dynamodb.tables import table_definition
from missions.core.specs import MEMORY

REGION = "us-east-1"
TABLE = "test-memory"
NS = ("user_preferences", "alice")


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")  # the streams client needs it in moto
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(**table_definition(MEMORY, TABLE))
        yield ddb, boto3.client("dynamodbstreams", region_name=REGION)


def stream_records(ddb: Any, streams: Any) -> list[dict[str, Any]]:
    arn = ddb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            records.extend(page["Records"])
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return records


def as_lambda_receives(record: dict[str, Any]) -> dict[str, Any]:
    """Lambda's event JSON carries binary attributes base64-encoded, where boto3 gives bytes."""

    def encode(node: Any) -> Any:
        if isinstance(node, bytes):
            return base64.b64encode(node).decode()
        if isinstance(node, dict):
            return {k: encode(v) for k, v in node.items()}
        if isinstance(node, list):
            return [encode(v) for v in node]
        if hasattr(node, "isoformat"):
            return node.timestamp()
        return node

    return encode(record)


def test_put_update_delete_stream_as_added_updated_deleted(aws):
    # Given a memory on the stream-enabled table
    ddb, streams = aws
    memory = DynamoLongTermMemory(TABLE, client=ddb)
    # When an item is added, replaced, and deleted
    memory.put("alice", NS, "tone", {"style": "short answers"})
    memory.put("alice", NS, "tone", {"style": "detailed answers"})
    assert memory.delete("alice", NS, "tone") is True
    # Then the stream holds one record per change
    records = stream_records(ddb, streams)
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    # And each decodes into the matching MemoryChange, old and new values included
    for source in (records, [as_lambda_receives(r) for r in records]):
        added, updated, deleted = (change_from_stream_record(r) for r in source)
        assert added.kind == "added"
        assert (added.user_id, added.namespace, added.key) == ("alice", list(NS), "tone")
        assert (added.old, added.new) == (None, {"style": "short answers"})
        assert updated.kind == "updated"
        assert (updated.old, updated.new) == ({"style": "short answers"}, {"style": "detailed answers"})
        assert deleted.kind == "deleted"
        assert (deleted.old, deleted.new) == ({"style": "detailed answers"}, None)
        assert (deleted.user_id, deleted.namespace, deleted.key) == ("alice", list(NS), "tone")


def test_a_delete_of_nothing_streams_nothing(aws):
    ddb, streams = aws
    memory = DynamoLongTermMemory(TABLE, client=ddb)
    assert memory.delete("alice", NS, "missing") is False
    assert stream_records(ddb, streams) == []


def test_records_that_are_not_memory_items_decode_to_none():
    # Given records of another shape: unknown events, keys-only views, foreign items
    keys = {"owner": {"S": "alice#notes"}, "key": {"S": "k"}}
    foreign = {"pk": {"S": "x"}, "value": {"S": "{}"}}
    not_json = {**keys, "value": {"S": "not json"}}
    cases = [
        {},
        {"eventName": "UNKNOWN", "dynamodb": {"NewImage": {**keys, "value": {"S": "1"}}}},
        {"eventName": "INSERT", "dynamodb": {"Keys": keys}},
        {"eventName": "REMOVE", "dynamodb": {"Keys": keys}},
        {"eventName": "INSERT", "dynamodb": {"NewImage": foreign}},
        {"eventName": "INSERT", "dynamodb": {"NewImage": not_json}},
        {"eventName": "INSERT", "dynamodb": "oops"},
    ]
    # Then none of them is a change
    assert [change_from_stream_record(record) for record in cases] == [None] * len(cases)


def test_identity_falls_back_to_the_owner_when_attributes_are_missing():
    record = {
        "eventName": "MODIFY",
        "dynamodb": {
            "NewImage": {"owner": {"S": "bob#a/b"}, "key": {"S": "k"}, "value": {"S": "[1,2]"}},
            "OldImage": {"owner": {"S": "bob#a/b"}, "key": {"S": "k"}},  # held no memory value yet
        },
    }
    change = change_from_stream_record(record)
    assert (change.user_id, change.namespace, change.key, change.kind) == ("bob", ["a", "b"], "k", "added")
    assert change.new == [1, 2]
