"""Starting missions through the HTTP API: idempotency keys, refused bodies, outages, the queue and per-mission
budgets. The HTTP API over the composition root on in-memory adapters, with no AWS and no moto.
"""

from __future__ import annotations

from typing import Any

import pytest

from missions.app.runtime import Runtime
from missions.core.errors import (
    DependencyUnavailable,
)
from missions.core.mission.status import MissionStatus
from missions.service.lifecycle import Lifecycle
from tests.support.api import GOAL, call, exchange, executions, start


def test_a_mission_starts_through_the_launcher_and_a_replayed_key_returns_the_first_response(runtime: Runtime):
    # Given a mission started with an Idempotency-Key
    key = {"idempotency-key": "order-7"}
    first = exchange(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)
    # When the client retries the very same request with the same key
    again = exchange(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)
    # Then it gets the first response back, marked as a replay, and one mission started
    assert first[0] == 202 and first[2]["status"] == "started" and "idempotent-replayed" not in first[1]
    assert (again[0], again[2]) == (first[0], first[2]) and again[1]["idempotent-replayed"] == "true"
    assert executions(runtime).started == [first[2]["mission_id"]]


def test_the_same_key_with_another_request_is_422_and_starts_nothing(runtime: Runtime):
    key = {"idempotency-key": "order-8"}
    assert call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)[0] == 202
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": "other"}, headers=key)
    assert status == 422 and "different request" in body["message"]
    assert len(executions(runtime).started) == 1


def test_keys_belong_to_their_user(runtime: Runtime):
    key = {"idempotency-key": "same"}
    ann = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)
    bob = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key, user="bob")
    assert ann[0] == bob[0] == 202 and ann[1]["mission_id"] != bob[1]["mission_id"]


def test_a_key_whose_first_request_is_still_running_is_409(runtime: Runtime, monkeypatch: pytest.MonkeyPatch):
    # Given a first request that, while it runs, sees its retry arrive
    key = {"idempotency-key": "slow"}
    seen: list[tuple[int, Any]] = []
    submit = runtime.launcher.submit

    def submit_while_retried(request: Any) -> Any:
        seen.append(call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key))
        return submit(request)

    monkeypatch.setattr(runtime.launcher, "submit", submit_while_retried)
    first = exchange(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)
    # Then the retry is told to come back, and the first completes
    [(status, body)] = seen
    assert status == 409 and "still running" in body["message"]
    assert first[0] == 202


def test_a_request_that_failed_keeps_no_key(runtime: Runtime):
    key = {"idempotency-key": "typo"}
    assert call(runtime, "POST", "/missions", {"capability": "astrology", "goal": GOAL}, headers=key)[0] == 422
    assert call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)[0] == 202


def test_a_malformed_key_is_400(runtime: Runtime):
    status, body = call(runtime, "POST", "/missions", {"goal": GOAL}, headers={"idempotency-key": "é" * 3})
    assert status == 400 and "Idempotency-Key" in body["message"]


def test_an_unknown_capability_is_422_naming_the_installed_ones(runtime: Runtime):
    status, body = call(runtime, "POST", "/missions", {"capability": "astrology", "goal": GOAL})
    assert status == 422 and "shopping" in body["message"]
    assert runtime.missions.list_for_user("ann") == []


def test_a_body_that_is_not_json_is_415(runtime: Runtime):
    status, body = call(runtime, "POST", "/missions", raw=b"goal=x", headers={"content-type": "text/plain"})
    assert status == 415 and body["correlation_id"]


