"""Capability metrics over hand-built missions, and the by_capability queries that feed them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from missions.adapters.dynamodb.missions import DynamoMissionsByCapability
from missions.adapters.memory.missions import InMemoryMissionsByCapability, MemoryMissionStore
from missions.core.mission.envelope import utcnow
from missions.core.specs import MISSIONS
from missions.ports.learnings import Learnings
from missions.ports.missions import MissionRecord, MissionSummary
from missions.service.metrics import mission_metrics, window_start
from tests.support.aws import use_fake_aws

NOW = datetime(2025, 6, 30, 12, 0, tzinfo=UTC)
LEVELS = {"easy": 1, "medium": 2, "hard": 3, "huge": 7, "trivial": 0}


def complexity(goal: str) -> int:
    return LEVELS[goal]


def at(delta: timedelta) -> str:
    return (NOW + delta).isoformat(timespec="milliseconds")


def mission(
    mission_id: str,
    status: str,
    *,
    ago: timedelta,
    took: float | None = None,
    goal: str = "easy",
    cost: float | None = None,
    quality: int | None = None,
    feedback: bool = False,
    capability: str = "dining",
) -> MissionRecord:
    return MissionRecord(
        mission_id=mission_id,
        user_id="alice",
        capability=capability,
        goal=goal,
        status=status,
        created_at=at(-ago),
        completed_at=at(-ago + timedelta(seconds=took)) if took is not None else None,
        counters={"cost_usd": cost} if cost is not None else {},
        feedback={"quality": quality, "received_at": at(timedelta())} if quality is not None or feedback else None,
    )


DAY = timedelta(days=1)
SAMPLE = [
    mission("a", "completed", ago=1 * DAY, took=60, goal="easy", cost=0.10, quality=5),
    mission("b", "completed", ago=2 * DAY, took=300, goal="medium", cost=0.30, quality=3),
    mission("c", "completed", ago=3 * DAY, took=900, goal="hard", cost=0.50),
    mission("d", "failed", ago=timedelta(hours=20), goal="hard", cost=0.20, quality=1),
    mission("e", "cancelled", ago=4 * DAY),
    mission("f", "running", ago=timedelta(hours=1), cost=0.05),
    mission("h", "completed", ago=5 * DAY, took=120, goal="easy", cost=0.20, feedback=True),
    mission("old", "completed", ago=10 * DAY, took=5, goal="easy", cost=9.0, quality=1),  # outside 7 days
]


def test_rates_and_averages_over_the_window():
    # Given missions of the last week and one older
    # When metrics are computed for 7 days
    metrics = mission_metrics(SAMPLE, learnings=None, complexity_of=complexity, now=NOW, days=7)
    # Then the old mission is left out and the rates are over finished missions
    assert metrics["count"] == 7 and metrics["finished"] == 6
    assert metrics["by_status"] == {"cancelled": 1, "completed": 4, "failed": 1, "running": 1}
    assert metrics["completion_rate"] == pytest.approx(4 / 6)
    assert metrics["error_rate"] == pytest.approx(1 / 6)
    assert metrics["feedback_rate"] == pytest.approx(4 / 6)  # a, b, d and h (h without a rating)
    # And the average rating counts only given ratings
    assert metrics["average_rating"] == pytest.approx(3.0) and metrics["rating_count"] == 3
    # And the cost is averaged over finished missions (a running one's cost is still growing)
    assert metrics["average_cost_usd"] == pytest.approx((0.10 + 0.30 + 0.50 + 0.20 + 0.0 + 0.20) / 6)
    assert metrics["total_cost_usd"] == pytest.approx(1.35)
    assert metrics["learnings"] is None


def test_time_to_completion_is_grouped_by_complexity():
    metrics = mission_metrics(SAMPLE, learnings=None, complexity_of=complexity, now=NOW, days=7)
    assert metrics["time_to_completion"] == {
        "1": {"count": 2, "average_seconds": pytest.approx(90.0)},
        "2": {"count": 1, "average_seconds": pytest.approx(300.0)},
        "3": {"count": 1, "average_seconds": pytest.approx(900.0)},  # the failed hard mission is not timed
    }


def test_out_of_range_complexity_is_clamped_to_1_to_3():
    missions = [
        mission("x", "completed", ago=DAY, took=10, goal="huge"),
        mission("y", "completed", ago=DAY, took=20, goal="trivial"),
    ]
    metrics = mission_metrics(missions, learnings=None, complexity_of=complexity, now=NOW, days=7)
    assert metrics["time_to_completion"]["3"]["average_seconds"] == 10
    assert metrics["time_to_completion"]["1"]["average_seconds"] == 20


def test_the_window_includes_its_first_instant_and_nothing_after_now():
    # Given missions exactly at the window's start, just before it, and after `now`
    missions = [
        mission("edge", "completed", ago=2 * DAY, took=1),
        mission("before", "completed", ago=2 * DAY + timedelta(milliseconds=1), took=1),
        mission("future", "completed", ago=-timedelta(minutes=5), took=1),
    ]
    # When metrics cover 2 days / Then only the one at the start counts
    metrics = mission_metrics(missions, learnings=None, complexity_of=complexity, now=NOW, days=2)
    assert metrics["count"] == 1
    assert metrics["window"] == {"days": 2, "since": at(-2 * DAY), "until": at(timedelta())}


def test_a_wider_window_takes_in_the_older_mission():
    metrics = mission_metrics(SAMPLE, learnings=None, complexity_of=complexity, now=NOW, days=30)
    assert metrics["count"] == 8 and metrics["rating_count"] == 4


def test_no_missions_gives_zeros_and_no_averages():
    # Given nothing / When metrics are computed / Then counts are zero and nothing is divided by zero
    metrics = mission_metrics([], learnings=None, complexity_of=complexity, now=NOW, days=7)
    assert (metrics["count"], metrics["finished"], metrics["rating_count"], metrics["total_cost_usd"]) == (0, 0, 0, 0)
    for key in ("completion_rate", "error_rate", "feedback_rate", "average_rating", "average_cost_usd"):
        assert metrics[key] is None, key
    assert all(v == {"count": 0, "average_seconds": None} for v in metrics["time_to_completion"].values())


def test_only_running_missions_have_no_rates_yet():
    missions = [mission("r", "running", ago=DAY, cost=0.4)]
    metrics = mission_metrics(missions, learnings=None, complexity_of=complexity, now=NOW, days=7)
    assert metrics["count"] == 1 and metrics["completion_rate"] is None and metrics["average_cost_usd"] is None
    assert metrics["total_cost_usd"] == pytest.approx(0.4)


def test_the_capabilitys_all_time_learnings_are_included():
    learnings = Learnings(
        capability="dining", completions=8, failures=2, rating_sum=36, rating_count=9, feedback_count=11
    )
    metrics = mission_metrics(SAMPLE, learnings=learnings, complexity_of=complexity, now=NOW, days=7)
    assert metrics["learnings"]["average_rating"] == pytest.approx(4.0)
    assert metrics["learnings"]["completion_rate"] == pytest.approx(0.8)
    assert metrics["learnings"]["feedback_count"] == 11


def test_a_naive_now_is_taken_as_utc_and_days_must_be_positive():
    naive = NOW.replace(tzinfo=None)
    metrics = mission_metrics(SAMPLE, learnings=None, complexity_of=complexity, now=naive, days=7)
    assert metrics["count"] == 7
    with pytest.raises(ValueError):
        mission_metrics(SAMPLE, learnings=None, complexity_of=complexity, now=NOW, days=0)


def test_window_start_has_the_created_at_format():
    # created_at compares as text in the by_capability index, so the bound must be formatted alike
    sample = utcnow()
    start = window_start(datetime.fromisoformat(sample), 1)
    assert len(start) == len(sample) and start[-6:] == sample[-6:] and start < sample


# --------------------------------------------------------------------------- by_capability queries


def test_in_memory_query_returns_the_capabilitys_recent_missions_oldest_first():
    store = MemoryMissionStore()
    for record in [*SAMPLE, mission("other", "completed", ago=DAY, capability="code_analysis")]:
        store.create(record)
    found = InMemoryMissionsByCapability(store).list("dining", window_start(NOW, 7))
    assert [m.mission_id for m in found] == ["h", "e", "c", "b", "a", "d", "f"]


class PagingClient:
    """Forces small pages so the adapter must follow LastEvaluatedKey; counts the items read whole."""

    def __init__(self, client: Any):
        self._client = client
        self.pages = 0
        self.read_whole: list[str] = []

    def query(self, **kwargs: Any) -> dict[str, Any]:
        self.pages += 1
        return self._client.query(**kwargs, Limit=2)

    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]:
        for request in kwargs["RequestItems"].values():
            self.read_whole += [key["mission_id"]["S"] for key in request["Keys"]]
        return self._client.batch_get_item(**kwargs)


def test_dynamo_query_reads_the_by_capability_index_across_pages(monkeypatch):
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.missions import DynamoMissionStore
    from missions.adapters.dynamodb.tables import table_definition

    use_fake_aws(monkeypatch)
    with mock_aws():
        # Given the missions table holding this capability's missions and another's
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(**table_definition(MISSIONS, "test-missions"))
        store = DynamoMissionStore("test-missions", client=client)
        for record in [*SAMPLE, mission("other", "completed", ago=DAY, capability="code_analysis")]:
            store.create(record)
        # When the last 7 days are queried, two items a page
        paging = PagingClient(client)
        found = DynamoMissionsByCapability("test-missions", client=paging).list("dining", window_start(NOW, 7))
        # Then every recent mission of the capability comes back as listings show it, oldest first
        assert [m.mission_id for m in found] == ["h", "e", "c", "b", "a", "d", "f"]
        assert paging.pages >= 4
        assert found == [MissionSummary.of(store.get(m.mission_id)) for m in found]
        # and only the running one was read whole (its cost still grows), the others from the index
        assert paging.read_whole == ["f"]
        # And metrics over them match metrics over the hand-built list
        assert mission_metrics(found, learnings=None, complexity_of=complexity, now=NOW, days=7) == mission_metrics(
            SAMPLE, learnings=None, complexity_of=complexity, now=NOW, days=7
        )
