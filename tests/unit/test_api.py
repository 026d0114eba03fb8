"""The HTTP API over the composition root on in-memory adapters: statuses, bodies and who may see what,
with no AWS and no moto. Domain errors map to HTTP statuses in one place (missions.app.api)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from missions.app import api
from missions.app.api import edge
from missions.app.resolver import ERROR_STATUS
from missions.app.runtime import Runtime
from missions.core.errors import (
    AnswerRejected,
    ConflictError,
    DependencyUnavailable,
    MemoryValidationError,
    MissionRequestError,
    NotFound,
    RepositoryConflict,
    RepositoryRequestError,
    TaskGone,
    TransitionRefused,
)
from missions.core.mission.events import Event, EventType
from missions.core.mission.status import MissionStatus
from missions.local.devserver import http_event
from missions.local.moto import LocalContext
from missions.service.lifecycle import Lifecycle
from tests.support.fakes import FakeExecutions, memory_runtime

GOAL = "find the cheapest USB-C charger"


@pytest.fixture()
def runtime() -> Runtime:
    return memory_runtime()


def exchange(
    runtime: Runtime,
    method: str,
    path: str,
    body: Any = None,
    user: str | None = "ann",
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One request through the API handler (as API Gateway hands it over): status, headers, JSON body."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
    path, _, query = path.partition("?")
    all_headers = {"content-type": "application/json", **(headers or {})}
    event = http_event(method, path, query, all_headers, data, user)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:  # API Gateway hands a body that is not text over base64-encoded
        event["body"], event["isBase64Encoded"] = base64.b64encode(data).decode(), True
    result = api.handle(event, LocalContext("missions-api"), runtime)
    text = result.get("body") or ""
    response_headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
    return int(result["statusCode"]), response_headers, json.loads(text) if text else None


def call(runtime: Runtime, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
    status, _, answer = exchange(runtime, method, path, body, **kwargs)
    return status, answer


def start(runtime: Runtime, user: str = "ann", **fields: Any) -> str:
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL, **fields}, user=user)
    assert status == 202, body
    return str(body["mission_id"])


def executions(runtime: Runtime) -> FakeExecutions:
    assert isinstance(runtime.executions, FakeExecutions)
    return runtime.executions


# --------------------------------------------------------------------------- who is asking


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


# --------------------------------------------------------------------------- metrics: whose missions


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


# --------------------------------------------------------------------------- starting


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


# --------------------------------------------------------------------------- steering


def test_cancel_then_cancel_again_is_a_conflict(runtime: Runtime):
    mission_id = start(runtime)
    assert call(runtime, "POST", f"/missions/{mission_id}/cancel") == (
        200,
        {"mission_id": mission_id, "status": "cancelled"},
    )
    assert executions(runtime).stopped == [mission_id]
    status, body = call(runtime, "POST", f"/missions/{mission_id}/cancel")
    assert status == 409 and "cancelled" in body["message"]


def test_feedback_waits_for_the_end_then_is_taken_once(runtime: Runtime):
    mission_id = start(runtime)
    status, body = call(runtime, "POST", f"/missions/{mission_id}/feedback", {"completed": True, "quality": 4})
    assert status == 409 and "still running" in body["message"]
    Lifecycle(runtime.missions).end(mission_id, MissionStatus.COMPLETED, terminal_reason="completed")
    assert call(runtime, "POST", f"/missions/{mission_id}/feedback", {"completed": True, "quality": 4})[0] == 200
    assert call(runtime, "POST", f"/missions/{mission_id}/feedback", {"completed": False})[0] == 409


def test_a_fork_from_a_checkpoint_is_dispatched(runtime: Runtime):
    source = start(runtime)
    status, body = call(runtime, "POST", f"/missions/{source}/fork", {"checkpoint_id": "0001-start"})
    assert status == 202 and body["status"] == "started" and body["forked_from"] == source
    assert executions(runtime).started == [source, body["mission_id"]]
    status, body = call(runtime, "POST", f"/missions/{source}/fork", {"checkpoint_id": "0042-nowhere"})
    assert status == 404


def _ask(runtime: Runtime, mission_id: str) -> str:
    """A stage asks (the runner records that the mission is asking), not yet answerable."""
    Lifecycle(runtime.missions).progress(mission_id, asking="i_1")
    return "i_1"


def _question(runtime: Runtime, mission_id: str, token: str = "token-1") -> str:
    """The waitForTaskToken function stores the question's token: now it can be answered."""
    interrupt = {"id": "i_1", "kind": "choice", "stage": "present", "question": "which one?", "options": ["A", "B"]}
    event = {"envelope": {"mission_id": mission_id, "interrupt": interrupt}, "task_token": token}
    runtime.interrupt_service.handle(event)
    return "i_1"


