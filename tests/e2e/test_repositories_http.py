"""Repositories over HTTP on the dev server: register by git URL or upload, ask about them, isolation, delete.

Citations are checked against the snapshot itself (what the mission really read), so the test
holds whatever uncommitted changes the working tree carries.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from missions.core.mission.refs import snapshot_key
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from missions.service.repositories.archive import extract_snapshot
from tests.support.archives import tar_gz_bytes as tar_gz

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
GOAL = "Where is EnvelopeCodec defined?"


@pytest.fixture(scope="module")
def server():
    cloud = LocalCloud(["code_analysis"], settings={"repo_roots": [str(ROOT)]})
    with cloud, DevServer(cloud, port=0) as dev:
        yield dev


def call(server: DevServer, method: str, path: str, body: Any = None, user: str = "alice", raw: bytes | None = None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    headers = {"content-type": "application/json", "Authorization": f"Bearer dev:{user}"}
    request = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def wait_ready(server: DevServer, repository_id: str, user: str = "alice") -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, record = call(server, "GET", f"/repositories/{repository_id}", user=user)
        assert status == 200, record
        if record["status"] != "importing":
            return record
        time.sleep(0.1)
    raise TimeoutError(repository_id)


def wait_mission(server: DevServer, mission_id: str, user: str = "alice") -> dict:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status, mission = call(server, "GET", f"/missions/{mission_id}", user=user)
        if mission["status"] in ("completed", "failed", "cancelled"):
            return mission
        time.sleep(0.1)
    raise TimeoutError(mission_id)


@pytest.fixture(scope="module")
def registered(server) -> dict:
    status, record = call(server, "POST", "/repositories", {"url": f"file://{ROOT}"})
    assert status == 202, record
    ready = wait_ready(server, record["repository_id"])
    assert ready["status"] == "ready", ready
    return ready


def test_a_repository_registered_by_git_url_answers_with_verified_citations(server, registered, tmp_path):
    # Given alice's repository, imported from its git URL into a snapshot
    snapshot = registered["snapshots"][-1]
    assert len(snapshot["commit"]) == 40 and snapshot["files"] > 50
    # When she asks a question about it through the API
    status, created = call(
        server,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repository": registered["repository_id"]}},
    )
    assert status == 202, created
    mission = wait_mission(server, created["mission_id"])
    # Then it completed with [file:line] citations that point at real lines of that snapshot
    assert mission["status"] == "completed", mission
    citations = mission["result"]["citations"]
    assert citations
    unpacked = tmp_path / "snapshot"
    archive = tmp_path / "snapshot.tar.gz"
    key = snapshot_key("alice", registered["repository_id"], snapshot["sha256"])
    server.cloud.s3.download_file(server.cloud.settings.snapshot_bucket, key, str(archive))
    extract_snapshot(archive, unpacked)
    for ref in citations:
        file, line = re.match(r"^(.+):(\d+)", ref).groups()
        lines = (unpacked / file).read_text().splitlines()
        assert 1 <= int(line) <= len(lines), ref
    assert any("EnvelopeCodec" in (unpacked / ref.split(":")[0]).read_text() for ref in citations)


def test_another_users_repository_is_invisible_and_unusable(server, registered):
    repository_id = registered["repository_id"]
    assert call(server, "GET", f"/repositories/{repository_id}", user="bob")[0] == 404
    assert call(server, "DELETE", f"/repositories/{repository_id}", user="bob")[0] == 404
    assert call(server, "POST", f"/repositories/{repository_id}/imports", {}, user="bob")[0] == 404
    assert repository_id not in [
        r["repository_id"] for r in call(server, "GET", "/repositories", user="bob")[1]["repositories"]
    ]
    status, body = call(
        server,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repository": repository_id}},
        user="bob",
    )
    assert status == 422 and "no repository" in body["message"]
    assert call(server, "GET", "/missions", user="bob")[1]["missions"] == []


def test_an_uploaded_archive_is_imported_and_a_hostile_one_fails_with_its_reason(server):
    good = tar_gz({"ledger-main/ledger.py": b"class Ledger:\n    def post(self, amount):\n        return amount\n"})
    status, record = call(
        server, "POST", "/repositories", {"name": "ledger", "upload": {"format": "tar.gz", "size_bytes": len(good)}}
    )
    assert status == 201 and record["status"] == "awaiting_upload", record
    assert record["upload"]["url"].startswith(server.url)  # the dev server stands in for S3
    # importing before the archive arrived is a conflict, not a failure
    assert call(server, "POST", f"/repositories/{record['repository_id']}/imports", {})[0] == 409
    put = urllib.request.Request(record["upload"]["url"], data=good, method="PUT")
    with urllib.request.urlopen(put, timeout=30) as response:
        assert response.status == 200
    status, importing = call(server, "POST", f"/repositories/{record['repository_id']}/imports")  # no body needed
    assert status == 202, importing
    assert wait_ready(server, record["repository_id"])["status"] == "ready"

    hostile = tar_gz({"../../etc/cron.d/evil": b"* * * * * root sh\n"})
    status, bad = call(server, "POST", "/repositories", {"upload": {"format": "tar.gz", "size_bytes": len(hostile)}})
    urllib.request.urlopen(urllib.request.Request(bad["upload"]["url"], data=hostile, method="PUT"), timeout=30)
    call(server, "POST", f"/repositories/{bad['repository_id']}/imports", {})
    failed = wait_ready(server, bad["repository_id"])
    assert failed["status"] == "failed" and failed["reason"] and failed["snapshots"] == []
    assert "upload" in failed  # a fresh URL to try again


@pytest.mark.parametrize(
    "body",
    [
        {"url": "https://user:secret@github.com/a/b.git"},
        {"url": "http://github.com/a/b.git"},
        {"url": "file:///etc"},
        {"url": 5},
        {"url": "https://github.com/a/b.git", "upload": {"format": "zip", "size_bytes": 5}},
        {"upload": {"format": "tar.gz", "size_bytes": "5"}},
        {"upload": {"format": "rar", "size_bytes": 5}},
        {"url": f"file://{ROOT}", "shared": True},  # only operators share
        {"url": f"file://{ROOT}", "ref": "../../x"},
        {},
    ],
)
def test_bad_registrations_get_a_4xx_and_store_nothing(server, body):
    status, answer = call(server, "POST", "/repositories", body, user="mallory")
    assert 400 <= status < 500 and answer.get("message"), (status, answer)
    assert call(server, "GET", "/repositories", user="mallory")[1]["repositories"] == []


def test_deleting_a_repository_removes_its_snapshots_and_refuses_new_missions(server):
    status, record = call(server, "POST", "/repositories", {"url": f"file://{ROOT}"}, user="dora")
    ready = wait_ready(server, record["repository_id"], user="dora")
    prefix = snapshot_key("dora", ready["repository_id"], "x").rsplit("/", 1)[0]
    s3, bucket = server.cloud.s3, server.cloud.settings.snapshot_bucket
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount")
    assert call(server, "DELETE", f"/repositories/{record['repository_id']}", user="dora")[0] == 204
    assert not s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount")
    assert call(server, "GET", f"/repositories/{record['repository_id']}", user="dora")[0] == 404
    status, body = call(
        server,
        "POST",
        "/missions",
        {"goal": GOAL, "capability": "code_analysis", "context": {"repository": record["repository_id"]}},
        user="dora",
    )
    assert status == 422


def test_the_cli_uploads_a_directory_and_lists_it(server, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "tax.py").write_text("def compute_tax(amount):\n    return amount\n")
    missions = [sys.executable, "-m", "missions.cli", "repos"]
    auth = ["--api-url", server.url, "--token", "dev:carol"]
    added = subprocess.run(
        [*missions, "add", str(project), "--name", "proj", *auth], capture_output=True, text=True, timeout=120
    )
    assert added.returncode == 0, added.stdout + added.stderr
    assert "ready" in added.stdout and "proj" in added.stdout
    listed = subprocess.run([*missions, "list", "--json", *auth], capture_output=True, text=True, timeout=60)
    assert [r["name"] for r in json.loads(listed.stdout)] == ["proj"]
    wrong = subprocess.run([*missions, "add", "/no/such/thing", *auth], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "error" in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