@pytest.mark.parametrize(
    ("raw", "status", "reason"),
    [
        (b"[" * 1000 + b"]" * 1000, 400, "nested more than"),
        (b'{"goal": "x", "context": {"a": ' + b"[" * 40 + b"]" * 40 + b"}}", 400, "nested more than"),
        (b'{"goal": "x"', 400, "not valid JSON"),
        (b'{"goal": "\\ud800"}', 400, "unpaired"),
        (b'{"goal": "x", "context": {"n": 1e400}}', 400, "JSON cannot carry"),
        (b'{"goal": "x", "context": {"n": ' + b"9" * 50 + b"}}", 400, "38 digits"),
        (b'{"goal": "x", "context": {"n": [2.9e292]}}', 400, "range DynamoDB"),  # found by the stateful fuzz
        (b'{"goal": "x", "context": {"n": -1e-200}}', 400, "range DynamoDB"),
        (b"\xff\xfe", 400, "UTF-8"),
        (b'{"goal": "' + b"x" * 300_000 + b'"}', 413, "limit"),
    ],
)
def test_a_body_that_cannot_be_taken_is_refused_before_any_route(
    runtime: Runtime, raw: bytes, status: int, reason: str
):
    # Given a hostile body / When it is sent / Then a 4xx says why, and nothing is stored
    answer_status, body = call(runtime, "POST", "/missions", raw=raw)
    assert answer_status == status and reason in body["message"]
    assert runtime.missions.list_for_user("ann") == []


@pytest.mark.parametrize(
    "body",
    [
        {"capability": "shopping", "goal": GOAL, "context": {"repo": 123}},  # a path that is not a string
        {"capability": "shopping", "goal": GOAL, "context": {"blob": "x" * 70_000}},  # over 64 KB
        {"capability": "shopping", "goal": 7},
        {"capability": "shopping", "goal": GOAL, "priority": "soon"},
        {"capability": "shopping", "goal": GOAL, "extra": 1},
    ],
)
def test_an_invalid_mission_is_422_with_the_fields_named_and_nothing_stored(runtime: Runtime, body: dict[str, Any]):
    status, answer = call(runtime, "POST", "/missions", body, headers={"idempotency-key": "k1"})
    assert status == 422 and answer["message"] and answer["correlation_id"]
    assert runtime.missions.list_for_user("ann") == [] and executions(runtime).started == []


def test_feedback_takes_no_string_for_a_boolean(runtime: Runtime):
    mission_id = start(runtime)
    Lifecycle(runtime.missions).end(mission_id, MissionStatus.COMPLETED, terminal_reason="completed")
    status, body = call(runtime, "POST", f"/missions/{mission_id}/feedback", {"completed": "yes"})
    assert status == 422 and body["detail"][0]["loc"][-1] == "completed"
    assert runtime.missions.get(mission_id).feedback is None


def test_an_outage_of_a_dependency_is_503_with_retry_after_and_stores_nothing(runtime: Runtime, monkeypatch):
    # Given Step Functions refusing to start executions
    def refuse(*args: Any, **kwargs: Any) -> str:
        raise DependencyUnavailable("Step Functions is throttling")

    monkeypatch.setattr(executions(runtime), "start", refuse)
    key = {"idempotency-key": "outage"}
    # When a mission is asked for
    status, headers, body = exchange(
        runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key
    )
    # Then 503 says when to retry, nothing was stored, and the retry with the same key goes through
    assert status == 503 and headers["retry-after"] and "nothing was stored" in body["message"]
    assert runtime.missions.list_for_user("ann") == []
    assert runtime.launcher.dispatcher.running("ann") == set() and runtime.launcher.dispatcher.queued("ann") == []
    monkeypatch.undo()
    assert call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)[0] == 202


def test_the_fourth_mission_of_a_user_waits_in_the_queue(runtime: Runtime):
    started = [start(runtime) for _ in range(3)]
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL})
    assert (status, body["status"]) == (202, "queued")
    assert executions(runtime).started == started


def test_a_mission_may_have_a_smaller_budget_than_its_capability_never_a_larger(runtime: Runtime):
    from missions.core.capability import registry as registry

    ceiling = registry.load("shopping").pipeline.bounds.max_cost_usd
    # Given a client asking for half the capability's budget / When it starts the mission
    mission_id = start(runtime, max_cost_usd=ceiling / 2)
    # Then the mission's envelope carries that budget
    assert executions(runtime).started == [mission_id]
    checkpoint = runtime.checkpoints.get(mission_id, "0001-start")
    assert runtime.codec.decode(checkpoint.envelope).bounds.max_cost_usd == ceiling / 2
    # When another asks for more than the ceiling, or for a budget that is not a number
    over = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL, "max_cost_usd": ceiling * 10})
    text = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL, "max_cost_usd": "5"})
    # Then each is a 422 that says why, and nothing else started
    assert over[0] == 422 and "above shopping's ceiling" in over[1]["message"], over
    assert text[0] == 422, text
    assert len(executions(runtime).started) == 1


