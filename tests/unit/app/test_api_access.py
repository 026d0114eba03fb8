"""Who may see what through the HTTP API: the caller's own missions, metrics, inbox, profile, capability graphs
and costs.
The HTTP API over the composition root on in-memory adapters, with no AWS and no moto.
"""

from __future__ import annotations

import json

import pytest

from missions.app import api
from missions.app.runtime import Runtime
from missions.core.mission.status import MissionStatus
from missions.local.devserver import http_event
from missions.local.moto import LocalContext
from missions.service.lifecycle import Lifecycle
from tests.support.api import GOAL, _ask, _question, call, executions, start
from tests.support.fakes import memory_runtime


def test_a_request_without_a_user_is_401_and_changes_nothing(runtime: Runtime):
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, user=None)
    assert status == 401 and body["message"]
    assert executions(runtime).started == []


def test_another_users_mission_is_as_missing_as_none(runtime: Runtime):
    mission_id = start(runtime, user="ann")
    for method, path, body in (
        ("GET", f"/missions/{mission_id}", None),
        ("GET", f"/missions/{mission_id}/events", None),
        ("POST", f"/missions/{mission_id}/cancel", None),
        ("POST", f"/missions/{mission_id}/feedback", {"completed": True}),
        ("POST", f"/missions/{mission_id}/fork", {"checkpoint_id": "0001-start"}),
    ):
        status, answer = call(runtime, method, path, body, user="bob")
        assert status == 404, (method, path, answer)
    assert runtime.missions.get(mission_id).status == MissionStatus.RUNNING


METRICS = "/metrics/missions?capability=shopping&days=7"


def _two_users_missions(runtime: Runtime) -> None:
    """ann: two missions, one completed and rated 5; bob: one, failed."""
    ann_first, _ann_second = start(runtime, user="ann"), start(runtime, user="ann")
    bob_only = start(runtime, user="bob")
    Lifecycle(runtime.missions).end(ann_first, MissionStatus.COMPLETED, terminal_reason="completed")
    Lifecycle(runtime.missions).end(bob_only, MissionStatus.FAILED, terminal_reason="stage_failed")
    status, rated = call(runtime, "POST", f"/missions/{ann_first}/feedback", {"completed": True, "quality": 5})
    assert status == 200, rated


def test_metrics_count_only_the_callers_own_missions():
    # Given ann's and bob's missions of one capability
    runtime = memory_runtime()
    _two_users_missions(runtime)
    # When each asks for the capability's metrics
    _, ann = call(runtime, "GET", METRICS, user="ann")
    _, bob = call(runtime, "GET", METRICS, user="bob")
    _, carol = call(runtime, "GET", METRICS, user="carol")
    # Then each sees their own missions only, and no aggregate of other users' feedback
    assert (ann["count"], bob["count"], carol["count"]) == (2, 1, 0)
    assert (ann["scope"], ann["by_status"]) == ("mine", {"completed": 1, "running": 1})
    assert (ann["average_rating"], ann["learnings"]) == (5.0, None)
    assert (bob["count"], bob["by_status"], bob["error_rate"], bob["average_rating"]) == (1, {"failed": 1}, 1.0, None)
    assert (carol["count"], carol["learnings"]) == (0, None)


def test_every_users_metrics_are_for_operators_only():
    # Given ann's and bob's missions, and olga an operator by the settings
    runtime = memory_runtime(operators=["olga"])
    _two_users_missions(runtime)
    # When ann asks for every user's / Then she is refused, with the reason
    status, refused = call(runtime, "GET", METRICS + "&scope=all", user="ann")
    assert status == 403 and "operators" in refused["message"]
    # When olga asks / Then she sees every user's missions, and the capability's learnings
    status, everyone = call(runtime, "GET", METRICS + "&scope=all", user="olga")
    assert status == 200, everyone
    assert (everyone["scope"], everyone["count"], everyone["by_status"]) == (
        "all",
        3,
        {"completed": 1, "failed": 1, "running": 1},
    )
    assert everyone["learnings"]["rating_count"] == 1
    # and a scope that is neither is refused as invalid
    assert call(runtime, "GET", METRICS + "&scope=everyone", user="olga")[0] == 422


