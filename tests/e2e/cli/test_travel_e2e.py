"""The travel capability as a user drives it: the `missions` CLI answering each question in turn
(repeated --answer), and the HTTP API on the dev server (create, answer, read the drafts, approve)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud

ROOT = Path(__file__).resolve().parents[3]
GOAL = "Plan a 5-day Paris trip for May 2026, budget $3000, 2 travelers"
FEEDBACK = "too many museums, add a day trip"
pytestmark = pytest.mark.e2e


# =========================================================================== the CLI


def test_cli_answers_the_choice_then_two_reviews_and_prints_the_final_itinerary() -> None:
    # Given the CLI with three answers, used in order: the first flight (by number), a revision, approval
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_"))}
    answers = ["--answer", "1", "--answer", FEEDBACK, "--answer", "approve"]

    # When the user runs the mission
    result = subprocess.run(
        [sys.executable, "-m", "missions.cli", "run", "travel", GOAL, "--json", *answers],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )

    # Then it completed with the second draft, which has the day trip, as its answer
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "SUCCEEDED" and outcome["mission_status"] == "completed"
    assert outcome["terminal_reason"] == "completed", outcome["errors"]
    assert outcome["answer"].startswith("# 5 days in Paris (draft v2)") and "Day trip to Giverny" in outcome["answer"]
    # And each answer went where it belonged: one choice, two reviews, one replan between them
    assert outcome["stages"].count("choose") == 2 and outcome["stages"].count("review") == 4
    assert outcome["stages"].count("replan") == 1 and outcome["stages"][-1] == "complete"
    # And the dinners were handed to a dining sub-mission, which asked nothing: the run answered only the trip
    assert outcome["stages"].count("dinners") == 2 and "Dinner: " in outcome["answer"]
    assert outcome["counters"]["llm_calls"] <= 20


# =========================================================================== the HTTP API


@pytest.fixture(scope="module")
def server():
    with LocalCloud(["travel"]) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


def call(server: DevServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json", "Authorization": "Bearer dev:alice"}
    request = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def next_question(server: DevServer, mission_id: str, after: str | None = None, timeout: float = 60) -> dict[str, Any]:
    """The mission's pending interrupt, once it is a new one (not `after`, the one just answered)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, mission = call(server, "GET", f"/missions/{mission_id}")
        assert status == 200 and mission["status"] not in ("completed", "failed"), mission
        pending = mission["pending_interrupt"]
        if mission["status"] == "interrupted" and pending and pending["interrupt_id"] != after:
            return pending
        time.sleep(0.05)
    raise AssertionError(f"mission {mission_id} asked nothing new within {timeout}s")


def answer(server: DevServer, mission_id: str, question: dict[str, Any], body: dict[str, Any]) -> None:
    status, answered = call(server, "POST", f"/missions/{mission_id}/interrupts/{question['interrupt_id']}", body)
    assert status == 200, answered


def read(server: DevServer, mission_id: str, path: str, version: int | None = None) -> dict[str, Any]:
    query = urllib.parse.urlencode({"path": path, **({"version": version} if version else {})})
    status, found = call(server, "GET", f"/missions/{mission_id}/artifact?{query}")
    assert status == 200, found
    return found


def test_http_create_revise_read_both_drafts_approve(server: DevServer) -> None:
    # Given a travel mission created over the API
    status, created = call(server, "POST", "/missions", {"capability": "travel", "goal": GOAL})
    assert status == 202, created
    mission_id = created["mission_id"]

    # When the traveler picks a flight, then asks for a revision of the first draft
    choice = next_question(server, mission_id)
    assert choice["kind"] == "choice" and len(choice["options"]) == 2
    answer(server, mission_id, choice, {"decision": choice["options"][0]})
    review = next_question(server, mission_id, after=choice["interrupt_id"])
    assert review["kind"] == "agent_review" and "drafts/itinerary_v1" in review["question"]
    answer(server, mission_id, review, {"approved": False, "decision": "revise", "text": FEEDBACK})
    second = next_question(server, mission_id, after=review["interrupt_id"])
    assert "drafts/itinerary_v2" in second["question"]

    # Then the artifacts list the plan, research per coordinator and both drafts
    status, listed = call(server, "GET", f"/missions/{mission_id}/artifacts")
    assert status == 200
    found = {a["name"] for a in listed["artifacts"]}
    assert {"plan_v1", "research/flights_v1", "research/activities_v2", "drafts/itinerary_v1"} <= found
    assert "drafts/itinerary_v2" in found and "research/hotels_v2" not in found

    # And drafts/itinerary_v1 and _v2 read back, the second without the museums the traveler cut
    v1 = read(server, mission_id, "drafts/itinerary", 1)
    v2 = read(server, mission_id, "drafts/itinerary", 2)
    assert (v1["name"], v2["name"]) == ("drafts/itinerary_v1", "drafts/itinerary_v2")
    scheduled = [{i for day in v["content"]["days"] for i in day["items"]} for v in (v1, v2)]
    assert "par-orsay" in scheduled[0] and "par-orsay" not in scheduled[1]
    assert "par-giverny" in scheduled[1] and "removed Musée d'Orsay" in v2["content"]["changes"]
    assert read(server, mission_id, "drafts/itinerary")["version"] == 2  # no version: the latest

    # When the traveler approves the second draft
    answer(server, mission_id, second, {"approved": True})

    # Then the mission completes with the final itinerary and what it learned
    deadline = time.monotonic() + 60
    while (mission := call(server, "GET", f"/missions/{mission_id}")[1])["status"] != "completed":
        assert mission["status"] != "failed" and time.monotonic() < deadline, mission
        time.sleep(0.05)
    assert mission["terminal_reason"] == "completed" and mission["counters"]["llm_calls"] <= 20
    assert mission["result"]["answer"].startswith("# 5 days in Paris (draft v2)")
    assert mission["result"]["output"]["learnings"]["preferences"] == {"likes": ["day_trip"], "less_of": ["museum"]}
    final = read(server, mission_id, "final")
    assert final["content"]["status"] == "approved" and final["content"]["from"] == "drafts/itinerary_v2"

    # And the traveler's rating is recorded as feedback on the finished mission
    status, rated = call(server, "POST", f"/missions/{mission_id}/feedback", {"completed": True, "quality": 5})
    assert status == 200, rated