def test_a_question_is_shown_only_once_it_can_be_answered(runtime: Runtime):
    # Given a stage that just asked, before the interrupt function stored the token
    mission_id = start(runtime)
    interrupt_id = _ask(runtime, mission_id)
    # Then the mission shows no question yet, and an early answer is told to retry (never 404)
    assert call(runtime, "GET", f"/missions/{mission_id}")[1]["pending_interrupt"] is None
    status, headers, body = exchange(
        runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"}
    )
    assert status == 409 and headers["retry-after"] == "1" and "not answerable yet" in body["message"]
    # When the token is stored / Then the question shows and takes the answer
    _question(runtime, mission_id)
    assert call(runtime, "GET", f"/missions/{mission_id}")[1]["pending_interrupt"]["question"] == "which one?"
    assert call(runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"})[0] == 200


def test_missions_waiting_for_a_human_hold_no_running_slot(runtime: Runtime):
    # Given three missions, each waiting for an answer
    waiting = [start(runtime) for _ in range(3)]
    for mission_id in waiting:
        _question(runtime, mission_id, token=f"t-{mission_id}")
    # When the user starts a fourth / Then it starts at once
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL})
    assert body["status"] == "started"
    assert runtime.launcher.dispatcher.running("ann") == {body["mission_id"]}


def test_an_answer_waits_for_a_slot_and_a_queued_mission_says_where_it_stands(runtime: Runtime):
    # Given a mission waiting for an answer, then three running ones filling the user's slots, and a 5th
    asking = start(runtime)
    _question(runtime, asking, token="t-asking")
    running = [start(runtime) for _ in range(3)]
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL})
    queued = body["mission_id"]
    assert body["status"] == "queued"
    place = call(runtime, "GET", f"/missions/{queued}")[1]["queue"]
    assert place == {"position": 1, "reason": "3 of your 3 running slots are in use"}
    # When the user answers the waiting one
    status, body = call(runtime, "POST", f"/missions/{asking}/interrupts/i_1", {"decision": "B"})
    # Then the answer is queued (first in line: it resumes before new starts), and nothing over the limit runs
    assert (status, body["status"]) == (200, "queued")
    assert call(runtime, "GET", f"/missions/{asking}")[1]["queue"]["position"] == 1
    assert executions(runtime).answered == []
    # When a running one ends / Then the answer is handed over first
    Lifecycle(runtime.missions).end(running[0], MissionStatus.COMPLETED, terminal_reason="completed")
    runtime.control.execution_ended(f"x:{running[0]}", "SUCCEEDED")
    assert [token for token, _ in executions(runtime).answered] == ["t-asking"]
    assert runtime.missions.get(asking).status == MissionStatus.RUNNING
    assert runtime.missions.get(queued).status == MissionStatus.QUEUED


