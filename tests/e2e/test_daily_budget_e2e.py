"""A user's daily budget on the dev server, with the offline model priced so that every stage spends: a
mission that reaches the budget ends through its final stage with `user_budget`, the next one is held
(queued with the reason) and shows so on GET /me and the mission, and the dev server's clock moving past
midnight (UTC) starts it; over the HTTP API as a client sees it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_dev_server import Client, all_events, wait_for
from tests.integration.conftest import with_capabilities
from tests.support.spending import SPENDS

pytestmark = pytest.mark.e2e
ENDED = {"completed", "failed"}
PRICE = [2000.0, 2000.0]  # USD per million tokens of the offline model: a stage's call costs cents


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    names, known = with_capabilities(SPENDS)
    settings = {"operators": ["ops"], "openai_prices": {"scripted": PRICE}}
    with (
        LocalCloud([*names, "shopping"], registry=known, prefix="budget-e2e", settings=settings) as cloud,
        DevServer(cloud, port=0) as dev,
    ):
        yield dev


def run(client: Client, goal: str) -> dict:
    status, created = client.call("POST", "/missions", {"capability": SPENDS.name, "goal": goal})
    assert status == 202, created
    return created


def test_a_user_at_their_budget_is_stopped_held_and_started_again_the_next_day(server: DevServer):
    ann, ops = Client(server, "ann"), Client(server, "ops")
    # Given a first mission of ann's, with no budget yet: it runs to its end, and what it cost is known
    first = wait_for(ann, run(ann, "a first essay")["mission_id"], ENDED)
    assert first["terminal_reason"] == "completed" and first["cost_usd"] > 0, first
    cost = first["cost_usd"]
    # When an operator gives her a budget of one and a half such missions
    status, budget = ops.call("PUT", "/users/ann/budget", {"daily_budget_usd": round(cost * 1.5, 8)})
    assert status == 200 and budget["reached"] is False, budget
    # Then her second mission starts, and ends through its final stage when a stage's call reaches the budget
    second = wait_for(ann, run(ann, "a second essay")["mission_id"], ENDED)
    assert (second["status"], second["terminal_reason"]) == ("completed", "user_budget"), second
    assert second["counters"]["agent_hops"] < first["counters"]["agent_hops"]
    reached = [e for e in all_events(ann, second["mission_id"]) if e["type"] == "orchestrator.bound_reached"]
    assert [e["payload"]["reason"] for e in reached] == ["user_budget"]
    # and GET /me says her budget is spent
    me = ann.call("GET", "/me")[1]["budget"]
    assert me["reached"] is True and me["spent_usd"] >= me["daily_budget_usd"], me
    # When she asks for a third, it is held: queued with the reason, and an event says why
    created = run(ann, "a third essay")
    assert (created["status"], created.get("held")) == ("queued", "budget"), created
    third = ann.call("GET", f"/missions/{created['mission_id']}")[1]
    assert third["status"] == "queued" and third["queue"]["held"] == "budget", third
    queued = [e for e in all_events(ann, created["mission_id"]) if e["type"] == "mission.queued"]
    assert [e["payload"]["reason"] for e in queued] == ["budget"]
    # and bob, whose budget is not spent, is not held
    bob = Client(server, "bob")
    assert wait_for(bob, run(bob, "bob's essay")["mission_id"], ENDED)["terminal_reason"] == "completed"
    # When the dev server's clock moves past midnight, UTC
    status, clock = Client(server, None).call("POST", "/_dev/clock", {"advance_seconds": 24 * 3600})
    assert status == 200, clock
    released = [f for f in clock["fired"] if f["schedule"] == "reconcile"]
    assert released and released[0]["result"]["held_started"] == [created["mission_id"]], clock
    # Then her third mission runs, on a budget given afresh
    done = wait_for(ann, created["mission_id"], ENDED)
    assert done["terminal_reason"] == "completed", done
    assert ann.call("GET", "/me")[1]["budget"]["spent_usd"] == pytest.approx(done["cost_usd"], abs=1e-6)


def test_the_cli_shows_the_day_and_an_operator_sets_a_budget_that_holds_then_starts_a_mission(server: DevServer):
    from tests.e2e.cli.test_cli_remote import missions, one_line_error

    # Given cy, with no daily budget: the CLI says so
    shown = missions(server, "budget", user="cy")
    assert shown.returncode == 0 and "no daily budget" in shown.stdout, shown.stderr
    # When cy tries to set his own, he is refused on one line
    one_line_error(missions(server, "budget", "cy", "--set", "5", user="cy"), "operators")
    # When an operator gives him nothing to spend
    zero = missions(server, "budget", "cy", "--set", "0", user="ops")
    assert zero.returncode == 0 and "cy: spent $0.0000 of $0.0000" in zero.stdout, zero.stderr
    assert "the budget is spent" in zero.stdout
    # Then his next mission is held
    created = run(Client(server, "cy"), "an essay")
    assert created.get("held") == "budget", created
    # When the operator raises it, the CLI says the held mission started, and it runs
    raised = missions(server, "budget", "cy", "--set", "10", user="ops")
    assert raised.returncode == 0 and f"started 1 held missions: {created['mission_id']}" in raised.stdout, raised
    assert wait_for(Client(server, "cy"), created["mission_id"], ENDED)["terminal_reason"] == "completed"
    mine = missions(server, "budget", user="cy")
    assert mine.returncode == 0 and "of $10.0000" in mine.stdout and "left" in mine.stdout, mine.stderr


def test_the_flow_control_page_runs_as_written(server: DevServer, tmp_path):
    import subprocess

    from tests.e2e.test_docs_examples import environment, run_cli
    from tests.support.docs import sh_blocks

    http, cli = sh_blocks("docs/flow-control.md", "## Daily budgets")
    setup, commands = http[0], http[1:]
    answers = []
    for command in commands:
        command = command.replace("localhost:8787", server.url.removeprefix("http://"))
        result = subprocess.run(
            ["bash", "-c", f"{setup}; {command} -w '\\n%{{http_code}}'"], capture_output=True, text=True, timeout=60
        )
        body, _, status = result.stdout.rpartition("\n")
        answers.append((int(status), json.loads(body)))
    # alice reads her day, is given nothing, is refused once, held once, and the raise starts the held one
    assert [status for status, _ in answers] == [200, 200, 429, 202, 200], answers
    assert answers[0][1]["budget"]["daily_budget_usd"] is None and answers[1][1]["reached"] is True
    assert "daily budget is spent" in answers[2][1]["message"]
    held = answers[3][1]
    assert held["held"] == "budget" and answers[4][1]["started"] == [held["mission_id"]], answers
    # and the CLI lines say the day, then set it
    env = environment(MISSIONS_API_URL=server.url, MISSIONS_CONFIG_DIR=str(tmp_path / "config"))
    assert "alice" not in run_cli(cli[0], {}, tmp_path, env) and "of $2.0000" in run_cli(cli[0], {}, tmp_path, env)
    assert "alice: spent" in run_cli(cli[1], {}, tmp_path, env) and "of $5.0000" in run_cli(cli[0], {}, tmp_path, env)


def test_the_chat_says_a_message_is_held_for_the_budget_and_answers_once_it_is_raised(server: DevServer):
    from tests.e2e.test_chat_e2e import chat

    # Given dee, whose budget an operator set to nothing
    assert Client(server, "ops").call("PUT", "/users/dee/budget", {"daily_budget_usd": 0})[0] == 200
    client = chat(server, "dee")
    # When she asks through the chat (OpenAI's SDK), the reply says at once why nothing started
    reply = client.chat.completions.create(model=SPENDS.name, messages=[{"role": "user", "content": "an essay"}])
    content = reply.choices[0].message.content or ""
    assert content.startswith("Not started yet") and "daily budget is spent" in content, content
    conversation = (reply.model_extra or {})["conversation_id"]
    # When the operator raises it, her next message in the conversation gets the held one's answer first
    assert Client(server, "ops").call("PUT", "/users/dee/budget", {"daily_budget_usd": 10})[1]["started"]
    again = client.chat.completions.create(
        model=SPENDS.name,
        messages=[{"role": "user", "content": "another essay"}],
        extra_body={"conversation_id": conversation},
    )
    assert "thought through an essay" in (again.choices[0].message.content or ""), again
