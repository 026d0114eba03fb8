"""Erasure and export of a user's data (missions.service.accounts), on fakes: the order that keeps an
erasure safe to stop and run again, and a report that says what was and was not erased."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from missions.adapters.memory.missions import MemoryMissionStore
from missions.ports.missions import MissionRecord
from missions.service.accounts import ERASED_REASON, AccountService


class FakeStore:
    """A store holding items per mission (or per user) that may be told to fail."""

    def __init__(self, name: str, items: dict[str, list[dict[str, Any]]], fail: int = 0):
        self.name, self.items, self.fail = name, items, fail

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        for owner in [user_id, *mission_ids]:
            for item in self.items.get(owner, []):
                yield self.name, item

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        if self.fail:
            self.fail -= 1
            raise RuntimeError(f"{self.name} is down")
        owners = [user_id, *mission_ids]
        return sum(len(self.items.pop(owner, [])) for owner in owners)


class FakeIndex(FakeStore):
    def __init__(self, missions: MemoryMissionStore):
        super().__init__("missions", {})
        self.missions = missions

    def mission_ids(self, user_id: str) -> list[str]:
        return [m.mission_id for m in self.missions.list_for_user(user_id, 1000)]

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        for mission_id in mission_ids:
            yield "mission", {"mission_id": mission_id}

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        for mission_id in mission_ids:
            self.missions.discard_any(mission_id)
        return len(mission_ids)


class Missions(MemoryMissionStore):
    def discard_any(self, mission_id: str) -> None:
        self._items.pop(mission_id, None)


@pytest.fixture()
def world() -> dict[str, Any]:
    missions = Missions()
    for mission_id, user, status in (
        ("m1", "alice", "completed"),
        ("m2", "alice", "interrupted"),
        ("m3", "bob", "completed"),
    ):
        missions.create(MissionRecord(mission_id=mission_id, user_id=user, capability="c", goal="g", status=status))
    events = FakeStore("events", {"m1": [{"e": 1}, {"e": 2}], "m2": [{"e": 3}], "m3": [{"e": 4}]})
    memory = FakeStore("memory", {"alice": [{"k": "a"}], "bob": [{"k": "b"}]})
    cancelled: list[str] = []

    def cancel(record: MissionRecord, reason: str) -> None:
        assert reason == ERASED_REASON
        cancelled.append(record.mission_id)

    stopped: list[str] = []
    service = AccountService(
        index=FakeIndex(missions),
        missions=missions,
        cancel=cancel,
        per_mission=[events],
        per_user=[memory],
        stop_notices=stopped.append,
    )
    return {
        "service": service,
        "missions": missions,
        "events": events,
        "memory": memory,
        "cancelled": cancelled,
        "stopped": stopped,
    }


def test_erasure_cancels_what_runs_erases_every_store_and_reports_it(world):
    # When alice erases her data
    report = world["service"].erase("alice")
    # Then her waiting mission was cancelled first, her notices stopped, and every store erased
    assert world["cancelled"] == ["m2"] and world["stopped"] == ["alice"]
    assert report.complete and report.erased == {"events": 3, "memory": 1, "missions": 2}
    # And bob's data is untouched
    assert world["events"].items == {"m3": [{"e": 4}]} and world["memory"].items == {"bob": [{"k": "b"}]}
    assert [m.mission_id for m in world["missions"].list_for_user("bob")] == ["m3"]


def test_a_store_that_fails_is_reported_and_a_second_run_finishes_the_erasure(world):
    # Given the events store fails once
    world["events"].fail = 1
    # When alice erases
    first = world["service"].erase("alice")
    # Then the report says what was erased and what was not, and her missions are kept to be found again
    assert not first.complete
    assert first.not_erased["events"] == "RuntimeError: events is down"
    assert "missions" in first.not_erased and first.erased == {"memory": 1}
    assert "NOT erased (run it again)" in first.summary()
    assert {m.mission_id for m in world["missions"].list_for_user("alice")} == {"m1", "m2"}
    # When she runs it again
    second = world["service"].erase("alice")
    # Then it finishes: what was left is erased, and nothing remains
    assert second.complete and second.erased == {"events": 3, "memory": 0, "missions": 2}
    assert world["missions"].list_for_user("alice") == [] and "m1" not in world["events"].items


def test_notices_that_cannot_be_stopped_keep_the_memory_that_names_them(world):
    def refuse(user_id: str) -> None:
        raise RuntimeError("SNS is down")

    world["service"]._stop_notices = refuse
    report = world["service"].erase("alice")
    assert "notifications" in report.not_erased and "memory" in report.not_erased
    assert world["memory"].items["alice"] == [{"k": "a"}]


def test_the_export_is_json_lines_of_every_store_for_that_user_only(world):
    import json

    lines = [json.loads(line) for line in world["service"].export("alice")]
    assert lines[0]["kind"] == "export" and lines[0]["data"]["user_id"] == "alice"
    assert sorted((line["kind"], json.dumps(line["data"])) for line in lines[1:]) == sorted(
        [
            ("mission", '{"mission_id": "m1"}'),
            ("mission", '{"mission_id": "m2"}'),
            ("events", '{"e": 1}'),
            ("events", '{"e": 2}'),
            ("events", '{"e": 3}'),
            ("memory", '{"k": "a"}'),
        ]
    )
