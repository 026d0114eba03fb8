"""Lifecycle and retention on the emulation, with a fake clock: completed missions are archived
after 30 days and failed ones after 7, into long-term memory, with their checkpoints removed."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from missions.local.emulation import LocalCloud
from missions.ports.checkpoints import TOOL_JOURNAL_SUFFIX
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


def _items_of(cloud: LocalCloud, mission_id: str) -> dict[str, int]:
    """How many items each per-mission table holds for the mission (its partitions, by their layout)."""
    settings, counts = cloud.settings, {}
    partitions = {
        "events": (settings.events_table, "mission_id", mission_id),
        "checkpoints": (settings.checkpoints_table, "thread_id", mission_id),
        "tool journal": (settings.checkpoints_table, "thread_id", mission_id + TOOL_JOURNAL_SUFFIX),
        "model calls": (settings.usage_table, "pk", f"mission#{mission_id}"),
    }
    for name, (table, key, value) in partitions.items():
        counts[name] = cloud.dynamodb.query(
            TableName=table,
            KeyConditionExpression="#k = :v",
            ExpressionAttributeNames={"#k": key},
            ExpressionAttributeValues={":v": {"S": value}},
            Select="COUNT",
        )["Count"]
    return counts


def test_a_short_policy_prunes_an_archived_missions_bulky_items_and_keeps_its_record():
    with LocalCloud(["code_analysis"], settings={"retention_minutes": 10}) as cloud:
        runtime = cloud.runtime
        # Given a mission that ended, with its events, checkpoints and model calls
        old = cloud.run("code_analysis", GOAL, context={"repo": str(REPO_ROOT)}, user_id="ada").mission_id
        ended = _ended(cloud, old)
        before = _items_of(cloud, old)
        assert before["events"] and before["model calls"], before
        totals = runtime.usage.totals("code_analysis", "ada")
        assert sum(total.calls for total in totals) == before["model calls"]  # its end added its calls

        # When retention runs under the dev server's short policy 9 minutes after it ended, then 11
        early = runtime.retention.run(now=lambda: ended + timedelta(minutes=9))
        kept = _items_of(cloud, old)
        report = runtime.retention.run(now=lambda: ended + timedelta(minutes=11))

        # Then at 9 nothing was touched; at 11 it is archived and its bulky items are gone
        assert (early["archived"], early["items_pruned"], kept) == ([], 0, before)
        assert report["archived"] == [old] and not report["failures"]
        assert report["items_pruned"] >= sum(before.values()) - before["checkpoints"]
        assert set(_items_of(cloud, old).values()) == {0}
        # and its record still answers, its summary is kept, and what the user spent is still counted
        assert runtime.missions.get(old).status == "archived"
        assert runtime.memory.get("ada", ARCHIVE_NAMESPACE, old).value["goal"] == GOAL
        assert runtime.usage.totals("code_analysis", "ada") == totals


def test_the_dev_server_runs_retention_on_its_own():
    import json
    import urllib.request

    from missions.local.devserver import DevServer

    # Given a dev server whose missions are archived a tenth of a second after they end, checked as often
    with LocalCloud(["code_analysis"], settings={"retention_minutes": 0.1 / 60}) as cloud:
        done = cloud.run("code_analysis", GOAL, context={"repo": str(REPO_ROOT)}, user_id="ada").mission_id
        assert _items_of(cloud, done)["events"] > 0

        def get(server: DevServer, path: str) -> dict:
            request = urllib.request.Request(server.url + path, headers={"Authorization": "Bearer dev:ada"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return dict(json.loads(response.read()))

        # When it serves for a while (no request asks for retention)
        with DevServer(cloud, port=0, retention_every=0.05) as server:
            deadline = time.monotonic() + 30
            while get(server, f"/missions/{done}")["status"] != "archived" and time.monotonic() < deadline:
                time.sleep(0.05)

            # Then the mission was archived and pruned by the server itself; the API still answers for it
            assert get(server, f"/missions/{done}")["status"] == "archived"
            assert get(server, f"/missions/{done}/events")["events"] == []
        assert set(_items_of(cloud, done).values()) == {0}
