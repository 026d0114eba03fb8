"""Your data over the HTTP API and the CLI, on the emulation: `GET /me/export` and `DELETE /me`.

Alice and Bob both use every feature (a registered repository and its snapshot, missions with offloaded
fields, a question answered and a note, feedback that teaches preferences, long-term memory, a
conversation, an Idempotency-Key, an artifact, email notices, a mission still waiting at erasure, schedules
of their own). Alice exports, then erases; then every table, every bucket (every object version), every SNS
subscription and every EventBridge Scheduler schedule in moto is scanned, generically, for anything naming her
or her missions, repositories, conversations or schedules:
nothing is left, and Bob's data is exactly what it was.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from missions.core.mission.refs import owner_segment
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.cli.test_cli_remote import VAGUE, missions, one_line_error
from tests.e2e.test_dev_server import Client, wait_for

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
GOAL = "Where is EnvelopeCodec defined?"


@pytest.fixture(scope="module")
def cloud() -> Iterator[tuple[LocalCloud, DevServer]]:
    # a low offload threshold: every mission's bulky fields go to the blob store (checkpoints table and bucket)
    settings = {"repo_roots": [str(ROOT)], "offload_threshold": 4096}
    with LocalCloud(["code_analysis"], settings=settings) as local, DevServer(local, port=0) as dev:
        yield local, dev


def uses_everything(cloud: LocalCloud, server: DevServer, user: str) -> dict[str, set[str]]:
    """Every feature, as `user`; the ids of what they made."""
    client = Client(server, user)
    status, repository = client.call("POST", "/repositories", {"url": f"file://{ROOT}"})
    assert status == 202, repository
    repository_id = repository["repository_id"]
    while repository["status"] == "importing":
        repository = client.call("GET", f"/repositories/{repository_id}")[1]
    assert repository["status"] == "ready", repository
    body = {"goal": GOAL, "context": {"repository": repository_id}, "conversation_id": f"talk-{user}"}
    status, first = client.call("POST", "/missions", body, headers={"Idempotency-Key": f"first-{user}"})
    assert status == 202, first
    done = wait_for(client, first["mission_id"], {"completed"}, timeout=180)
    status, _ = client.call(
        "POST",
        f"/missions/{done['mission_id']}/feedback",
        {"completed": True, "quality": 2, "text": "too slow, prefer short answers"},
    )
    assert status in (200, 201, 202), _
    # a question, a note while it waits, the answer
    status, vague = client.call(
        "POST", "/missions", {"capability": "code_analysis", "goal": VAGUE, "context": {"repo": "."}}
    )
    asked = wait_for(client, vague["mission_id"], {"interrupted"}, timeout=180)
    assert client.call("POST", f"/missions/{vague['mission_id']}/notes", {"text": "look at the codec"})[0] == 202
    interrupt_id = asked["pending_interrupt"]["interrupt_id"]
    answer = {"text": "the offload codec"}
    assert client.call("POST", f"/missions/{vague['mission_id']}/interrupts/{interrupt_id}", answer)[0] in (200, 202)
    wait_for(client, vague["mission_id"], {"completed", "failed"}, timeout=180)
    # a mission still waiting for its user when they erase (its execution is cancelled first)
    status, waiting = client.call(
        "POST", "/missions", {"capability": "code_analysis", "goal": VAGUE, "context": {"repo": "."}}
    )
    wait_for(client, waiting["mission_id"], {"interrupted"}, timeout=180)
    assert client.call("PUT", "/memory/journal/today", {"value": {"text": f"{user} wrote this"}})[0] in (200, 201)
    assert client.call("PUT", "/me/notifications", {"email": f"{user}@example.com"})[0] == 200
    cloud.runtime.artifacts.put(done["mission_id"], "drafts/report", {"text": f"{user} report"}, stage="synthesizer")
    # their own schedules: one enabled, one paused (an EventBridge Scheduler schedule each, in moto)
    schedules = set()
    for expression in ("cron(0 8 ? * MON-FRI *)", "rate(1 day)"):
        request = {"expression": expression, "goal": GOAL, "capability": "code_analysis", "timezone": "Europe/Paris"}
        status, schedule = client.call("POST", "/schedules", request)
        assert status == 201, schedule
        schedules.add(schedule["schedule_id"])
    assert client.call("POST", f"/schedules/{schedule['schedule_id']}/pause")[0] == 200
    missions_ = {first["mission_id"], vague["mission_id"], waiting["mission_id"]}
    return {
        "missions": missions_,
        "repositories": {repository_id},
        "conversations": {f"talk-{user}"},
        "schedules": schedules,
    }


def tokens(user: str, made: dict[str, set[str]]) -> set[str]:
    """What names a user's data anywhere: their id, their hashed key segment, and the ids of what they made."""
    return {user, owner_segment(user), *(i for ids in made.values() for i in ids)}


