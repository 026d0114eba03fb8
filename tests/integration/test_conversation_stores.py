"""One conformance suite over every ConversationStore: in memory, and DynamoDB (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from missions.adapters.dynamodb.conversations import DynamoConversationStore
from missions.adapters.memory.conversations import InMemoryConversationStore
from missions.core.memory.conversation import Turn, WorkingMemory, fold
from missions.ports.conversations import VersionConflict


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    if request.param == "memory":
        yield InMemoryConversationStore()
        return
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="conversations",
            KeySchema=[
                {"AttributeName": "owner", "KeyType": "HASH"},
                {"AttributeName": "conversation_id", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "owner", "AttributeType": "S"},
                {"AttributeName": "conversation_id", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield DynamoConversationStore("conversations", client=client)


def turn(n: int) -> Turn:
    return Turn(mission_id=f"m{n}", capability="code_analysis", goal=f"question {n} about compute_tax", answer="a")


def test_a_conversation_is_written_read_listed_and_forgotten_per_user(store: Any):
    memory = fold(WorkingMemory(conversation_id="c1", user_id="ada"), turn(1))
    store.put(memory, 0)
    found, version = store.get("ada", "c1")
    assert version == 1 and found.turns[0].goal == "question 1 about compute_tax"
    assert store.get("bob", "c1") is None and store.list("bob") == []
    assert [m.conversation_id for m in store.list("ada")] == ["c1"]
    assert store.delete("ada", "c1") is True and store.get("ada", "c1") is None
    assert store.delete("ada", "c1") is False


def test_two_missions_ending_at_once_lose_no_turn(store: Any):
    store.put(fold(WorkingMemory(conversation_id="c2", user_id="ada"), turn(1)), 0)
    first, version = store.get("ada", "c2")
    store.put(fold(first, turn(2)), version)  # one mission folded its turn
    with pytest.raises(VersionConflict):  # the other, which read before it, must read again
        store.put(fold(first, turn(3)), version)
    with pytest.raises(VersionConflict):  # and a new conversation cannot be created twice
        store.put(WorkingMemory(conversation_id="c2", user_id="ada"), 0)
    latest, version = store.get("ada", "c2")
    store.put(fold(latest, turn(3)), version)
    assert [t.mission_id for t in store.get("ada", "c2")[0].turns] == ["m1", "m2", "m3"]
