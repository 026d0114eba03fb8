"""The HTTP API over the composition root on in-memory adapters: statuses, bodies and who may see what,
with no AWS and no moto. Domain errors map to HTTP statuses in one place (missions.app.api)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from missions.app import api
from missions.app.runtime import Runtime
from missions.core.envelope import InterruptKind
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
from missions.local.devserver import http_event
from missions.ports.store import InterruptRecord, MissionStatus
from missions.service.lifecycle import Lifecycle
from tests.support.fakes import FakeExecutions, memory_runtime

GOAL = "find the cheapest USB-C charger"


@pytest.fixture()
def runtime() -> Runtime:
    return memory_runtime()


def call(
    runtime: Runtime,
    method: str,
    path: str,
    body: Any = None,
    user: str | None = "ann",
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    raw = json.dumps(body).encode() if body is not None else b""
    path, _, query = path.partition("?")
    all_headers = {"content-type": "application/json", **(headers or {})}
    result = api.handle(http_event(method, path, query, all_headers, raw, user), None, runtime)
    text = result.get("body") or ""
    return int(result["statusCode"]), json.loads(text) if text else None


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


# --------------------------------------------------------------------------- starting


def test_a_mission_starts_through_the_launcher_and_a_repeated_key_is_the_same_mission(runtime: Runtime):
    key = {"idempotency-key": "order-7"}
    first = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)
    again = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL}, headers=key)
    assert first[0] == 202 and first[1]["status"] == "started"
    assert again == (200, {"mission_id": first[1]["mission_id"], "status": "duplicate", "capability": "shopping"})
    assert executions(runtime).started == [first[1]["mission_id"]]


def test_an_unknown_capability_is_422_naming_the_installed_ones(runtime: Runtime):
    status, body = call(runtime, "POST", "/missions", {"capability": "astrology", "goal": GOAL})
    assert status == 422 and "shopping" in body["message"]
    assert runtime.missions.list_for_user("ann") == []


def test_a_body_that_is_not_json_is_415(runtime: Runtime):
    event = http_event("POST", "/missions", "", {"content-type": "text/plain"}, b"goal=x", "ann")
    result = api.handle(event, None, runtime)
    assert result["statusCode"] == 415


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


def _question(runtime: Runtime, mission_id: str, token: str = "token-1") -> str:
    record = InterruptRecord(
        mission_id=mission_id,
        interrupt_id="i_1",
        kind=InterruptKind.CHOICE,
        stage="present",
        question="which one?",
        options=["A", "B"],
        task_token=token,
    )
    runtime.interrupts.put(record)
    Lifecycle(runtime.missions).waiting(mission_id, record.interrupt_id)
    return record.interrupt_id


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
    executions(runtime).gone_tokens.add("late")
    status, body = call(runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"})
    assert status == 409 and "can no longer be answered" in body["message"]
    assert runtime.interrupts.get(mission_id, interrupt_id).status == "expired"
    _, events = call(runtime, "GET", f"/missions/{mission_id}/events")
    assert [e["type"] for e in events["events"]][-2:] == ["interrupt.answered", "interrupt.expired"]


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
    # When a route reaches it
    answer_status, body = call(runtime, "GET", "/repositories")
    # Then the API answers the error's status with its reason, and 503 says when to retry
    assert answer_status == status and body["statusCode"] == status and body["message"]
    assert str(error) in body["message"]


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
    assert all(kind in api.ERROR_STATUS for kind in requestable)