def _texts(value: Any) -> Iterator[str]:
    """Every string in an item, with binary values decompressed where they are compressed."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        for unpack in (zlib.decompress, lambda b: zlib.decompress(b, 31)):
            try:
                yield unpack(value).decode(errors="replace")
                return
            except zlib.error:
                continue
        yield value.decode(errors="replace")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _texts(v)
    elif isinstance(value, list | tuple | set):
        for v in value:
            yield from _texts(v)


def everything(cloud: LocalCloud) -> list[tuple[str, str]]:
    """(where, text) of every item of every table, every version of every object, every SNS subscription and
    every schedule of the users' EventBridge Scheduler group."""
    found: list[tuple[str, str]] = []
    for table in cloud.dynamodb.list_tables()["TableNames"]:
        for page in cloud.dynamodb.get_paginator("scan").paginate(TableName=table):
            for item in page["Items"]:
                plain = {k: next(iter(v.values())) for k, v in item.items()}
                found.append((table, "\n".join(_texts(plain))))
    for bucket in (b["Name"] for b in cloud.s3.list_buckets()["Buckets"]):
        for page in cloud.s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for version in page.get("Versions", []):
                body = cloud.s3.get_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
                found.append((f"s3://{bucket}", version["Key"] + "\n" + "\n".join(_texts(body["Body"].read()))))
            for marker in page.get("DeleteMarkers", []):
                found.append((f"s3://{bucket} (delete marker)", marker["Key"]))
    group = cloud.settings.schedule_group  # users' EventBridge Scheduler schedules, with their target's input
    for page in cloud.scheduler.get_paginator("list_schedules").paginate(GroupName=group):
        for summary in page["Schedules"]:
            found_schedule = cloud.scheduler.get_schedule(GroupName=group, Name=summary["Name"])
            found_schedule.pop("ResponseMetadata", None)  # a request id, a date: not the schedule
            found.append(("scheduler", json.dumps(found_schedule, default=str)))
    for subscription in cloud.sns.list_subscriptions()["Subscriptions"]:
        attributes = cloud.sns.get_subscription_attributes(SubscriptionArn=subscription["SubscriptionArn"])
        found.append(("sns", json.dumps(attributes["Attributes"])))
    return found


def naming(found: list[tuple[str, str]], names: set[str]) -> list[tuple[str, str]]:
    return [(where, text) for where, text in found if any(name in text for name in names)]


def quiet(cloud: LocalCloud, names: set[str], timeout: float = 30.0) -> list[tuple[str, str]]:
    """What names them, once nothing more is being written about them. A mission's status shows before
    the writes after it (its ended execution's report frees the slot; a question's handler gives back the
    slot after marking the mission waiting), so a snapshot taken at once can miss those."""
    cloud.settle()
    deadline = time.monotonic() + timeout
    seen = sorted(naming(everything(cloud), names))
    while time.monotonic() < deadline:
        time.sleep(0.5)
        again = sorted(naming(everything(cloud), names))
        if again == seen:
            return seen
        seen = again
    raise AssertionError(f"their data was still changing after {timeout} s")


