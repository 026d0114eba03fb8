"""A user's daily budget on the dev server, with the offline model priced so that every stage spends: a
mission that reaches the budget ends through its final stage with `user_budget`, the next one is held
(queued with the reason) and shows so on GET /me and the mission, and the dev server's clock moving past
midnight (UTC) starts it; over the HTTP API as a client sees it."""

from __future__ import annotations

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
        LocalCloud(names, registry=known, prefix="budget-e2e", settings=settings) as cloud,
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
