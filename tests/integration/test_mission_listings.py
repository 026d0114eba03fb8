"""Listings on the DynamoDB missions table (moto) where it differs from the conformance suite's: a
stack deployed before the indexes were narrowed (projection ALL, records written without the
`listed_*` attributes, results not compressed) lists the same missions, read whole where the index
cannot tell."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from missions.adapters.dynamodb._items import serialize
from missions.adapters.dynamodb.missions import DynamoMissionsByCapability, DynamoMissionStore
from missions.adapters.dynamodb.tables import table_definition
from missions.core.cost.infrastructure import item_size, write_units
from missions.core.specs import ALL, MISSIONS
from missions.ports.missions import MissionRecord, MissionSummary
from tests.support.aws import use_fake_aws

TABLE = "test-missions"


@pytest.fixture
def old_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    use_fake_aws(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        every = dataclasses.replace(
            MISSIONS, indexes=tuple(dataclasses.replace(i, projection=ALL) for i in MISSIONS.indexes)
        )
        client.create_table(**table_definition(every, TABLE))
        yield client


def test_an_old_stacks_records_and_indexes_list_as_their_summaries(old_table: Any) -> None:
    # Given records written before listings kept their stage and cost (no listed_*), in indexes projecting ALL
    old = [
        MissionRecord(
            mission_id=f"m{n}",
            user_id="u1",
            capability="code_qa",
            goal="g",
            status=status,
            stage="plan",
            counters={"cost_usd": 0.25, "agent_hops": 1},
            result={"answer": n} if status == "completed" else None,
            created_at=f"2025-01-0{n + 1}T00:00:00.000+00:00",
            completed_at="2025-01-09T00:00:00.000+00:00" if status == "completed" else None,
        )
        for n, status in enumerate(("completed", "running", "interrupted"))
    ]
    for record in old:
        old_table.put_item(TableName=TABLE, Item=serialize(record.model_dump(mode="json", exclude_none=True)))
    store = DynamoMissionStore(TABLE, client=old_table)
    # and one written since
    store.create(old[0].model_copy(update={"mission_id": "m-new", "created_at": "2025-02-01T00:00:00.000+00:00"}))
    # When they are listed by user and by capability
    by_user = store.list_for_user("u1")
    by_capability = DynamoMissionsByCapability(TABLE, client=old_table).list("code_qa", "2025")
    # Then each is its record's summary, whatever the index held
    expected = [MissionSummary.of(store.get(m)) for m in ("m-new", "m2", "m1", "m0")]
    assert by_user == expected and by_capability == list(reversed(expected))
    assert [(m.stage, m.cost_usd) for m in by_user] == [("plan", 0.25)] * 4
    # and the records read back whole, an old uncompressed result too
    assert store.get("m0").result == {"answer": 0} and store.get("m-new").result == {"answer": 0}


def test_a_result_is_stored_compressed_and_read_back_whole(old_table: Any) -> None:
    # Given a mission that ends with a 20 KB result (an answer, citations, the evidence tools returned)
    store = DynamoMissionStore(TABLE, client=old_table)
    store.create(MissionRecord(mission_id="m1", user_id="u1", capability="code_qa", goal="g", status="running"))
    evidence = [{"ref": f"shared/missions/x{n % 40}.py:{n}", "text": f"def f{n}(): return {n}"} for n in range(400)]
    result = {"answer": "the envelope codec offloads big fields", "evidence": evidence}
    assert len(json.dumps(result)) > 20_000
    # When it ends
    store.transition("m1", "completed", frozenset({"running"}), result=result, completed_at="2025-01-09T00:00:00.000Z")
    # Then the stored item is a fraction of the result's size (what every later write of it costs), and reads whole
    item = old_table.get_item(TableName=TABLE, Key={"mission_id": {"S": "m1"}})["Item"]
    assert "B" in item["result"] and write_units(item_size(item)) <= 5
    assert store.get("m1").result == result