def export(server: DevServer, user: str) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
    request = urllib.request.Request(server.url + "/me/export", headers={"Authorization": f"Bearer dev:{user}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        lines = [json.loads(line) for line in response.read().decode().splitlines()]
        return response.status, {k.lower(): v for k, v in response.headers.items()}, lines


def test_a_user_who_used_everything_exports_it_then_erases_it_and_nothing_of_theirs_is_left(cloud):
    local, server = cloud
    # Given alice and bob who each used every feature (ids found nowhere else: their snapshots hold this file)
    alice_id, bob_id = f"alice-{uuid.uuid4().hex[:10]}", f"bob-{uuid.uuid4().hex[:10]}"
    alice_made = uses_everything(local, server, alice_id)
    bob_made = uses_everything(local, server, bob_id)
    alice, bob = tokens(alice_id, alice_made), tokens(bob_id, bob_made)
    bob_before = quiet(local, bob)
    assert naming(everything(local), alice), "alice's data was not found before the erasure: the scan sees nothing"

    # When alice exports her data
    status, headers, lines = export(server, alice_id)
    # Then it is JSON lines of everything stored about her, and nothing of bob's
    assert status == 200 and headers["content-type"].startswith("application/x-ndjson")
    assert "attachment" in headers["content-disposition"]
    assert lines[0]["kind"] == "export" and lines[0]["data"]["user_id"] == alice_id
    kinds = {line["kind"] for line in lines}
    assert {"mission", "event", "interrupt", "artifact", "conversation", "memory", "repository", "schedule"} <= kinds
    assert {s["data"]["schedule_id"] for s in lines if s["kind"] == "schedule"} == alice_made["schedules"]
    assert "idempotency_record" in kinds, kinds
    assert {m["data"]["mission_id"] for m in lines if m["kind"] == "mission"} == alice_made["missions"]
    missions_ = [m["data"] for m in lines if m["kind"] == "mission"]
    assert any(m["feedback"] for m in missions_) and any(m["notes"] for m in missions_)
    namespaces = {"/".join(m["data"]["namespace"]) for m in lines if m["kind"] == "memory"}
    assert "journal" in namespaces and any("preferences" in n for n in namespaces), namespaces
    assert not any(name in json.dumps(lines) for name in bob)

    # When alice erases everything
    status, report = Client(server, alice_id).call("DELETE", "/me")
    # Then the report says what it erased, store by store
    assert status == 200, report
    assert report["user_id"] == alice_id
    for store in (
        "missions",
        "events",
        "interrupts",
        "checkpoints",
        "artifacts",
        "memory",
        "conversations",
        "repositories",
        "idempotency",
        "schedules",
    ):
        assert report["erased"].get(store, 0) > 0, (store, report)
    assert report["erased"]["schedules"] == 2
    # And no table, bucket (any object version) or subscription holds anything of hers
    assert naming(everything(local), alice) == []
    # And bob's data is exactly as it was
    assert sorted(naming(everything(local), bob)) == bob_before
    bob_client = Client(server, bob_id)
    assert {m["mission_id"] for m in bob_client.call("GET", "/missions")[1]["missions"]} == bob_made["missions"]
    assert {s["schedule_id"] for s in bob_client.call("GET", "/schedules")[1]["schedules"]} == bob_made["schedules"]

    # When she erases again: nothing is left to erase, and it says so
    status, again = Client(server, alice_id).call("DELETE", "/me")
    assert status == 200 and not any(again["erased"].values()), again
    status, _, lines = export(server, alice_id)
    assert [line["kind"] for line in lines] == ["export"]


def test_the_cli_exports_to_a_file_and_erases_only_when_told_to(cloud, tmp_path):
    local, server = cloud
    # Given carol, who has a memory item
    carol = Client(server, "carol")
    assert carol.call("PUT", "/memory/journal/today", {"value": {"text": "carol was here"}})[0] in (200, 201)
    # When she exports with the CLI
    target = tmp_path / "mine.jsonl"
    result = missions(server, "me", "export", "-o", str(target), user="carol")
    # Then the file holds her data as JSON lines
    assert result.returncode == 0, result.stderr
    assert "exported" in result.stdout and str(target) in result.stdout.replace("\n", "")
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[0]["data"]["user_id"] == "carol" and lines[1]["kind"] == "memory"
    # When she erases without --yes: one line, exit 2, nothing erased
    one_line_error(missions(server, "me", "erase", user="carol"), "pass --yes")
    assert carol.call("GET", "/memory/journal/today")[0] == 200
    # When she erases with --yes: what was erased, and her memory is gone
    result = missions(server, "me", "erase", "--yes", user="carol")
    assert result.returncode == 0, result.stderr
    assert "erased carol" in result.stdout and "memory" in result.stdout
    assert carol.call("GET", "/memory/journal/today")[0] == 404
    # And an export to a path that cannot be written is one line, exit 2
    one_line_error(missions(server, "me", "export", "-o", "/nonexistent/dir/x.jsonl", user="carol"), "/nonexistent")


def test_the_docs_blocks_run_as_written(cloud, tmp_path):
    import subprocess

    from tests.e2e.test_docs_examples import MISSIONS, environment
    from tests.support.docs import sh_blocks

    local, server = cloud
    (http_block,) = sh_blocks("docs/api.md", "## The HTTP API locally")
    setup = http_block[0]  # H and J, "from above": the user alice
    curls, cli = sh_blocks("docs/schedules-and-data.md", "## Your data: export and erase")
    assert len(curls) == 2 and len(cli) == 2, (curls, cli)
    here = server.url.removeprefix("http://")
    env = environment(MISSIONS_API_URL=server.url, MISSIONS_CONFIG_DIR=str(tmp_path / "config"), USER="alice")
    alice = Client(server, "alice")

    def run(line: str) -> str:
        line = line.replace("localhost:8787", here).replace(".venv/bin/missions", MISSIONS)
        result = subprocess.run(
            ["bash", "-c", f"{setup}; {line}"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0 and "Traceback" not in result.stderr, (line, result.stdout, result.stderr)
        return result.stdout

    for block in (curls, cli):
        # Given alice has something stored
        assert alice.call("PUT", "/memory/journal/today", {"value": {"text": "written"}})[0] in (200, 201)
        (tmp_path / "missions-export.jsonl").unlink(missing_ok=True)
        # When she exports: the file holds it
        run(block[0])
        lines = [json.loads(line) for line in (tmp_path / "missions-export.jsonl").read_text().splitlines()]
        assert lines[0]["data"]["user_id"] == "alice" and any(line["kind"] == "memory" for line in lines)
        # When she erases: it says what, and it is gone
        said = run(block[1])
        assert '"memory"' in said or "memory" in said, said
        assert alice.call("GET", "/memory/journal/today")[0] == 404
