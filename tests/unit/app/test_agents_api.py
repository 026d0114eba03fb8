"""Agents as data over the HTTP API (in-memory adapters): operators write, everyone reads, a promotion
reaches the next mission with no deploy, a mission names its model, and every model call is listed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from missions.adapters.memory.agents import InMemoryUsageStore
from missions.app.runtime import Runtime
from missions.core.cost.usage import UsageRecord
from missions.ports.agents import count_ended_mission
from tests.support.api import call
from tests.support.fakes import memory_runtime

FITNESS = "fitness_coach"
GOAL = "I'm a beginner with dumbbells at home: help me get stronger."
ASSESS = f"/agents/{FITNESS}/assess"


@pytest.fixture()
def runtime() -> Runtime:
    return memory_runtime(operators=["ops"], openai_models={"assess": "gpt-4.1"})


def started_envelope(runtime: Runtime, mission_id: str) -> dict[str, Any]:
    checkpoint = runtime.checkpoints.get(mission_id, "0001-start")
    return runtime.codec.decode(checkpoint.envelope).model_dump()  # type: ignore[arg-type]


def start(runtime: Runtime, user: str = "ann", **fields: Any) -> tuple[int, Any]:
    return call(runtime, "POST", "/missions", {"capability": FITNESS, "goal": GOAL, **fields}, user=user)


def test_only_operators_write_and_a_refused_write_stores_nothing(runtime):
    # Given ann, who is no operator / When she creates a version / Then 403, and the agent is as shipped
    status, body = call(runtime, "POST", f"{ASSESS}/versions", {"prompt": "x"}, user="ann")
    assert status == 403 and "operators" in body["message"]
    status, body = call(runtime, "POST", f"{ASSESS}/promote", {"version": 1}, user="ann")
    assert status == 403
    status, agent = call(runtime, "GET", ASSESS, user="ann")
    assert status == 200 and (agent["active"], agent["latest"], len(agent["versions"])) == (1, 1, 1)
    # When an operator asks for a version the stage cannot run / Then 422 with the reason, and nothing stored
    status, body = call(runtime, "POST", f"{ASSESS}/versions", {"tools": ["fs.write"]}, user="ops")
    assert status == 422 and "not tools stage 'assess' declares" in body["message"]
    status, body = call(runtime, "POST", f"{ASSESS}/versions", {"model": "unpriced-9000"}, user="ops")
    assert status == 422 and "no price" in body["message"]
    assert call(runtime, "GET", ASSESS, user="ops")[1]["latest"] == 1
    # and unknown agents or capabilities are 404
    assert call(runtime, "GET", f"/agents/{FITNESS}/nobody", user="ops")[0] == 404
    assert call(runtime, "GET", "/agents/no_such_capability", user="ops")[0] == 404


def test_a_promotion_reaches_the_next_mission_and_a_rollback_restores_it(runtime):
    # Given a mission started on the shipped configuration
    status, before = start(runtime)
    assert status == 202 and started_envelope(runtime, before["mission_id"])["agents"]["assess"] == 1
    # When an operator creates and promotes a new assess prompt over the API
    status, created = call(runtime, "POST", f"{ASSESS}/versions", {"prompt": "Assess for {{capability}}."}, user="ops")
    assert status == 201 and created["version"] == 2 and created["created_by"] == "ops"
    status, state = call(runtime, "POST", f"{ASSESS}/promote", {"version": 2}, user="ops")
    assert status == 200 and (state["active"], state["history"]) == (2, [1])
    # Then the next mission pins version 2, and the one before keeps version 1
    _, after = start(runtime)
    assert started_envelope(runtime, after["mission_id"])["agents"]["assess"] == 2
    assert started_envelope(runtime, before["mission_id"])["agents"]["assess"] == 1
    # When the operator rolls back / Then the mission after that pins version 1 again
    status, state = call(runtime, "POST", f"{ASSESS}/rollback", user="ops")
    assert status == 200 and state["active"] == 1
    _, later = start(runtime)
    assert started_envelope(runtime, later["mission_id"])["agents"]["assess"] == 1
    # And the diff and the audit trail say what happened, and who did it
    status, diff = call(runtime, "GET", f"{ASSESS}/diff?from=1&to=2", user="ann")
    assert status == 200 and diff["changes"]["prompt"]["to"] == "Assess for {{capability}}."
    status, trail = call(runtime, "GET", f"{ASSESS}/audit", user="ann")
    assert [(e["action"], e["actor"]) for e in trail["entries"]] == [
        ("rollback", "ops"),
        ("promote", "ops"),
        ("create", "ops"),
        ("seed", "capability.toml"),
    ]
    # and rolling back again has nothing to go to: 409
    assert call(runtime, "POST", f"{ASSESS}/rollback", user="ops")[0] == 409


def test_clone_and_disable_over_the_api(runtime):
    # Given an operator clones version 1 / Then it is version 2 with version 1's settings
    status, clone = call(runtime, "POST", f"{ASSESS}/versions/1/clone", {"note": "baseline"}, user="ops")
    assert status == 201 and (clone["version"], clone["source"], clone["note"]) == (2, "clone of 1", "baseline")
    # When the operator disables an agent / Then no mission of the capability starts (409), none is stored
    assert call(runtime, "POST", f"{ASSESS}/disable", user="ops")[0] == 200
    status, body = start(runtime)
    assert status == 409 and "assess" in body["message"]
    assert call(runtime, "GET", "/missions", user="ann")[1]["missions"] == []
    # and once enabled, missions start again
    assert call(runtime, "POST", f"{ASSESS}/enable", user="ops")[0] == 200
    assert start(runtime)[0] == 202


def test_a_mission_may_name_an_allowed_model_and_no_other(runtime):
    # Given the capability's allowed models here
    status, listing = call(runtime, "GET", f"/agents/{FITNESS}", user="ann")
    assert status == 200 and "gpt-4.1" in listing["models"] and {a["agent"] for a in listing["agents"]} >= {"assess"}
    # When a mission names one / Then its envelope carries it to every stage
    status, accepted = start(runtime, model="gpt-4.1")
    assert status == 202 and started_envelope(runtime, accepted["mission_id"])["model"] == "gpt-4.1"
    # When a mission names a model not allowed, or one with no price / Then 422 and nothing started
    for model in ("gpt-5", "my-unpriced-model"):
        status, body = start(runtime, model=model)
        assert status == 422 and f"model '{model}'" in body["message"]
    assert len(call(runtime, "GET", "/missions", user="ann")[1]["missions"]) == 1


def test_a_missions_usage_is_its_owners_and_totals_are_per_version(runtime):
    # Given a mission of ann's with two recorded model calls
    _, accepted = start(runtime)
    mission_id = accepted["mission_id"]
    usage = runtime.usage
    assert isinstance(usage, InMemoryUsageStore)
    for version, cost in ((1, 0.001), (2, 0.003)):
        usage.record(
            UsageRecord(mission_id=mission_id, user_id="ann", capability=FITNESS, stage="assess", agent="assess",
                        version=version, provider="openai", model="gpt-4.1", tokens_in=100, tokens_out=10,
                        cost_usd=cost, latency_ms=20)
        )  # fmt: skip
    # When ann lists its usage / Then every call is there, with the total
    status, listed = call(runtime, "GET", f"/missions/{mission_id}/usage", user="ann")
    assert status == 200 and [c["version"] for c in listed["calls"]] == [1, 2]
    assert listed["total"]["cost_usd"] == 0.004 and listed["total"]["calls"] == 2
    # and bob, another user, gets 404 for it
    assert call(runtime, "GET", f"/missions/{mission_id}/usage", user="bob")[0] == 404
    # When ann reads the totals while it runs / Then they count none of its calls yet
    assert call(runtime, "GET", f"/metrics/usage?capability={FITNESS}", user="ann")[1]["totals"] == []
    # When it ended (whoever writes its end adds its calls to the totals) and ann reads the totals
    count_ended_mission(usage, mission_id)
    status, metrics = call(runtime, "GET", f"/metrics/usage?capability={FITNESS}", user="ann")
    # Then per version, so version 2 compares with version 1
    assert status == 200 and [(t["version"], t["average_cost_usd"]) for t in metrics["totals"]] == [
        (1, 0.001),
        (2, 0.003),
    ]
    # and everyone's are for operators only
    assert call(runtime, "GET", f"/metrics/usage?capability={FITNESS}&scope=all", user="ann")[0] == 403
    status, everyone = call(runtime, "GET", f"/metrics/usage?capability={FITNESS}&scope=all", user="ops")
    assert status == 200 and sum(t["calls"] for t in everyone["totals"]) == 2
    assert json.dumps(everyone)  # plain JSON


def test_an_abandoned_attempt_shows_in_a_missions_usage_with_its_estimated_cost(runtime):
    # Given a mission of ann's whose call timed out once (abandoned: charged prompt + limit), then answered
    _, accepted = start(runtime)
    mission_id = accepted["mission_id"]
    common = dict(mission_id=mission_id, user_id="ann", capability=FITNESS, stage="assess", agent="assess",
                  provider="openai", model="gpt-4.1", max_tokens=512)  # fmt: skip
    runtime.usage.record(
        UsageRecord(**common, tokens_in=250, tokens_out=512, cost_usd=0.0046, outcome="abandoned", attempt=1,
                    timeout_s=81.2, error="APITimeoutError: Request timed out.")
    )  # fmt: skip
    runtime.usage.record(UsageRecord(**common, tokens_in=250, tokens_out=40, cost_usd=0.0008))
    # When ann lists its usage
    status, listed = call(runtime, "GET", f"/missions/{mission_id}/usage", user="ann")
    # Then the abandoned attempt is there with its limit, attempt and time, and the totals count it
    assert status == 200
    assert [(c["outcome"], c["max_tokens"], c["attempt"], c["timeout_s"]) for c in listed["calls"]] == [
        ("abandoned", 512, 1, 81.2),
        ("ok", 512, None, None),
    ]
    assert listed["total"]["abandoned"] == 1 and listed["total"]["abandoned_cost_usd"] == 0.0046
    assert listed["total"]["cost_usd"] == 0.0054
