"""The CLI's mission commands against an API, as a user runs them: a real `missions` process, the
dev server (the deployed API's handlers over the emulation) on a free port, dev tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_dev_server import Client, wait_for

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[3]
VAGUE = "help"  # too vague to search: the mission asks which code to look at


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    repo = tmp_path_factory.mktemp("shop")
    (repo / "tax.py").write_text('def compute_tax(amount, rate=0.2):\n    """Tax owed."""\n    return amount * rate\n')
    cloud = LocalCloud(["code_analysis"], settings={"repo_roots": [str(repo)]})
    with cloud, DevServer(cloud, port=0) as dev:
        yield dev


def missions(
    server: DevServer,
    *args: str,
    user: str = "alice",
    stdin: str | None = None,
    api: bool = True,
    url: str | None = None,
    token: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_", "MISSIONS_"))}
    env["MISSIONS_CONFIG_DIR"] = "/nonexistent/missions-config"  # no cached token is read
    where = ["--api-url", url or server.url, "--token", token or f"dev:{user}"] if api else []
    return subprocess.run(
        [sys.executable, "-m", "missions.cli", *args, *where],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_error(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert text in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def start_waiting_mission(server: DevServer, user: str) -> tuple[str, dict[str, Any]]:
    client = Client(server, user)
    status, created = client.call("POST", "/missions", {"capability": "code_analysis", "goal": VAGUE})
    assert status == 202, created
    return created["mission_id"], wait_for(client, created["mission_id"], {"interrupted"})


def test_run_on_the_api_answers_the_question_from_answer_and_prints_json(server: DevServer):
    # When alice runs a vague mission on the API, answering its question with --answer
    result = missions(server, "run", "code_analysis", VAGUE, "--answer", "the compute_tax function", "--json")
    # Then it ran there, resumed with her answer and completed with a cited answer
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "completed" and outcome["terminal_reason"] == "completed"
    assert outcome["api_url"] == server.url and "tax.py:1" in outcome["citations"]
    assert outcome["stages"][:3] == ["perception", "intent", "intent"] and outcome["stages"][-1] == "integration"
    _, mission = Client(server, "alice").call("GET", f"/missions/{outcome['mission_id']}")
    assert mission["result"]["answer"] == outcome["answer"] and "compute_tax" in outcome["answer"]


def test_run_on_the_api_asks_in_the_terminal_and_shows_progress(server: DevServer):
    # When the question is answered on the terminal
    result = missions(server, "run", "code_analysis", VAGUE, stdin="the compute_tax function\n")
    # Then the stages, the question, the resumption and the answer were shown
    assert result.returncode == 0, result.stderr
    assert "Which function" in result.stderr  # the prompt
    for shown in ("▶ perception", "⏸ waiting for you", "▶ resumed", "code.find_symbol", "tax.py:1", "completed"):
        assert shown in result.stdout, shown


def test_list_status_answer_and_cancel(server: DevServer):
    # Given two of carol's missions waiting for her
    answered_id, waiting = start_waiting_mission(server, "carol")
    cancelled_id, _ = start_waiting_mission(server, "carol")
    interrupt_id = waiting["pending_interrupt"]["interrupt_id"]
    # Then list shows both, newest first, and status shows the question and how to answer it
    listed = missions(server, "list", "--json", user="carol")
    assert [m["mission_id"] for m in json.loads(listed.stdout)["missions"]] == [cancelled_id, answered_id]
    shown = missions(server, "status", answered_id, user="carol")
    assert shown.returncode == 0, shown.stderr
    assert "asks: Which function" in shown.stdout
    assert f"missions answer {answered_id} {interrupt_id}" in shown.stdout
    # When she answers one and cancels the other
    answered = missions(server, "answer", answered_id, interrupt_id, "the compute_tax function", user="carol")
    cancelled = missions(server, "cancel", cancelled_id, user="carol")
    # Then the first completes with her answer, the second is cancelled
    assert answered.returncode == 0 and f"answered {interrupt_id}" in answered.stdout, answered.stderr
    assert cancelled.returncode == 0 and f"cancelled {cancelled_id}" in cancelled.stdout, cancelled.stderr
    assert wait_for(Client(server, "carol"), answered_id, {"completed"})["terminal_reason"] == "completed"
    done = json.loads(missions(server, "status", answered_id, "--json", user="carol").stdout)
    assert "compute_tax" in done["result"]["answer"]
    only = json.loads(missions(server, "list", "--status", "cancelled", "--json", user="carol").stdout)
    assert [m["mission_id"] for m in only["missions"]] == [cancelled_id]
    # and doing either again is a one-line error from the API
    one_line_error(missions(server, "cancel", cancelled_id, user="carol"), f"HTTP 409: mission {cancelled_id} already")
    again = missions(server, "answer", answered_id, interrupt_id, "again", user="carol")
    one_line_error(again, f"HTTP 409: interrupt {interrupt_id} is already answered")


def test_errors_are_one_line_and_bad_input_starts_nothing(server: DevServer):
    mission_id, _ = start_waiting_mission(server, "dave")
    before = Client(server, "dave").call("GET", "/missions")[1]["missions"]
    # another user's mission is not there for her
    one_line_error(missions(server, "status", mission_id, user="erin"), "HTTP 404")
    one_line_error(missions(server, "cancel", mission_id, user="erin"), "HTTP 404")
    # a token the API does not take
    one_line_error(missions(server, "list", token="not-a-dev-token"), "HTTP 401: no authenticated user")
    # a budget the API refuses names the field
    one_line_error(
        missions(server, "run", "code_analysis", "Where is compute_tax?", "--max-cost-usd", "0", user="dave"),
        "HTTP 422",
    )
    # options that only the emulation has, an empty goal, a repository id without an API
    one_line_error(missions(server, "run", "code_analysis", "x", "--max-agent-hops", "4", user="dave"), "only on")
    one_line_error(missions(server, "run", "code_analysis", "  ", user="dave"), "the goal is empty")
    one_line_error(missions(server, "run", "code_analysis", "x", "--repository", "r_1", api=False), "--api-url")
    # a question that cannot be answered without a terminal: with --json, one document with the question and
    # the command that answers it (the mission waits), exit code 3
    waiting = missions(server, "run", "code_analysis", VAGUE, "--json", user="frank")
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    document = json.loads(waiting.stdout)
    assert document["outcome"] == "waiting" and document["question"]["text"]
    assert document["answer_with"].startswith(f"missions answer {document['mission_id']} ")
    assert Client(server, "frank").call("GET", f"/missions/{document['mission_id']}")[1]["status"] == "interrupted"
    # an API that is not there
    one_line_error(missions(server, "list", url="http://127.0.0.1:9", user="dave"), "cannot reach")
    # and none of it started or changed one of dave's missions
    time.sleep(0.2)
    assert Client(server, "dave").call("GET", "/missions")[1]["missions"] == before


def test_history_shows_the_checkpoints_and_a_state_and_fork_carries_on_from_one(server: DevServer):
    # Given erin's mission waiting for her answer
    mission_id, _ = start_waiting_mission(server, "erin")
    listed = Client(server, "erin").call("GET", f"/missions/{mission_id}/checkpoints")[1]["checkpoints"]
    first = listed[0]["checkpoint_id"]
    # When she lists its history, reads the state at its first checkpoint and forks from there
    shown = missions(server, "history", mission_id, user="erin")
    state = missions(server, "history", mission_id, first, user="erin")
    forked = missions(server, "fork", mission_id, "--at", first, user="erin")
    # Then each checkpoint is a line with its stage runs, the state is the API's, and the fork runs on
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[0] for line in shown.stdout.splitlines()] == [c["checkpoint_id"] for c in listed]
    assert "perception (ok)" in shown.stdout.splitlines()[0]
    assert state.returncode == 0, state.stderr
    read = json.loads(state.stdout)
    assert read["checkpoint_id"] == first and read["state"]["mission_id"] == mission_id and read["next_stage"]
    assert forked.returncode == 0, forked.stderr
    fork_id = forked.stdout.split(": ")[1].split()[0]
    assert forked.stdout.startswith(f"forked {mission_id} at {first}: ") and fork_id != mission_id
    assert wait_for(Client(server, "erin"), fork_id, {"interrupted"})["pending_interrupt"]["kind"] == "clarification"
    # and a checkpoint that is not there is a one-line error; another user's mission is not there for her
    one_line_error(missions(server, "history", mission_id, "nope", user="erin"), "HTTP 404: no checkpoint nope")
    one_line_error(missions(server, "fork", mission_id, "--at", first, user="frank"), "HTTP 404")


def test_fork_sets_the_goal_and_context_and_runs_from_the_stage_named(server: DevServer):
    # Given erin's mission waiting for her answer, and its first checkpoint
    mission_id, _ = start_waiting_mission(server, "erin")
    erin = Client(server, "erin")
    first = erin.call("GET", f"/missions/{mission_id}/checkpoints")[1]["checkpoints"][0]
    before = len(erin.call("GET", "/missions")[1]["missions"])
    # When she forks it with a new goal and a context key, running its first stage again
    goal = "Where is compute_tax defined?"
    forked = missions(
        server,
        "fork",
        mission_id,
        "--at",
        first["checkpoint_id"],
        "--set",
        f"goal={goal}",
        "--set",
        "context.depth=2",
        "--from",
        first["stage"],
        user="erin",
    )
    # Then the fork has that goal, its record says what it came from and how it was changed
    assert forked.returncode == 0, forked.stderr
    fork = erin.call("GET", f"/missions/{forked.stdout.split(': ')[1].split()[0]}")[1]
    assert fork["goal"] == goal
    assert fork["forked_from"]["edit"] == {"goal": goal, "context": {"depth": 2}, "resume_from": first["stage"]}
    # and a --set that fits no path, or a stage the pipeline lacks, is one line and starts nothing
    one_line_error(
        missions(server, "fork", mission_id, "--at", first["checkpoint_id"], "--set", "budget=3", user="erin"),
        "a fork can set goal, context.KEY or outputs.STAGE.KEY, not 'budget'",
    )
    one_line_error(
        missions(server, "fork", mission_id, "--at", first["checkpoint_id"], "--from", "nowhere", user="erin"),
        "no stage 'nowhere'",
    )
    assert len(erin.call("GET", "/missions")[1]["missions"]) == before + 1
