"""shopping and dining as a user drives them: the `missions` CLI in a real process, and the HTTP API
of the dev server (choice, feedback, and the learning loop: feedback on one dining mission changes
what the next one offers)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[3]
SHOPPING_GOAL = "Find the best price for Sony WH-1000XM5 headphones"
DINING_GOAL = "Find an Italian restaurant for a weeknight dinner for 2"
FEEDBACK = "great but too expensive for a weeknight, and I want more vegetarian options"


# =========================================================================== the CLI


def missions(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "missions.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_runs_a_shopping_mission_and_answers_the_choice_by_id() -> None:
    # When the user runs a shopping mission and answers its choice with a seller's id
    result = missions("run", "shopping", SHOPPING_GOAL, "--answer", "amazon", "--json")
    # Then it completes with that offer, in three stages and at most two LLM calls
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "SUCCEEDED" and outcome["terminal_reason"] == "completed"
    assert outcome["answer"].startswith("You chose Amazon: $349.00")
    assert outcome["stages"] == ["execute", "present", "complete"]
    assert outcome["counters"]["llm_calls"] <= 2 and outcome["errors"] == []


def test_a_scripted_answer_that_is_none_of_the_options_is_refused_with_them_as_json() -> None:
    # When the user's script answers the choice with something that is not an offer
    result = missions("run", "shopping", SHOPPING_GOAL, "--answer", "the blue one", "--json")
    # Then nothing is sent: one JSON document lists the options, exit code 4
    assert result.returncode == 4, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["outcome"] == "answer_refused" and document["answer"] == "the blue one"
    assert "amazon" in document["options"] and document["question"]


def test_cli_runs_a_dining_mission_and_answers_the_choice_by_number() -> None:
    # When the user runs a dining mission without --json and picks the second option by its number
    result = missions("run", "dining", DINING_GOAL, "--answer", "2")
    # Then the progress shows the parallel sources and the question, and the summary the choice
    assert result.returncode == 0, result.stderr
    for text in ("▶ plan", "dining.maps", "dining.reviews", "dining.reservations", "Which restaurant", "completed"):
        assert text in result.stdout, text
    assert "You chose Osteria Roma" in result.stdout
    # And the summary counts three LLM calls
    assert re.search(r"LLM calls\s+3\s", result.stdout), result.stdout


# =========================================================================== the HTTP API


@pytest.fixture(scope="module")
def server():
    with LocalCloud(["shopping", "dining"]) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


class Client:
    def __init__(self, server: DevServer, user: str):
        self.server, self.user = server, user

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json", "Authorization": f"Bearer dev:{self.user}"}
        request = urllib.request.Request(self.server.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            return exc.code, json.loads(text) if text else None

    def wait_for(self, mission_id: str, statuses: set[str], timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, mission = self.call("GET", f"/missions/{mission_id}")
            assert status == 200, mission
            if mission["status"] in statuses:
                return mission
            time.sleep(0.05)
        raise AssertionError(f"mission {mission_id} never reached {statuses}: {mission}")

    def start(self, goal: str, capability: str, **context: Any) -> tuple[str, dict[str, Any]]:
        """Create a mission and wait for its choice: (mission id, pending interrupt)."""
        body = {"goal": goal, "capability": capability, "context": context}
        status, created = self.call("POST", "/missions", body)
        assert status == 202, created
        mission = self.wait_for(created["mission_id"], {"interrupted", "completed", "failed"})
        assert mission["status"] == "interrupted", mission
        return created["mission_id"], mission["pending_interrupt"]

    def choose(self, mission_id: str, interrupt: dict[str, Any], decision: str) -> dict[str, Any]:
        path = f"/missions/{mission_id}/interrupts/{interrupt['interrupt_id']}"
        status, body = self.call("POST", path, {"decision": decision})
        assert status == 200, body
        done = self.wait_for(mission_id, {"completed", "failed"})
        assert done["status"] == "completed" and done["terminal_reason"] == "completed", done
        return done


def test_shopping_over_http_choice_and_feedback(server: DevServer) -> None:
    alice = Client(server, "alice")
    # Given a shopping goal sent without naming a capability (its keywords pick shopping)
    status, created = alice.call("POST", "/missions", {"goal": SHOPPING_GOAL})
    assert status == 202 and created["capability"] == "shopping", created
    mission = alice.wait_for(created["mission_id"], {"interrupted"})
    pending = mission["pending_interrupt"]
    assert pending["kind"] == "choice" and pending["options"] == ["soundsaver", "bh", "amazon", "none"]
    # When the user answers with something not offered, then with a real option
    path = f"/missions/{created['mission_id']}/interrupts/{pending['interrupt_id']}"
    assert alice.call("POST", path, {"decision": "walmart"})[0] == 422
    assert alice.call("POST", path, {"text": "the cheapest"})[0] == 422
    done = alice.choose(created["mission_id"], pending, "bh")
    # Then the result holds the chosen offer, and the mission stayed within two LLM calls
    assert done["result"]["output"]["chosen"]["seller"] == "B&H Photo"
    assert done["result"]["answer"].startswith("You chose B&H Photo: $339.00")
    assert done["counters"]["llm_calls"] <= 2
    # When the user rates it
    status, rated = alice.call(
        "POST", f"/missions/{created['mission_id']}/feedback", {"completed": True, "quality": 5, "text": "Perfect"}
    )
    assert status == 200, rated
    # Then her metrics count it
    status, metrics = alice.call("GET", "/metrics/missions?capability=shopping&days=7")
    assert status == 200, metrics
    assert metrics["rating_count"] >= 1 and metrics["by_status"]["completed"] >= 1


def test_dining_learning_loop_feedback_changes_the_next_weeknight_search(server: DevServer) -> None:
    carol = Client(server, "carol")
    # Given a first weeknight dining mission, with no preferences stored yet
    first_id, first_choice = carol.start(DINING_GOAL, "dining")
    first = carol.choose(first_id, first_choice, first_choice["options"][0])["result"]["output"]
    assert first["applied_preferences"] == [] and first["criteria"]["max_price_per_person"] == 60

    # When the user says it was great but too expensive for a weeknight, and wants more vegetarian options
    status, rated = carol.call(
        "POST", f"/missions/{first_id}/feedback", {"completed": True, "quality": 4, "text": FEEDBACK}
    )
    assert status == 200, rated
    # Then both preferences are stored in their long-term memory
    assert set(rated["preferences_written"]) >= {"weeknight_budget", "likes"}
    status, stored = carol.call("GET", "/memory/user_preferences:carol")
    assert status == 200, stored
    values = {item["key"]: item["value"]["value"] for item in stored["items"]}
    assert values["weeknight_budget"] == "lower" and "vegetarian" in values["likes"]

    # When the next weeknight dining mission runs
    second_id, second_choice = carol.start(DINING_GOAL, "dining")
    second = carol.choose(second_id, second_choice, second_choice["options"][0])["result"]["output"]

    # Then its planner lowered the price ceiling and prefers vegetarian options, and says so
    assert second["criteria"]["max_price_per_person"] < first["criteria"]["max_price_per_person"]
    assert second["criteria"]["dietary_preferred"] == ["vegetarian"]
    applied = [line.split(":")[0] for line in second["applied_preferences"]]
    assert applied == ["weeknight_budget=lower", "likes vegetarian"]
    # And every option it offered fits them, so the options differ from the first mission's
    ceiling = second["criteria"]["max_price_per_person"]
    assert all(o["price_per_person"] <= ceiling and "vegetarian" in o["dietary"] for o in second["options"])
    assert any(o["price_per_person"] > ceiling or "vegetarian" not in o["dietary"] for o in first["options"])
    assert {o["id"] for o in second["options"]} != {o["id"] for o in first["options"]}
    assert second_choice["options"] != first_choice["options"]


def test_dining_over_http_reports_a_failed_source_and_still_offers_the_others(server: DevServer) -> None:
    dave = Client(server, "dave")
    # Given the reviews service down for longer than the retries last
    mission_id, choice = dave.start(DINING_GOAL, "dining", simulate_failures={"reviews": 9})
    # When the user still chooses among what the other sources found
    done = dave.choose(mission_id, choice, choice["options"][0])
    # Then the result names the failed source and its attempts
    output = done["result"]["output"]
    assert output["failed_sources"] == ["reviews"] and "reviews (failed after 3 attempts" in done["result"]["answer"]
    assert next(s for s in output["sources"] if s["source"] == "reviews")["attempts"] == 3
    assert 3 <= done["counters"]["llm_calls"] <= 5