def test_an_answer_resumes_the_execution_once(runtime: Runtime):
    mission_id = start(runtime)
    interrupt_id = _question(runtime, mission_id)
    status, body = call(runtime, "GET", f"/missions/{mission_id}")
    assert body["pending_interrupt"]["options"] == ["A", "B"] and body["status"] == "interrupted"
    path = f"/missions/{mission_id}/interrupts/{interrupt_id}"
    assert call(runtime, "POST", path, {"decision": "C"})[0] == 422  # not one of the options
    assert call(runtime, "POST", path, {"decision": "B"}) == (200, {"interrupt_id": interrupt_id, "status": "answered"})
    assert call(runtime, "POST", path, {"decision": "A"})[0] == 409  # asked once, answered once
    assert [output["response"]["decision"] for _, output in executions(runtime).answered] == ["B"]
    assert call(runtime, "POST", f"/missions/{mission_id}/interrupts/i_404", {"decision": "A"})[0] == 404


def test_an_answer_the_execution_no_longer_takes_is_a_conflict_and_recorded_as_expired(runtime: Runtime):
    mission_id = start(runtime)
    interrupt_id = _question(runtime, mission_id, token="late")
    executions(runtime).gone_tokens.add("late")  # it timed out
    status, body = call(runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"})
    assert status == 409 and "can no longer be answered" in body["message"]
    assert runtime.interrupts.get(mission_id, interrupt_id).status == "expired"
    _, events = call(runtime, "GET", f"/missions/{mission_id}/events")
    assert [e["type"] for e in events["events"]][-2:] == ["interrupt.answered", "interrupt.expired"]


def test_event_pages_stop_and_resume_inside_a_stages_batch(runtime: Runtime):
    # Given a mission whose stage wrote five events in one batch
    mission_id = start(runtime)
    _, before = call(runtime, "GET", f"/missions/{mission_id}/events")
    stage = [Event(type=EventType.TOOL_COMPLETED, mission_id=mission_id, payload={"n": n}) for n in range(5)]
    runtime.events.append(mission_id, "0001-traverser", stage)
    # When its events are paged two at a time from where the client was
    seen, cursor = [], before["cursor"]
    while True:
        after = f"&after={cursor}" if cursor else ""
        status, page = call(runtime, "GET", f"/missions/{mission_id}/events?limit=2{after}")
        assert status == 200 and len(page["events"]) <= 2
        if not page["events"]:
            break
        seen += [e["payload"]["n"] for e in page["events"]]
        cursor = page["cursor"]
    # Then every event of the batch came once, in order, across pages that cut it
    assert seen == [0, 1, 2, 3, 4]


def test_a_cursor_that_names_no_event_is_refused(runtime: Runtime):
    mission_id = start(runtime)
    for cursor in (base64.urlsafe_b64encode(b"zzz").decode(), "not base64!", base64.urlsafe_b64encode(b"e1").decode()):
        assert call(runtime, "GET", f"/missions/{mission_id}/events?after={cursor}")[0] == 422


# --------------------------------------------------------------------------- errors, in one place


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFound("no such thing"), 404),
        (PermissionError("operators only"), 403),
        (ConflictError("already"), 409),
        (TransitionRefused("m_1", "completed", "cancelled"), 409),
        (TaskGone("timed out"), 409),
        (RepositoryConflict("importing"), 409),
        (MissionRequestError("bad goal"), 422),
        (AnswerRejected("not an option"), 422),
        (RepositoryRequestError("bad url"), 422),
        (MemoryValidationError("bad key"), 422),
        (DependencyUnavailable("the event bus refused"), 503),
    ],
)
def test_each_domain_error_has_one_status(runtime: Runtime, monkeypatch: pytest.MonkeyPatch, error, status):
    # Given a service that refuses with a domain error
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(runtime.repository_service, "list", refuse)
    # When a route reaches it (straight through the edge: this route documents none of these errors, and
    # the suite's contract check would refuse them, rightly)
    event = http_event("GET", "/repositories", "", {}, b"", "ann")
    result = edge.handle(event, LocalContext("missions-api"), runtime)
    body = json.loads(result["body"])
    # Then the API answers the error's status with its reason and the request's correlation id
    assert result["statusCode"] == status and body["statusCode"] == status and body["message"]
    assert str(error) in body["message"] and body["correlation_id"] == event["requestContext"]["requestId"]
    if status == 503:
        assert int(result["headers"]["Retry-After"]) > 0


