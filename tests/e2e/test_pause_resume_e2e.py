"""Pause, resume and steer a mission over the HTTP API and with the CLI, on the emulation: the dev server
(the deployed API's handlers) on a free port, a real `missions` process, dev tokens.

The mission's first stage is held in flight by a gate the test opens, so the pause lands while it runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.cli.test_cli_remote import missions, one_line_error
from tests.e2e.test_dev_server import Client, wait_for
from tests.integration.conftest import with_capabilities
from tests.integration.test_lifecycle_cancel_fork import GATE, Gate
from tests.integration.test_pause_resume_notes import PAUSABLE

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    names, known = with_capabilities(PAUSABLE)
    with LocalCloud(names, registry=known) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


@pytest.fixture()
def gate() -> Iterator[Gate]:
    GATE.close()
    yield GATE
    GATE.open()


def started(client: Client, gate: Gate) -> str:
    """A mission whose first stage is in flight."""
    status, body = client.call("POST", "/missions", {"capability": PAUSABLE.name, "goal": "plan the trip"})
    assert status == 202, body
    gate.until_entered(1)
    wait_for(client, body["mission_id"], {"running"})
    return str(body["mission_id"])


def test_pause_note_and_resume_over_the_http_api(server: DevServer, gate: Gate):
    alice, bob = Client(server, "alice"), Client(server, "bob")
    mission_id = started(alice, gate)
    # When alice pauses it: 202 pausing, and the stage in flight ends before it is paused
    assert alice.call("POST", f"/missions/{mission_id}/pause") == (202, {"mission_id": mission_id, "status": "pausing"})
    assert alice.call("GET", f"/missions/{mission_id}")[1]["status"] == "pausing"
    gate.open()
    paused = wait_for(alice, mission_id, {"paused"})
    assert paused["lifecycle"] == "paused" and paused["paused_at"] and paused["running_stage"] is None
    listed = alice.call("GET", "/missions?status=paused")[1]["missions"]
    assert [m["mission_id"] for m in listed] == [mission_id]
    # Then bob can neither see nor steer it, and a second pause or a resume of a running one is refused
    assert bob.call("POST", f"/missions/{mission_id}/resume")[0] == 404
    assert bob.call("POST", f"/missions/{mission_id}/notes", {"text": "hi"})[0] == 404
    status, body = alice.call("POST", f"/missions/{mission_id}/pause")
    assert status == 409 and "only a running mission can be paused" in body["message"]
    # And a bad note is a 422 that names the field, and changes nothing
    status, body = alice.call("POST", f"/missions/{mission_id}/notes", {"text": "   "})
    assert status == 422 and body["detail"][0]["loc"][-1] == "text"
    assert alice.call("GET", f"/missions/{mission_id}")[1]["notes"] == []
    # When she steers it while paused, then resumes it
    status, body = alice.call("POST", f"/missions/{mission_id}/notes", {"text": "skip the museums"})
    assert status == 202 and body["status"] == "noted"
    resumed = alice.call("POST", f"/missions/{mission_id}/resume")
    assert resumed == (200, {"mission_id": mission_id, "status": "running"})
    # Then it completes, and its timeline shows the pause, the note, the resume and the note's delivery
    done = wait_for(alice, mission_id, {"completed", "failed"})
    assert done["status"] == "completed", done
    assert [n["text"] for n in done["notes"]] == ["skip the museums"]
    events = alice.call("GET", f"/missions/{mission_id}/events?limit=500")[1]["events"]
    types = [e["type"] for e in events]
    assert types.index("mission.paused") < types.index("mission.resumed") < types.index("note.delivered")
    # And a note to the finished mission is a 409 that says so
    status, body = alice.call("POST", f"/missions/{mission_id}/notes", {"text": "and the budget is 500"})
    assert status == 409 and "already completed" in body["message"]


def test_pause_note_resume_and_cancel_with_the_cli(server: DevServer, gate: Gate):
    alice = Client(server, "alice")
    mission_id = started(alice, gate)
    # When the user pauses it with the CLI
    result = missions(server, "pause", mission_id)
    assert result.returncode == 0 and f"pausing {mission_id}" in result.stdout, result.stderr
    gate.open()
    wait_for(alice, mission_id, {"paused"})
    # Then `status` shows it paused, `note` steers it and `resume` resumes it
    assert "paused" in missions(server, "status", mission_id).stdout
    result = missions(server, "note", mission_id, "the budget is 500")
    assert result.returncode == 0 and "noted note_" in result.stdout, result.stderr
    result = missions(server, "resume", mission_id)
    assert result.returncode == 0 and f"resumed {mission_id} (running)" in result.stdout, result.stderr
    assert wait_for(alice, mission_id, {"completed", "failed"})["status"] == "completed"
    # And what cannot be done is one line, exit code 2
    one_line_error(missions(server, "resume", mission_id), "already completed")
    one_line_error(missions(server, "note", mission_id, "too late"), "already completed")


def test_a_paused_mission_is_cancelled_from_the_cli(server: DevServer, gate: Gate):
    alice = Client(server, "alice")
    mission_id = started(alice, gate)
    assert missions(server, "pause", mission_id).returncode == 0
    gate.open()
    wait_for(alice, mission_id, {"paused"})
    result = missions(server, "cancel", mission_id)
    assert result.returncode == 0, result.stderr
    assert wait_for(alice, mission_id, {"cancelled"})["terminal_reason"] == "cancelled"


def test_the_docs_pause_blocks_run_as_written(server: DevServer, gate: Gate, tmp_path):
    """docs/api.md "Pause, resume and steer a mission": its curl block, then its CLI block, as written."""
    import subprocess

    from tests.e2e.test_docs_examples import MISSIONS, environment
    from tests.support.docs import sh_blocks

    (http_block,) = sh_blocks("docs/api.md", "## The HTTP API locally")
    setup = http_block[0]  # H and J, "from above"
    curls, cli = sh_blocks("docs/api.md", "## Pause, resume and steer a mission")
    assert len(curls) == 4 and len(cli) == 3, (curls, cli)
    alice = Client(server, "alice")
    here = server.url.removeprefix("http://")

    def run(line: str, mission_id: str) -> str:
        line = line.replace("<mission id>", mission_id).replace("localhost:8787", here)
        line = line.replace(".venv/bin/missions", MISSIONS)
        env = environment(MISSIONS_API_URL=server.url, MISSIONS_CONFIG_DIR=str(tmp_path / "config"))
        result = subprocess.run(
            ["bash", "-c", f"{setup}; {line}"], env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0 and "Traceback" not in result.stderr, (line, result.stdout, result.stderr)
        return result.stdout

    for block, note in ((curls, "skip the museums"), (cli, "the budget is 500")):
        mission_id = started(alice, gate)
        assert "pausing" in run(block[0], mission_id)
        gate.open()
        wait_for(alice, mission_id, {"paused"})
        rest = block[1:]
        if block is curls:
            assert '"paused"' in run(rest[0], mission_id)
            rest = rest[1:]
        assert "noted" in run(rest[0], mission_id)
        assert "running" in run(rest[1], mission_id)
        done = wait_for(alice, mission_id, {"completed", "failed"})
        assert done["status"] == "completed" and [n["text"] for n in done["notes"]] == [note]
        gate.close()
