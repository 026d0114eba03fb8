"""Listings on the DynamoDB missions table (moto) where it differs from the conformance suite's: a
stack deployed before the indexes were narrowed (projection ALL, records written without the
`listed_*` attributes) lists the same missions, read whole where the index cannot tell."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from missions.adapters.dynamodb.missions_query import DynamoMissionsByCapability
from missions.adapters.dynamodb.store import DynamoMissionStore, _serialize, table_definition
from missions.core.specs import ALL, MISSIONS
from missions.ports.store import MissionRecord, MissionSummary
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
        old_table.put_item(TableName=TABLE, Item=_serialize(record.model_dump(mode="json", exclude_none=True)))
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