def test_the_status_table_is_the_only_mapping():
    # Every domain error of missions.core.errors that a request can cause has its status in the table
    from missions.core import errors

    requestable = [
        errors.NotFound,
        errors.ConflictError,
        errors.MissionRequestError,
        errors.AnswerRejected,
        errors.MemoryValidationError,
        errors.RepositoryRequestError,
        errors.RepositoryConflict,
        errors.DependencyUnavailable,
    ]
    assert all(kind in ERROR_STATUS for kind in requestable)


# --------------------------------------------------------------------------- webhooks


WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"the git source's key, 32 bytes!").decode()


def _webhook_runtime(repo: Any, outage: list[Exception] | None = None) -> tuple[Runtime, list[dict[str, Any]]]:
    """A runtime with the `git` source (missions for ann, on the repository `repo`) whose bus hands each
    entry to the trigger function, as the EventBridge rule does; `outage` refuses the first publishes."""
    from missions.adapters.memory.webhooks import StaticWebhookSources
    from missions.ports.webhooks import WebhookSource

    runtime = memory_runtime(repo_roots=[str(repo)])
    runtime.webhook_sources = StaticWebhookSources({"git": WebhookSource("git", WEBHOOK_SECRET, user_id="ann")})
    published: list[dict[str, Any]] = []
    refusals = outage if outage is not None else []

    class Bus:
        def publish(self, entries: list[dict[str, Any]]) -> None:
            if refusals:
                raise refusals.pop()
            published.extend(entries)
            for entry in entries:
                runtime.ingest.bus_event(
                    {
                        "source": entry["Source"],
                        "detail-type": entry["DetailType"],
                        "detail": json.loads(entry["Detail"]),
                    }
                )

    runtime.bus = Bus()
    return runtime, published


def _webhook(delivery: str, body: bytes, stamp: int | None = None, signature: str | None = None) -> dict[str, Any]:
    from missions.service.triggers.webhooks import sign

    stamp = int(time.time()) if stamp is None else stamp
    headers = {
        "webhook-id": delivery,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature or sign(WEBHOOK_SECRET, delivery, stamp, body),
        "content-type": "application/json",
    }
    return http_event("POST", "/webhooks/git", "", headers, body, None)


PUSH = json.dumps({"type": "push", "symbol": "compute_tax"}).encode()


def test_a_webhook_survives_a_bus_outage_and_starts_its_mission_once(tmp_path: Any):
    # Given a signed delivery, and an event bus that refuses it once
    runtime, published = _webhook_runtime(
        tmp_path, outage=[DependencyUnavailable("the event bus refused the events: throttled")]
    )
    event = _webhook("d-1", PUSH)
    # When the sender delivers it, and retries after the 503 as it is told to
    first = runtime.ingest.webhook(event)
    second = runtime.ingest.webhook(event)
    third = runtime.ingest.webhook(event)
    # Then the retry was accepted (not refused as a replay), put on the bus once, and a replay after that is one
    assert (first["statusCode"], second["statusCode"], third["statusCode"]) == (503, 202, 200)
    assert len(published) == 1 and json.loads(published[0]["Detail"])["delivery_id"] == "d-1"
    assert len(runtime.missions.list_for_user("ann")) == 1


def test_a_captured_webhook_replayed_under_fresh_ids_starts_nothing(tmp_path: Any):
    # Given a signed delivery that started ann's mission
    runtime, published = _webhook_runtime(tmp_path)
    captured = _webhook("d-1", PUSH)
    assert runtime.ingest.webhook(captured)["statusCode"] == 202
    signature = captured["headers"]["webhook-signature"]
    stamp = int(captured["headers"]["webhook-timestamp"])
    # When someone who captured it replays it within the window under new ids, with its signature
    replays = [runtime.ingest.webhook(_webhook(fresh, PUSH, stamp, signature)) for fresh in ("d-2", "d-3")]
    # Then each is refused as unsigned, and still only one mission exists
    assert [(r["statusCode"], json.loads(r["body"])["message"]) for r in replays] == [(401, "bad signature")] * 2
    assert len(published) == 1 and len(runtime.missions.list_for_user("ann")) == 1


