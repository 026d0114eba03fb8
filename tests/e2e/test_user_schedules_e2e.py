"""Users' own schedules over the dev server's HTTP API and the CLI, on the emulation: created, refused with
what is wrong, listed, fired by the dev server's clock through the schedule handler and the dispatcher,
paused (DISABLED in moto's EventBridge Scheduler), resumed and deleted; docs/schedules-and-data.md as written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.cli.test_cli_remote import missions, one_line_error
from tests.e2e.test_dev_server import Client

pytestmark = pytest.mark.e2e
GOAL = "Find the cheapest laptop under 900 dollars"
LIMIT = 3


@pytest.fixture(scope="module")
def cloud() -> Iterator[tuple[LocalCloud, DevServer]]:
    with (
        LocalCloud(["shopping"], settings={"schedules_per_user": LIMIT}) as local,
        DevServer(local, port=0) as dev,
    ):
        yield local, dev


def in_scheduler(local: LocalCloud, schedule_id: str) -> dict | None:
    group = local.settings.schedule_group
    names = {s["Name"] for s in local.scheduler.list_schedules(GroupName=group)["Schedules"]}
    return local.scheduler.get_schedule(GroupName=group, Name=schedule_id) if schedule_id in names else None


def fired(server: DevServer, seconds: int, schedule_id: str) -> list[dict]:
    return [f["result"] for f in server.advance(seconds) if f["schedule"] == schedule_id]


def test_a_schedule_is_created_fired_paused_resumed_and_deleted_over_the_api(cloud):
    local, server = cloud
    alice, bob = Client(server, "alice-api"), Client(server, "bob-api")
    # When alice creates an hourly schedule with the capability chosen from the goal
    status, created = alice.call("POST", "/schedules", {"expression": "rate(1 hour)", "goal": GOAL, "name": "deals"})
    # Then it is stored with its next firings, and moto's Scheduler holds it, enabled, targeting the function
    assert status == 201, created
    schedule_id = created["schedule_id"]
    assert created["capability"] == "auto" and created["state"] == "enabled" and len(created["next_fire_times"]) == 5
    held = in_scheduler(local, schedule_id)
    assert held is not None and held["State"] == "ENABLED" and held["ScheduleExpression"] == "rate(1 hour)"
    assert held["Target"]["Arn"] == local.settings.schedule_target_arn
    assert json.loads(held["Target"]["Input"])["user_id"] == "alice-api"
    # And bob neither sees nor changes it
    assert bob.call("GET", f"/schedules/{schedule_id}")[0] == 404
    assert bob.call("POST", f"/schedules/{schedule_id}/pause")[0] == 404
    assert bob.call("DELETE", f"/schedules/{schedule_id}")[0] == 404
    assert bob.call("GET", "/schedules")[1]["schedules"] == []

    # When the dev server's clock passes its firing: an hour after its creation, which (anchored to the whole
    # second, as the Scheduler does) may fall a second after an hour from the clock's start
    (first,) = fired(server, 3600 + 60, schedule_id)
    # Then a shopping mission of alice's started through the dispatcher, triggered by the schedule
    assert first["outcome"] in ("started", "queued"), first
    status, mission = alice.call("GET", f"/missions/{first['mission_id']}")
    assert status == 200 and mission["capability"] == "shopping" and mission["trigger"] == "schedule"
    status, shown = alice.call("GET", f"/schedules/{schedule_id}")
    assert shown["firings"][0]["mission_id"] == first["mission_id"]

    # When she pauses it: DISABLED in the Scheduler, and the clock fires nothing of it
    status, paused = alice.call("POST", f"/schedules/{schedule_id}/pause")
    assert status == 200 and paused["state"] == "paused" and paused["next_fire_times"] == []
    assert in_scheduler(local, schedule_id)["State"] == "DISABLED"
    assert fired(server, 3 * 3600, schedule_id) == []
    # When she resumes it: ENABLED, and the next hour fires again
    status, resumed = alice.call("POST", f"/schedules/{schedule_id}/resume")
    assert status == 200 and resumed["state"] == "enabled"
    assert in_scheduler(local, schedule_id)["State"] == "ENABLED"
    assert [f["outcome"] for f in fired(server, 3600, schedule_id)] in (["started"], ["queued"])

    # When she deletes it: gone from the table and the Scheduler
    assert alice.call("DELETE", f"/schedules/{schedule_id}")[0] == 204
    assert in_scheduler(local, schedule_id) is None
    assert alice.call("GET", f"/schedules/{schedule_id}")[0] == 404
    assert fired(server, 3600, schedule_id) == []


def test_bad_schedules_are_refused_with_what_is_wrong_and_nothing_is_kept(cloud):
    local, server = cloud
    carol = Client(server, "carol-api")
    before = local.scheduler.list_schedules(GroupName=local.settings.schedule_group)["Schedules"]
    # A malformed cron: what is wrong, no firings
    status, body = carol.call("POST", "/schedules", {"expression": "cron(0 8 * * MON *)", "goal": GOAL})
    assert status == 422 and "exactly one of day-of-month and day-of-week" in body["message"]
    assert body["detail"][0]["loc"] == ["body", "expression"] and "next_fire_times" not in body
    # Too frequent: what is wrong, and when it would have fired
    status, body = carol.call("POST", "/schedules", {"expression": "rate(5 minutes)", "goal": GOAL})
    assert status == 422 and body["detail"][0]["type"] == "too_frequent", body
    assert "minimum interval is 15 minutes" in body["message"] and len(body["next_fire_times"]) == 5
    # An unknown zone, an unknown capability, a goal no capability fits
    for fields, field in (
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"capability": "poetry"}, "capability"),
        ({"goal": "zzz qqq"}, "capability"),
    ):
        request = {"expression": "cron(0 8 ? * * *)", "goal": GOAL, **fields}
        status, body = carol.call("POST", "/schedules", request)
        assert status == 422 and body["detail"][0]["loc"] == ["body", field], (fields, body)
    # A context its missions could never start with (a path outside the allowed roots): the launcher's reason
    request = {"expression": "rate(1 day)", "goal": "where is main defined", "capability": "code_analysis"}
    status, body = carol.call("POST", "/schedules", {**request, "context": {"repo": "/etc"}})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "context"], body
    assert "its missions could not start" in body["message"] and len(body["next_fire_times"]) == 5
    # Strict fields: a number for the expression is the contract's 422
    assert carol.call("POST", "/schedules", {"expression": 5, "goal": GOAL})[0] == 422
    # The limit: a 409 that says so
    for _ in range(LIMIT):
        assert carol.call("POST", "/schedules", {"expression": "rate(1 day)", "goal": GOAL})[0] == 201
    status, body = carol.call("POST", "/schedules", {"expression": "rate(1 day)", "goal": GOAL})
    assert status == 409 and "delete one" in body["message"]
    after = local.scheduler.list_schedules(GroupName=local.settings.schedule_group)["Schedules"]
    assert len(after) == len(before) + LIMIT
    for schedule in carol.call("GET", "/schedules")[1]["schedules"]:
        assert carol.call("DELETE", f"/schedules/{schedule['schedule_id']}")[0] == 204


def test_the_cli_manages_schedules_with_one_line_errors(cloud):
    local, server = cloud
    # When dave creates a schedule with the CLI
    result = missions(
        server, "schedules", "create", "cron(30 7 ? * MON-FRI *)", GOAL, "--tz", "Europe/Paris", user="dave"
    )
    assert result.returncode == 0, result.stderr
    schedule_id = result.stdout.split()[0]
    assert schedule_id.startswith("s_") and "fires" in result.stdout and "+0" in result.stdout
    # Then list, show, pause, resume and delete it
    listed = missions(server, "schedules", "list", user="dave")
    assert schedule_id in listed.stdout and "1 of at most 3" in listed.stdout
    shown = json.loads(missions(server, "schedules", "show", schedule_id, "--json", user="dave").stdout)
    assert shown["timezone"] == "Europe/Paris" and shown["state"] == "enabled"
    assert "paused" in missions(server, "schedules", "pause", schedule_id, user="dave").stdout
    assert in_scheduler(local, schedule_id)["State"] == "DISABLED"
    assert "resumed" in missions(server, "schedules", "resume", schedule_id, user="dave").stdout
    assert "deleted" in missions(server, "schedules", "delete", schedule_id, user="dave").stdout
    assert in_scheduler(local, schedule_id) is None
    # And bad input is one line, exit 2: what is wrong and when it would have fired
    one_line_error(missions(server, "schedules", "create", "rate(1 minute)", GOAL, user="dave"), "would fire next at")
    one_line_error(missions(server, "schedules", "create", "every day", GOAL, user="dave"), "HTTP 422")
    one_line_error(missions(server, "schedules", "show", schedule_id, user="dave"), "HTTP 404")
    one_line_error(missions(server, "schedules", "pause", "s_nope", user="dave"), "HTTP 404")


def test_the_docs_blocks_run_as_written(cloud, tmp_path):
    from tests.e2e.test_docs_examples import MISSIONS, environment
    from tests.support.docs import sh_blocks

    local, server = cloud
    (http_block,) = sh_blocks("docs/api.md", "## The HTTP API locally")
    setup = http_block[0]  # H and J, "from above": the user alice
    curls, cli = sh_blocks("docs/schedules-and-data.md", "## Your own schedules")
    assert len(curls) == 5 and len(cli) == 6, (curls, cli)
    here = server.url.removeprefix("http://")
    env = environment(MISSIONS_API_URL=server.url, MISSIONS_CONFIG_DIR=str(tmp_path / "config"), USER="alice")

    def run(line: str, schedule_id: str = "") -> str:
        line = line.replace("localhost:8787", here).replace(".venv/bin/missions", MISSIONS)
        line = line.replace("<schedule id>", schedule_id)
        result = subprocess.run(
            ["bash", "-c", f"{setup}; {line}"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0 and "Traceback" not in result.stderr, (line, result.stdout, result.stderr)
        return result.stdout

    # the curls: create, list, pause, resume, delete
    created = json.loads(run(curls[0]))
    schedule_id = created["schedule_id"]
    assert created["timezone"] == "Europe/Paris" and created["next_fire_times"][0]["local"].endswith(
        ("+01:00", "+02:00")
    )
    assert schedule_id in run(curls[1])
    assert json.loads(run(curls[2], schedule_id))["state"] == "paused"
    assert json.loads(run(curls[3], schedule_id))["state"] == "enabled"
    run(curls[4], schedule_id)
    assert in_scheduler(local, schedule_id) is None
    # the CLI: the same round trip
    schedule_id = run(cli[0]).split()[0]
    assert schedule_id.startswith("s_") and in_scheduler(local, schedule_id) is not None
    assert schedule_id in run(cli[1])
    assert "rate(6 hours)" in run(cli[2], schedule_id)
    for line, said in zip(cli[3:], ("paused", "resumed", "deleted"), strict=True):
        assert said in run(line, schedule_id)
    assert in_scheduler(local, schedule_id) is None


def test_the_docs_name_every_schedule_command():
    text = Path(__file__).resolve().parents[2].joinpath("docs", "schedules-and-data.md").read_text()
    for command in ("create", "list", "show", "pause", "resume", "delete"):
        assert f"missions schedules {command}" in text
