"""Agents as data on `missions dev`: a prompt promoted over the API changes the next mission's prompt with no
redeploy, a rollback restores it, a mission started before the promotion keeps its version, and every model
call is listed per mission (the real handlers, moto's Step Functions, HTTP)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from missions.adapters.llm.scripted import ScriptedProvider
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMRequest, LLMResult
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_dev_server import Client

pytestmark = pytest.mark.e2e
FITNESS = "fitness_coach"
GOAL = "I'm a beginner with dumbbells at home, 3 days a week: help me get stronger."
ASSESS = f"/agents/{FITNESS}/assess"
NEW_PROMPT = "You take a coaching intake for {{capability}} (version two)."


class Recording:
    """The offline model, remembering the system prompt each mission's assess stage sent."""

    name = "scripted"

    def __init__(self) -> None:
        self._scripted = ScriptedProvider(registry.load(FITNESS).offline_policy)
        self.prompts: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResult:
        if request.stage == "assess":
            with self._lock:
                self.prompts.setdefault(request.envelope.mission_id, []).append(request.messages[0]["content"])
        return self._scripted.complete(request)


@pytest.fixture(scope="module")
def dev():
    model = Recording()
    cloud = LocalCloud([FITNESS], llm=model, settings={"operators": ["ops"]})
    with cloud, DevServer(cloud, port=0) as server:
        server.model = model  # type: ignore[attr-defined]
        yield server


def wait_for(client: Client, mission_id: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status, mission = client.call("GET", f"/missions/{mission_id}")
        assert status == 200, mission
        if mission["status"] in statuses:
            return mission
        assert time.monotonic() < deadline, mission
        time.sleep(0.1)


def start(client: Client) -> str:
    status, accepted = client.call("POST", "/missions", {"capability": FITNESS, "goal": GOAL})
    assert status == 202, accepted
    return str(accepted["mission_id"])


def answer(client: Client, mission_id: str, body: dict[str, Any]) -> None:
    mission = wait_for(client, mission_id, "interrupted")
    interrupt = mission["pending_interrupt"]["interrupt_id"]
    status, taken = client.call("POST", f"/missions/{mission_id}/interrupts/{interrupt}", body)
    assert status in (200, 202), taken


def test_a_promoted_prompt_runs_the_next_mission_and_a_rollback_restores_it(dev):
    alice, ops = Client(dev, "alice"), Client(dev, "ops")
    shipped = registry.load(FITNESS).prompts["assess"]
    # Given a mission that started (and asked its question) before anything was promoted
    before = start(alice)
    wait_for(alice, before, "interrupted")
    # When an operator creates and promotes a new assess prompt over the API (alice may not)
    assert alice.call("POST", f"{ASSESS}/versions", {"prompt": NEW_PROMPT})[0] == 403
    status, created = ops.call("POST", f"{ASSESS}/versions", {"prompt": NEW_PROMPT, "note": "shorter"})
    assert status == 201, created
    assert ops.call("POST", f"{ASSESS}/promote", {"version": created["version"]})[0] == 200
    # Then the next mission's assess stage sends the new prompt, with no redeploy
    after = start(alice)
    wait_for(alice, after, "interrupted")
    assert dev.model.prompts[after] == ["You take a coaching intake for fitness_coach (version two)."]
    # And the mission started before it keeps its version when it goes back to assess after the promotion
    answer(alice, before, {"decision": "adjust", "text": "4 days a week"})
    answer(alice, before, {"approved": True})
    ended = wait_for(alice, before, "completed")
    assert dev.model.prompts[before] == [shipped, shipped]
    assert ended["result"]["agent_versions"]["assess"] == 1
    # When the operator rolls back / Then the mission after that sends the shipped prompt again
    assert ops.call("POST", f"{ASSESS}/rollback")[1]["active"] == 1
    later = start(alice)
    wait_for(alice, later, "interrupted")
    assert dev.model.prompts[later] == [shipped]
    # And every model call of a mission is listed with the version it ran
    status, usage = alice.call("GET", f"/missions/{before}/usage")
    assert status == 200
    calls = [(c["agent"], c["version"], c["outcome"]) for c in usage["calls"]]
    assert calls.count(("assess", 1, "ok")) == 2 and len(calls) == 6  # assess, workout, nutrition: twice
    assert all(c["provider"] == "scripted" for c in usage["calls"])
    status, events = alice.call("GET", f"/missions/{after}/events")
    started = [e for e in events["events"] if e["type"] == "agent_started" and e["stage"] == "assess"]
    assert started and started[0]["payload"]["config_version"] == created["version"]


def test_the_cli_changes_and_shows_agents_over_the_api(dev):
    # Given the CLI pointed at the dev server
    from tests.e2e.cli.test_cli_remote import missions, one_line_error

    # When a user who is no operator creates a version / Then one line says why, exit 2
    one_line_error(missions(dev, "agents", "create", FITNESS, "workout", "--temperature", "0.2", user="bob"), "403")
    # When an operator creates, promotes and diffs one
    created = missions(
        dev, "agents", "create", FITNESS, "workout", "--temperature", "0.2", "--note", "calmer", user="ops"
    )
    assert created.returncode == 0 and "created fitness_coach/workout v2" in created.stdout, created.stderr
    promoted = missions(dev, "agents", "promote", FITNESS, "workout", "2", user="ops")
    assert promoted.returncode == 0 and "v2 active" in promoted.stdout, promoted.stderr
    diff = missions(dev, "agents", "diff", FITNESS, "workout", "1", "2")
    assert "temperature: None -> 0.2" in diff.stdout, diff.stderr
    # Then the listing and the audit trail show it
    listing = missions(dev, "agents", "list", FITNESS)
    assert any(line.startswith("workout") and "v2 active" in line for line in listing.stdout.splitlines())
    audit = missions(dev, "agents", "audit", FITNESS, "workout")
    assert [line.split()[2] for line in audit.stdout.splitlines()[:3]] == ["promote", "create", "seed"], audit.stdout
    # and a tool the stage does not declare is refused in one line
    one_line_error(missions(dev, "agents", "create", FITNESS, "workout", "--tools", "fs.write", user="ops"), "422")
