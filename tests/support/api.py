"""Requests through the HTTP API handler, as API Gateway hands them over, for the API's tests."""

from __future__ import annotations

import base64
import json
from typing import Any

from missions.app import api
from missions.app.runtime import Runtime
from missions.local.devserver import http_event
from missions.local.moto import LocalContext
from missions.ports.checkpoints import Checkpoint
from tests.support.fakes import FakeExecutions

GOAL = "find the cheapest USB-C charger"


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


def _ask(runtime: Runtime, mission_id: str) -> str:
    """A stage asks (its checkpoint says the mission is asking, after the execution's first), not yet
    answerable."""
    progress = {"stage": "present", "counters": {"agent_hops": 2}, "asking": "i_1"}
    asked = Checkpoint(thread_id=mission_id, checkpoint_id="0002-present", parent_id=None, stage="present", envelope={})
    runtime.checkpoints.put(asked.model_copy(update={"progress": progress}))
    return "i_1"


def _question(runtime: Runtime, mission_id: str, token: str = "token-1") -> str:
    """The waitForTaskToken function stores the question's token: now it can be answered."""
    interrupt = {"id": "i_1", "kind": "choice", "stage": "present", "question": "which one?", "options": ["A", "B"]}
    event = {"envelope": {"mission_id": mission_id, "interrupt": interrupt}, "task_token": token}
    runtime.interrupt_service.handle(event)
    return "i_1"
