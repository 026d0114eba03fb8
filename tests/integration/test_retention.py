"""Lifecycle and retention on the emulation, with a fake clock: completed missions are archived
after 30 days and failed ones after 7, into long-term memory, with their checkpoints removed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from missions.local.emulation import LocalCloud
from missions.ports.missions import lifecycle_of
from missions.service.retention import ARCHIVE_NAMESPACE
from tests.integration.conftest import REPO_ROOT

GOAL = "Where is max_agent_hops enforced?"


def _ended(cloud: LocalCloud, mission_id: str) -> datetime:
    return datetime.fromisoformat(cloud.runtime.missions.get(mission_id).completed_at)


def test_missions_show_their_lifecycle_and_are_archived_by_age_and_outcome():
    with LocalCloud(["code_analysis"]) as cloud:
        runtime = cloud.runtime
        # Given a completed mission (it went through planning, executing and reflecting stages)
        done = cloud.run("code_analysis", GOAL, context={"repo": str(REPO_ROOT)}, user_id="ada")
        assert done.status == "SUCCEEDED"
        record = runtime.missions.get(done.mission_id)
        assert lifecycle_of(record) == "completed" and record.phase in {"executing", "reflecting"}
        assert runtime.checkpoints.list(done.mission_id)
        # and a mission that failed at the same time
        failed = cloud.start("code_analysis", GOAL, context={"repo": str(REPO_ROOT)}, user_id="ada")
        cloud.wait(failed)
        # (it completed; the test says it failed, at the same moment)
        runtime.missions.transition(
            failed,
            "failed",
            frozenset({"completed"}),
            completed_at=runtime.missions.get(done.mission_id).completed_at,
        )
        ended = _ended(cloud, done.mission_id)

        # When retention runs 8 days later
        report = cloud.runtime.retention.run(now=lambda: ended + timedelta(days=8))
        # Then only the failed one is archived (7 days); the completed one is kept (30 days)
        assert report["archived"] == [failed] and not report["failures"]
        assert lifecycle_of(runtime.missions.get(failed)) == "archived"
        assert lifecycle_of(runtime.missions.get(done.mission_id)) == "completed"

        # When it runs 31 days later
        report = cloud.runtime.retention.run(now=lambda: ended + timedelta(days=31))
        # Then the completed one is archived: summary in long-term memory, checkpoints gone, record kept
        assert report["archived"] == [done.mission_id] and report["checkpoints_removed"] > 0
        assert runtime.checkpoints.list(done.mission_id) == []
        archived = runtime.missions.get(done.mission_id)
        assert (archived.status, archived.goal) == ("archived", GOAL) and archived.archived_at
        summary = runtime.memory.get("ada", ARCHIVE_NAMESPACE, done.mission_id)
        assert summary.value["outcome"] == "completed" and summary.value["goal"] == GOAL
        assert summary.value["result"]

        # And a second run finds nothing more to do
        again = cloud.runtime.retention.run(now=lambda: ended + timedelta(days=60))
        assert again["archived"] == []


def test_retention_ages_are_configurable():
    with LocalCloud(["code_analysis"], settings={"retention_completed_days": 2}) as cloud:
        done = cloud.run("code_analysis", GOAL, context={"repo": str(REPO_ROOT)})
        ended = datetime.fromisoformat(cloud.runtime.missions.get(done.mission_id).completed_at)
        report = cloud.runtime.retention.run(
            now=lambda: ended.astimezone(UTC) + timedelta(days=3),
        )
        assert report["archived"] == [done.mission_id]