def test_a_stale_webhook_is_refused_and_an_identical_redelivery_is_a_duplicate(tmp_path: Any):
    runtime, _ = _webhook_runtime(tmp_path)
    # Given a delivery correctly signed six minutes ago / When delivered / Then refused, nothing started
    stale = runtime.ingest.webhook(_webhook("d-old", PUSH, stamp=int(time.time()) - 360))
    assert (stale["statusCode"], json.loads(stale["body"])["message"]) == (401, "stale timestamp")
    assert runtime.missions.list_for_user("ann") == []
    # Given a fresh delivery / When it arrives twice, byte for byte
    event = _webhook("d-new", PUSH)
    first, again = runtime.ingest.webhook(event), runtime.ingest.webhook(event)
    # Then it is accepted once, the second answered as a duplicate (2xx), and one mission started
    assert (first["statusCode"], again["statusCode"]) == (202, 200)
    assert json.loads(again["body"]) == {"duplicate": True, "delivery_id": "d-new"}
    assert len(runtime.missions.list_for_user("ann")) == 1


def test_an_answer_that_meets_an_outage_is_not_lost(runtime: Runtime, monkeypatch: pytest.MonkeyPatch):
    # Given a question, and Step Functions throttling the first hand-over of its answer
    mission_id = start(runtime)
    interrupt_id = _question(runtime, mission_id)
    fake = executions(runtime)
    send = fake.send_success
    refusals = [DependencyUnavailable("Step Functions is unavailable (ThrottlingException)")]

    def throttled(token: str, output: str) -> None:
        if refusals:
            raise refusals.pop()
        send(token, output)

    monkeypatch.setattr(fake, "send_success", throttled)
    path = f"/missions/{mission_id}/interrupts/{interrupt_id}"
    # When the user answers / Then 503 says retry, and the question is still open (not "answered")
    status, headers, body = exchange(runtime, "POST", path, {"decision": "A"})
    assert status == 503 and headers["retry-after"]
    assert runtime.interrupts.get(mission_id, interrupt_id).status == "pending"
    assert call(runtime, "GET", f"/missions/{mission_id}")[1]["pending_interrupt"]["interrupt_id"] == interrupt_id
    # When the client retries / Then the answer reaches the execution, once, and the mission runs again
    assert call(runtime, "POST", path, {"decision": "A"}) == (200, {"interrupt_id": interrupt_id, "status": "answered"})
    assert len(fake.answered) == 1 and runtime.missions.get(mission_id).status == MissionStatus.RUNNING
    _, events = call(runtime, "GET", f"/missions/{mission_id}/events")
    assert [e["type"] for e in events["events"]].count("interrupt.answered") == 1


# --------------------------------------------------------------------------- a budget per mission


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


def test_every_response_names_its_request_the_way_its_logs_do(runtime: Runtime):
    # Given a request that succeeds, one refused at the edge and one refused by its route
    ok = exchange(runtime, "GET", "/capabilities")
    refused = exchange(runtime, "POST", "/missions", raw=b"not json")
    missing = exchange(runtime, "GET", "/missions/m_none")
    # Then each carries its correlation id as a header, and an error body carries the same one
    for status, headers, _body in (ok, refused, missing):
        assert headers.get("x-correlation-id"), (status, headers)
    for status, headers, body in (refused, missing):
        assert status in (400, 404) and body["correlation_id"] == headers["x-correlation-id"]


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


def test_me_names_the_user_and_where_their_learned_preferences_live(runtime: Runtime):
    status, me = call(runtime, "GET", "/me", user="ann@example.org")
    assert status == 200 and me == {
        "user_id": "ann@example.org",
        "preferences_namespace": "user_preferences:ann_example.org",
        "operator": False,
    }
    assert call(runtime, "GET", "/me", user=None)[0] == 401