# --------------------------------------------------------------------------- daily budgets


def spend(runtime: Runtime, user: str, usd: float) -> None:
    """A model call of the user's, as a stage records it."""
    from missions.core.cost.usage import UsageRecord

    call = UsageRecord(
        mission_id="m", user_id=user, capability="shopping", stage="s", agent="s", provider="p", model="x", cost_usd=usd
    )
    assert runtime.budgets is not None
    runtime.usage.record(call, runtime.budgets.today())


def test_a_user_sees_todays_spend_and_a_mission_over_the_budget_is_held_or_refused():
    from tests.support.fakes import memory_runtime

    # Given a default daily budget of $0.50, which ann has spent
    runtime = memory_runtime(daily_budget_usd=0.5, operators=["ops"])
    spend(runtime, "ann", 0.6)
    # Then GET /me shows her day
    status, me = call(runtime, "GET", "/me")
    assert status == 200 and me["budget"]["spent_usd"] == 0.6 and me["budget"]["daily_budget_usd"] == 0.5
    assert me["budget"]["reached"] is True and me["budget"]["remaining_usd"] == 0.0
    # When she asks for a mission: it is accepted, queued and held, and not started
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL})
    assert (status, body["status"], body["held"]) == (202, "queued", "budget")
    assert executions(runtime).started == []
    status, view = call(runtime, "GET", f"/missions/{body['mission_id']}")
    assert view["queue"]["held"] == "budget" and "daily budget is spent" in view["queue"]["reason"]
    # and her inbox lists it as held back, with why
    inbox = call(runtime, "GET", "/inbox")[1]
    assert [(m["mission_id"], m["held"]) for m in inbox["held"]] == [(body["mission_id"], "budget")]
    assert inbox["held"][0]["reason"] == view["queue"]["reason"]
    # and one that asks to be refused is 429, with when to retry, and nothing is stored
    status, headers, refused = exchange(
        runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL, "over_budget": "refuse"}
    )
    assert status == 429 and int(headers["retry-after"]) > 0 and "daily budget is spent" in refused["message"]
    assert len(call(runtime, "GET", "/missions")[1]["missions"]) == 1


def test_an_operator_raises_a_users_budget_and_their_held_missions_start():
    from tests.support.fakes import memory_runtime

    runtime = memory_runtime(daily_budget_usd=0.5, operators=["ops"])
    spend(runtime, "ann", 0.6)
    held = start(runtime)
    # When someone who is not an operator tries, it is refused and nothing changes
    status, body = call(runtime, "PUT", "/users/ann/budget", {"daily_budget_usd": 10}, user="ann")
    assert status == 403 and "operators" in body["message"]
    assert call(runtime, "GET", "/users/ann/budget", user="ann")[0] == 403
    # When an operator raises it
    status, body = call(runtime, "PUT", "/users/ann/budget", {"daily_budget_usd": 2.0}, user="ops")
    # Then the held mission started, and her day shows the new budget
    assert status == 200 and body["started"] == [held] and body["daily_budget_usd"] == 2.0
    assert executions(runtime).started == [held]
    assert call(runtime, "GET", "/users/ann/budget", user="ops")[1]["remaining_usd"] == 1.4
    # and dropping her own budget brings the default back
    status, body = call(runtime, "PUT", "/users/ann/budget", {"daily_budget_usd": None}, user="ops")
    assert status == 200 and body["daily_budget_usd"] == 0.5 and body["reached"] is True
    assert call(runtime, "PUT", "/users/ann/budget", {"daily_budget_usd": -1}, user="ops")[0] == 422
