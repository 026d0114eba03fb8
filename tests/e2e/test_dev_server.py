"""The HTTP API as a user drives it: the dev server, real handlers, the embedded emulation, curl-like calls."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from missions.service.triggers.webhooks import sign
from tests.integration.conftest import with_capabilities
from tests.integration.test_delegation import CHILD, PARENT

pytestmark = pytest.mark.e2e
SECRET = "whsec_c2VjcmV0IG9mIHRoZSBnaXQgc291cmNl"  # Standard Webhooks: whsec_<base64 of the key>
MONDAY_0750 = datetime(2026, 11, 23, 7, 50, tzinfo=UTC)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "tax.py").write_text(
        '"""Taxes."""\n\n\ndef compute_tax(amount, rate=0.2):\n    """Tax owed on an amount."""\n'
        "    return round(amount * rate, 2)  # TODO: per-country rates\n"
    )
    (root / "shop.py").write_text(
        "from tax import compute_tax\n\n\ndef checkout(total):\n    return compute_tax(total)\n"
    )
    (root / "etc-link").symlink_to("/etc")  # planted by a hostile repository: it must not lead out
    return root


@pytest.fixture(scope="module")
def server(repo: Path):
    sources = {"git": {"secret": SECRET, "user_id": "alice"}}
    names, known = with_capabilities(CHILD, PARENT)  # a capability that delegates, and the one it delegates to
    settings = {"webhook_sources": sources, "repo_roots": [str(repo)]}
    cloud = LocalCloud(["code_analysis", "shopping", *names], registry=known, settings=settings)
    with cloud, DevServer(cloud, port=0, clock_start=MONDAY_0750) as dev:
        dev.repo = repo  # type: ignore[attr-defined]
        yield dev


class Client:
    def __init__(self, server: DevServer, user: str | None = "alice"):
        self.server, self.user = server, user

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        all_headers = {"content-type": "application/json", **(headers or {})}
        if self.user:
            all_headers["Authorization"] = f"Bearer dev:{self.user}"
        request = urllib.request.Request(self.server.url + path, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            return exc.code, json.loads(text) if text else None


@pytest.fixture()
def alice(server) -> Client:
    return Client(server, "alice")


@pytest.fixture()
def bob(server) -> Client:
    return Client(server, "bob")


def wait_for(client: Client, mission_id: str, statuses: set[str], timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, mission = client.call("GET", f"/missions/{mission_id}")
        assert status == 200, mission
        if mission["status"] in statuses:
            return mission
        time.sleep(0.05)
    raise AssertionError(f"mission {mission_id} never reached {statuses}: {mission}")


def all_events(client: Client, mission_id: str) -> list[dict[str, Any]]:
    events, cursor = [], None
    while True:
        query = f"?limit=7&after={cursor}" if cursor else "?limit=7"
        status, page = client.call("GET", f"/missions/{mission_id}/events{query}")
        assert status == 200
        if not page["events"]:
            return events
        events += page["events"]
        cursor = page["cursor"]


def missions_of(client: Client) -> list[dict[str, Any]]:
    status, page = client.call("GET", "/missions?limit=100")
    assert status == 200
    return page["missions"]


# -- the whole journey ----------------------------------------------------------------------------


def test_create_follow_answer_result_feedback_learn(server, alice):
    # Given a vague goal, which makes the mission ask for clarification
    status, created = alice.call(
        "POST", "/missions", {"capability": "code_analysis", "goal": "help", "context": {"repo": str(server.repo)}}
    )
    assert status == 202 and created["status"] == "started", created
    mission_id = created["mission_id"]
    # When the user follows it until it waits for them
    mission = wait_for(alice, mission_id, {"interrupted"})
    pending = mission["pending_interrupt"]
    assert pending["kind"] == "clarification" and "Which function" in pending["question"]
    assert mission["lifecycle"] == "interrupted"
    # ...answers the wrong shape first (422, nothing changes), then properly
    status, _ = alice.call("POST", f"/missions/{mission_id}/interrupts/{pending['interrupt_id']}", {"approved": True})
    assert status == 422
    status, _ = alice.call(
        "POST", f"/missions/{mission_id}/interrupts/{pending['interrupt_id']}", {"text": "the compute_tax function"}
    )
    assert status == 200
    status, again = alice.call("POST", f"/missions/{mission_id}/interrupts/{pending['interrupt_id']}", {"text": "x"})
    assert status == 409, again
    # Then the mission completes with a cited answer
    done = wait_for(alice, mission_id, {"completed", "failed"})
    assert done["status"] == "completed" and done["terminal_reason"] == "completed"
    assert done["lifecycle"] == "completed" and done["archived_at"] is None
    assert "tax.py:4" in done["result"]["citations"]
    assert done["counters"]["llm_calls"] >= 4 and done["completed_at"]
    # And every event was delivered in order through the cursor, none twice
    events = all_events(alice, mission_id)
    positions = [e["position"] for e in events]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    types = [e["type"] for e in events]
    assert types[0] == "orchestrator.started" and types[-1] == "orchestrator.completed"
    assert "interrupt.raised" in types and "interrupt.answered" in types
    # And checkpoints can be listed, each with the stage runs it records: the mission's history
    status, checkpoints = alice.call("GET", f"/missions/{mission_id}/checkpoints")
    assert status == 200 and len(checkpoints["checkpoints"]) >= 7
    history = [run for checkpoint in checkpoints["checkpoints"] for run in checkpoint["stages"]]
    assert history[0]["stage"] == "perception" and history[-1]["stage"] == "integration"
    assert "interrupted" in [run["status"] for run in history] and len(history) == done["counters"]["agent_hops"]
    # When the user rates it and says what they want
    status, rated = alice.call(
        "POST",
        f"/missions/{mission_id}/feedback",
        {
            "completed": True,
            "quality": 4,
            "useful": True,
            "text": "good, but too slow, and I want more vegetarian options",
        },
    )
    assert status == 200, rated
    assert rated["preferences_written"]
    status, twice = alice.call("POST", f"/missions/{mission_id}/feedback", {"completed": True, "quality": 1})
    assert status == 409
    # Then her metrics and preferences are updated
    status, metrics = alice.call("GET", "/metrics/missions?capability=code_analysis&days=7")
    assert status == 200, metrics
    assert metrics["scope"] == "mine" and metrics["rating_count"] >= 1  # alice's own missions
    status, prefs = alice.call("GET", "/memory/user_preferences:alice")
    assert status == 200 and {i["key"] for i in prefs["items"]} & set(rated["preferences_written"])
    # And the next mission carries them in its context
    status, created = alice.call(
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": "Where is checkout?", "context": {"repo": str(server.repo)}},
    )
    assert status == 202
    wait_for(alice, created["mission_id"], {"completed"})
    envelope = server.cloud.outcome(created["mission_id"]).envelope
    assert envelope.context["preferences"]


def test_a_capability_is_chosen_from_the_goals_keywords(server, alice):
    status, created = alice.call(
        "POST",
        "/missions",
        {"goal": "Where is the function compute_tax defined?", "context": {"repo": str(server.repo)}},
    )
    assert status == 202 and created["capability"] == "code_analysis"
    wait_for(alice, created["mission_id"], {"completed"})
    status, refused = alice.call("POST", "/missions", {"goal": "plan my holiday in Rome"})
    assert status == 422 and "code_analysis" in refused["message"]


def test_cancel_and_fork(server, alice):
    # Given a mission waiting for an answer
    status, created = alice.call(
        "POST", "/missions", {"capability": "code_analysis", "goal": "help", "context": {"repo": str(server.repo)}}
    )
    mission_id = created["mission_id"]
    wait_for(alice, mission_id, {"interrupted"})
    # When it is forked from its third checkpoint, then cancelled
    _, checkpoints = alice.call("GET", f"/missions/{mission_id}/checkpoints")
    first = checkpoints["checkpoints"][0]["checkpoint_id"]
    # and the state at that checkpoint is read first: what the fork starts with
    status, at_first = alice.call("GET", f"/missions/{mission_id}/checkpoints/{first}")
    assert status == 200, at_first
    assert at_first["checkpoint_id"] == first and at_first["stage"] == checkpoints["checkpoints"][0]["stage"]
    assert at_first["state"]["mission_id"] == mission_id and at_first["state"]["raw_input"] == "help"
    assert at_first["next_stage"] == at_first["state"]["next_stage"] is not None
    assert alice.call("GET", f"/missions/{mission_id}/checkpoints/9999-nope")[0] == 404
    status, forked = alice.call("POST", f"/missions/{mission_id}/fork", {"checkpoint_id": first})
    assert status == 202, forked
    status, _ = alice.call("POST", f"/missions/{mission_id}/cancel")
    assert status == 200
    # Then the original is cancelled (a second cancel is 409) and the fork runs on from that checkpoint
    assert wait_for(alice, mission_id, {"cancelled"})["terminal_reason"] == "cancelled"
    assert alice.call("POST", f"/missions/{mission_id}/cancel")[0] == 409
    assert wait_for(alice, forked["mission_id"], {"interrupted"})["pending_interrupt"]["kind"] == "clarification"
    status, _ = alice.call("POST", f"/missions/{mission_id}/fork", {"checkpoint_id": "9999-nope"})
    assert status == 404


def test_a_fork_with_an_edited_stage_output_replays_from_the_named_stage(server, alice):
    # Given a shopping mission that found offers and asks which to buy
    status, created = alice.call(
        "POST", "/missions", {"capability": "shopping", "goal": "Find the best price for Sony WH-1000XM5 headphones"}
    )
    assert status == 202, created
    mission_id = created["mission_id"]
    asked = wait_for(alice, mission_id, {"interrupted"})["pending_interrupt"]
    offered = [option["id"] for option in asked["data"]["options"]]
    assert len(offered) > 1
    _, listed = alice.call("GET", f"/missions/{mission_id}/checkpoints")
    after_execute = next(c for c in listed["checkpoints"] if c["stage"] == "execute")["checkpoint_id"]
    _, state = alice.call("GET", f"/missions/{mission_id}/checkpoints/{after_execute}")
    found = state["state"]["outputs"]["execute"]
    # When it is forked from there with execute's offers cut to the last one, running `present` again
    edit = {"outputs": {"execute": {"options": found["options"][-1:]}}, "resume_from": "present"}
    status, forked = alice.call("POST", f"/missions/{mission_id}/fork", {"checkpoint_id": after_execute, **edit})
    assert status == 202, forked
    # Then the fork asks again, offering only what the edit left, and says where it came from
    fork = wait_for(alice, forked["mission_id"], {"interrupted"})
    assert [option["id"] for option in fork["pending_interrupt"]["data"]["options"]] == offered[-1:]
    assert fork["forked_from"] == {"mission_id": mission_id, "checkpoint_id": after_execute, "edit": edit}
    # and an edit that breaks execute's output model, or names no stage, is refused and starts nothing
    before = len(missions_of(alice))
    broken = {"checkpoint_id": after_execute, "outputs": {"execute": {"options": "none"}}}
    status, refused = alice.call("POST", f"/missions/{mission_id}/fork", broken)
    assert status == 422 and "does not fit its model" in refused["message"], refused
    status, refused = alice.call(
        "POST", f"/missions/{mission_id}/fork", {"checkpoint_id": after_execute, "resume_from": "pay"}
    )
    assert status == 422 and "no stage 'pay'" in refused["message"], refused
    assert len(missions_of(alice)) == before


def test_the_docs_fork_blocks_run_as_written(server, alice, tmp_path):
    """docs/api.md "A mission's lifecycle, cancel and forks": its curl block, then its CLI block."""
    from tests.e2e.test_docs_examples import MISSIONS, environment
    from tests.support.docs import sh_blocks

    (http_block,) = sh_blocks("docs/api.md", "## The HTTP API locally")
    curls, cli = sh_blocks("docs/api.md", "## A mission's lifecycle, cancel and forks")
    here = server.url.removeprefix("http://")

    def run(line: str, mission_id: str, checkpoint: str) -> str:
        line = line.replace("<mission id>", mission_id).replace("<checkpoint>", checkpoint)
        line = line.replace("localhost:8787", here).replace(".venv/bin/missions", MISSIONS)
        env = environment(MISSIONS_API_URL=server.url, MISSIONS_CONFIG_DIR=str(tmp_path / "config"))
        done = subprocess.run(["bash", "-c", f"{http_block[0]}; {line}"], env=env, capture_output=True, text=True)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (line, done.stdout, done.stderr)
        return done.stdout

    for block in (curls, cli):
        # Given a shopping mission waiting for alice's choice
        _, created = alice.call("POST", "/missions", {"capability": "shopping", "goal": "Sony WH-1000XM5"})
        mission_id = created["mission_id"]
        wait_for(alice, mission_id, {"interrupted"})
        listed = alice.call("GET", f"/missions/{mission_id}/checkpoints")[1]["checkpoints"]
        checkpoint = next(c for c in listed if c["stage"] == "execute")["checkpoint_id"]
        # When the block runs: the history, then the fork with its edit
        assert checkpoint in run(block[0], mission_id, checkpoint)
        printed = run(block[1], mission_id, checkpoint)
        fork_id = json.loads(printed)["mission_id"] if block is curls else printed.split(": ")[1].split()[0]
        # Then the fork asks again, from the edited state
        fork = wait_for(alice, fork_id, {"interrupted"})
        assert fork["forked_from"]["edit"]["outputs"] == {"execute": {"product": "Sony WH-1000XM5 (renewed)"}}
        _, state = alice.call("GET", f"/missions/{fork_id}/checkpoints")
        first = state["checkpoints"][0]
        assert first["stage"] == "present"
        _, at = alice.call("GET", f"/missions/{fork_id}/checkpoints/{first['checkpoint_id']}")
        assert at["state"]["outputs"]["execute"]["product"] == "Sony WH-1000XM5 (renewed)"


def test_a_parent_and_its_sub_mission_are_linked_in_the_api_and_the_cli(server: DevServer):
    from tests.e2e.cli.test_cli_remote import missions

    hal = Client(server, "hal")
    # Given hal's mission whose first stage delegates to a sub-mission that asks him a question
    status, created = hal.call(
        "POST", "/missions", {"capability": PARENT.name, "goal": "Turin", "context": {"child": {"ask": True}}}
    )
    assert status == 202, created
    parent_id = created["mission_id"]
    child = None
    for _ in range(600):
        parent = hal.call("GET", f"/missions/{parent_id}")[1]
        if parent["children"]:
            child = wait_for(hal, parent["children"][0], {"interrupted"})
            break
        wait_for(hal, parent_id, {"interrupted", "completed", "failed"})
    assert child is not None
    # Then the parent waits with no question of its own, and answering its delegation is refused
    parent = hal.call("GET", f"/missions/{parent_id}")[1]
    assert parent["status"] == "interrupted" and parent["pending_interrupt"] is None
    assert child["parent"]["mission_id"] == parent_id and child["lineage"] == [PARENT.name]
    refused = hal.call("POST", f"/missions/{parent_id}/interrupts/{child['parent']['interrupt_id']}", {"text": "me"})
    assert refused[0] == 409 and "waits for a sub-mission" in refused[1]["message"], refused
    # and `missions status` shows the link each way
    shown = missions(server, "status", parent_id, user="hal")
    assert shown.returncode == 0 and f"sub-missions: {child['mission_id']}" in shown.stdout, shown.stderr
    assert f"sub-mission of: {parent_id}" in missions(server, "status", child["mission_id"], user="hal").stdout
    # When hal answers the sub-mission's question, the parent resumes and completes with its result
    question = child["pending_interrupt"]["interrupt_id"]
    assert (
        hal.call("POST", f"/missions/{child['mission_id']}/interrupts/{question}", {"text": "the old town"})[0] == 200
    )
    done = wait_for(hal, parent_id, {"completed", "failed"})
    assert done["result"]["answer"] == "planned with dinners in Turin (the old town)"
    events = [e["type"] for e in hal.call("GET", f"/missions/{parent_id}/events")[1]["events"]]
    assert events.index("delegation.started") < events.index("delegation.ended")
    # and another user sees neither
    assert Client(server, "ivy").call("GET", f"/missions/{child['mission_id']}")[0] == 404


# -- webhooks ---------------------------------------------------------------------------------------


def deliver(
    client: Client,
    body: dict[str, Any],
    *,
    delivery: str,
    secret: str = SECRET,
    age: int = 0,
    signed: bool = True,
    source: str = "git",
    signed_as: str | None = None,
) -> tuple[int, Any]:
    raw = json.dumps(body).encode()
    timestamp = str(int(time.time()) - age)
    headers = {"webhook-id": delivery, "webhook-timestamp": timestamp}
    if signed:  # signed_as: the id the signature was made for (a replay under another id)
        headers["webhook-signature"] = sign(secret, signed_as or delivery, timestamp, raw)
    return Client(client.server, user=None).call("POST", f"/webhooks/{source}", raw=raw, headers=headers)


def test_webhook_accepted_unsigned_badly_signed_stale_replayed_unknown(server, alice):
    before = len(missions_of(alice))
    body = {"type": "push", "symbol": "compute_tax"}
    assert deliver(alice, body, delivery="d-unsigned", signed=False)[0] == 401
    assert deliver(alice, body, delivery="d-bad", secret="whsec_d3Jvbmc=")[0] == 401
    assert deliver(alice, body, delivery="d-stale", age=301)[0] == 401
    assert deliver(alice, body, delivery="d-unknown", source="nope")[0] == 404
    assert len(missions_of(alice)) == before  # nothing rejected left a trace
    # When a good delivery arrives, then the same delivery again
    status, accepted = deliver(alice, body, delivery="d-1")
    assert status == 202 and accepted["accepted"] is True
    status, replay = deliver(alice, body, delivery="d-1")
    assert status == 200 and replay["duplicate"] is True
    # and the captured delivery under a fresh id is not signed for it
    assert deliver(alice, body, delivery="d-2", signed_as="d-1")[0] == 401
    # Then exactly one mission started, for the source's user, from the trigger's goal template
    started = [m for m in missions_of(alice) if m["trigger"] == "webhook"]
    assert len(started) == 1 and "compute_tax" in started[0]["goal"] and started[0]["priority"] == "high"


# -- schedules and memory triggers ----------------------------------------------------------------


def test_a_schedule_fires_for_opted_in_users_only(server, alice, bob):
    # Given alice opted in to the weekly digest and bob did not
    status, body = alice.call("PUT", "/memory/code_digest/optin", {"value": {"repo": str(server.repo)}})
    assert status == 200, body
    status, body = bob.call("PUT", "/memory/notes/misc", {"value": {"text": "hello"}})
    assert status == 200, body
    # When the clock passes Monday 08:00 UTC
    status, clock = Client(server, None).call("POST", "/_dev/clock", {"advance_seconds": 15 * 60})
    assert status == 200, clock
    assert len(clock["fired"]) == 1
    # Then alice got a digest mission and bob none
    assert [m for m in missions_of(alice) if m["trigger"] == "schedule"]
    assert not [m for m in missions_of(bob) if m["trigger"] == "schedule"]


def test_a_memory_change_starts_a_mission(server, alice):
    before = [m for m in missions_of(alice) if m["trigger"] == "memory"]
    status, _ = alice.call("PUT", "/memory/watchlist/tax", {"value": {"symbol": "compute_tax"}})
    assert status == 200
    started = [m for m in missions_of(alice) if m["trigger"] == "memory"]
    assert len(started) == len(before) + 1 and "compute_tax" in started[0]["goal"]


def test_a_value_changed_back_triggers_again(server, alice):
    # Given the watchlist trigger (it fires when the symbol changes)
    def memory_missions() -> list[dict]:
        return [m for m in missions_of(alice) if m["trigger"] == "memory" and "compute_" in m["goal"]]

    before = len(memory_missions())
    # When the symbol goes X -> Y -> X
    for symbol in ("compute_total", "compute_tax", "compute_total"):
        assert alice.call("PUT", "/memory/watchlist/flip", {"value": {"symbol": symbol}})[0] == 200
    # Then each of the three changes started its mission: going back to X is a change too
    goals = [m["goal"] for m in memory_missions()[: len(memory_missions()) - before]]
    assert len(goals) == 3, goals
    assert sorted(goals) == sorted(
        f"Where is {s} defined, and how is it used?" for s in ("compute_total",) * 2 + ("compute_tax",)
    )


# -- isolation and bad input --------------------------------------------------------------------


def test_another_users_mission_is_404(server, alice, bob):
    status, created = alice.call(
        "POST", "/missions", {"capability": "code_analysis", "goal": "help", "context": {"repo": str(server.repo)}}
    )
    mission_id = created["mission_id"]
    for method, path, body in [
        ("GET", f"/missions/{mission_id}", None),
        ("GET", f"/missions/{mission_id}/events", None),
        ("GET", f"/missions/{mission_id}/checkpoints", None),
        ("GET", f"/missions/{mission_id}/checkpoints/x", None),
        ("POST", f"/missions/{mission_id}/cancel", None),
        ("POST", f"/missions/{mission_id}/feedback", {"completed": True}),
        ("POST", f"/missions/{mission_id}/interrupts/x", {"text": "hi"}),
    ]:
        assert bob.call(method, path, body)[0] == 404, path
    assert mission_id not in [m["mission_id"] for m in missions_of(bob)]
    assert alice.call("GET", "/memory/watchlist/tax")[0] == 200
    assert bob.call("GET", "/memory/watchlist/tax")[0] == 404
    assert Client(server, None).call("GET", f"/missions/{mission_id}")[0] == 401


@pytest.mark.parametrize(
    ("method", "path", "raw"),
    [
        ("POST", "/missions", b"not json"),
        ("POST", "/missions", b'{"goal": ""}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "nope"}'),
        ("POST", "/missions", b'{"goal": "x", "priority": "whenever"}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repo": "/no/such/dir"}}'),
        # a mission reads only what its user may read: no system paths, no links out, no non-strings
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repo": "/etc"}}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repo": "/"}}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repo": "/proc/self"}}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repo": "etc-link"}}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repo": "../.."}}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repo": 123}}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repository": 123}}'),
        ("POST", "/missions", b'{"goal": "x", "capability": "code_analysis", "context": {"repository": "r_nope"}}'),
        ("POST", "/missions", b'{"goal": "x", "surprise": 1}'),
        ("PUT", "/memory/bad%20ns/k", b'{"value": 1}'),
        ("PUT", "/memory/notes/k", b'{"nope": 1}'),
        ("GET", "/missions?limit=0", None),
        ("GET", "/metrics/missions?capability=nope", None),
    ],
)
def test_malformed_requests_get_a_4xx_and_leave_no_trace(server, method, path, raw):
    user = Client(server, "mallory")
    status, body = user.call(method, path, raw=raw)
    assert 400 <= status < 500, (status, body)
    assert body and (body.get("message") or body.get("detail"))
    assert missions_of(user) == []
    assert user.call("GET", "/memory/notes")[1]["items"] == []


def test_classify_over_http(server, alice):
    status, found = alice.call("POST", "/classify", {"goal": "Where is max_agent_hops enforced in this repository?"})
    assert status == 200 and found["capability"] == "code_analysis" and found["level"] == 1, found
    assert found["analysis"]["subgoals"] >= 1 and found["source"] == "offline"
    status, _ = alice.call("POST", "/classify", {"goal": ""})
    assert status == 422


def test_email_notices_are_opted_into_on_the_emulations_topic(server, alice):
    status, settings = alice.call("PUT", "/me/notifications", {"email": "alice@example.org"})
    assert status == 200 and settings["email"] == "alice@example.org", settings
    assert alice.call("GET", "/me/notifications")[1]["email"] == "alice@example.org"
    assert alice.call("PUT", "/me/notifications", {"email": "nope"})[0] == 422
    assert alice.call("DELETE", "/me/notifications")[0] == 204
    assert alice.call("GET", "/me/notifications")[1] == {"email": None, "status": "off"}