def test_the_cognito_operators_group_may_see_every_users_metrics():
    # Given ann's and bob's missions, and pat in the Cognito `operators` group (not in the settings)
    runtime = memory_runtime()
    _two_users_missions(runtime)
    path, _, query = (METRICS + "&scope=all").partition("?")
    event = http_event("GET", path, query, {}, b"", "pat")
    event["requestContext"]["authorizer"]["jwt"]["claims"]["cognito:groups"] = "[operators]"
    # When pat asks for every user's metrics
    result = api.handle(event, LocalContext("missions-api"), runtime)
    # Then they are given
    assert result["statusCode"] == 200 and json.loads(result["body"])["count"] == 3


def test_the_inbox_lists_only_the_callers_answerable_questions(runtime: Runtime):
    # Given ann's mission waiting for her, another of hers that just asked, and bo's waiting for him
    waiting, asking, theirs = start(runtime), start(runtime), start(runtime, user="bo")
    for mission_id in (waiting, asking, theirs):
        _ask(runtime, mission_id)
    _question(runtime, waiting)
    _question(runtime, theirs)
    # When ann opens her inbox / Then only her answerable question is there, with what answers it
    status, inbox = call(runtime, "GET", "/inbox")
    assert status == 200 and [i["mission_id"] for i in inbox["items"]] == [waiting]
    assert inbox["items"][0]["question"]["question"] == "which one?"
    assert call(runtime, "GET", "/inbox", user="bo")[1]["items"][0]["mission_id"] == theirs
    assert call(runtime, "GET", "/inbox", user=None)[0] == 401


def test_a_capabilitys_graph_is_its_compiled_state_machine(runtime: Runtime):
    status, graph = call(runtime, "GET", "/capabilities/shopping/graph")
    assert status == 200 and graph["capability"] == "shopping"
    ids = {n["id"] for n in graph["nodes"]}
    stages = {n["stage"] for n in graph["nodes"] if n["kind"] == "stage"}
    assert graph["start"] in ids and all(e["from"] in ids and e["to"] in ids for e in graph["edges"])
    assert set(runtime.capabilities.load("shopping").pipeline.stage_names()) <= stages
    assert {"await", "end"} <= {n["kind"] for n in graph["nodes"]}
    assert call(runtime, "GET", "/capabilities/nope/graph")[0] == 404


def test_a_capabilitys_cost_is_predicted_from_its_machine(runtime: Runtime):
    # When a user asks what a code_analysis mission will cost
    status, cost = call(runtime, "GET", "/capabilities/code_analysis/cost")
    # Then the lines add up to the total, with the range and what it assumes
    assert status == 200 and cost["capability"] == "code_analysis"
    assert sum(line["dollars"] for line in cost["lines"].values()) == pytest.approx(
        cost["dollars_per_mission"], rel=1e-3
    )
    assert cost["range"]["min"]["stages"] <= cost["range"]["typical"]["stages"] <= cost["range"]["max"]["stages"]
    assert cost["assumptions"]
    # and an unknown capability is 404 with a reason
    status, missing = call(runtime, "GET", "/capabilities/nope/cost")
    assert status == 404 and "nope" in missing["message"]


def test_me_names_the_user_and_where_their_learned_preferences_live(runtime: Runtime):
    status, me = call(runtime, "GET", "/me", user="ann@example.org")
    budget = me.pop("budget")
    assert status == 200 and me == {
        "user_id": "ann@example.org",
        "preferences_namespace": "user_preferences:ann_example.org",
        "operator": False,
    }
    # and today's spend, here without a daily budget
    assert (budget["spent_usd"], budget["daily_budget_usd"], budget["reached"]) == (0.0, None, False)
    assert call(runtime, "GET", "/me", user=None)[0] == 401
