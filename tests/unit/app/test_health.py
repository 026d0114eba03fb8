"""Liveness, readiness and tool health (missions.service.health) through the API, on in-memory adapters."""

from __future__ import annotations

from typing import Any

import pytest

from missions.app.runtime import Runtime
from missions.core.mission.events import Event, EventType
from missions.service.health import Readiness, tool_health
from tests.support.api import call, start
from tests.support.fakes import memory_runtime


@pytest.fixture()
def runtime() -> Runtime:
    return memory_runtime(operators=["ops"])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_health_answers_without_a_token():
    # Given no caller at all / When GET /health / Then 200 ok
    status, body = call(memory_runtime(), "GET", "/health", user=None)
    assert (status, body) == (200, {"status": "ok"})


def test_ready_names_every_failing_dependency_and_keeps_its_answer_briefly(runtime: Runtime):
    # Given a table that answers and a bus that does not (its error quotes a credential)
    calls: list[str] = []

    def table() -> None:
        calls.append("table")

    def bus() -> None:
        calls.append("bus")
        raise ConnectionError("endpoint down; key sk-proj-abcdefghijklmnopqrstuvwx")

    clock = Clock()
    runtime.readiness = Readiness({"table:missions": table, "bus": bus}, ttl_seconds=10, clock=clock)  # type: ignore[misc]
    # When /ready is asked without a token / Then 503, naming the bus (without the key), the table ok
    status, body = call(runtime, "GET", "/ready", user=None)
    assert status == 503 and body["ready"] is False
    assert body["checks"]["table:missions"]["ok"] is True
    assert body["checks"]["bus"]["ok"] is False and "ConnectionError" in body["checks"]["bus"]["error"]
    assert "sk-proj" not in body["checks"]["bus"]["error"]
    # When it is asked again within the TTL / Then nothing is asked again
    clock.now += 5
    assert call(runtime, "GET", "/ready", user=None)[1]["age_seconds"] == 5
    assert calls == ["bus", "table"]  # by name
    # When the TTL has passed / Then every check runs again
    clock.now += 5
    call(runtime, "GET", "/ready", user=None)
    assert calls == ["bus", "table", "bus", "table"]


def test_ready_is_200_when_everything_answers(runtime: Runtime):
    runtime.readiness = Readiness({"table:missions": lambda: None}, ttl_seconds=0)  # type: ignore[misc]
    status, body = call(runtime, "GET", "/ready", user=None)
    assert status == 200 and body["ready"] is True and body["checks"]["table:missions"]["error"] is None


def completed(tool: str, status: str, duration_ms: Any, **extra: Any) -> Event:
    payload = {"tool": tool, "status": status, "duration_ms": duration_ms, **extra}
    return Event(type=EventType.TOOL_COMPLETED, mission_id="m_1", stage="execute", payload=payload)


def test_tool_health_counts_failures_and_latency_per_tool_and_skips_replays():
    # Given four calls of search (one timeout) and one of cart, a replayed call and an unrelated event
    events = [
        completed("search", "success", 10),
        completed("search", "timeout", 400),
        completed("search", "success", 20),
        completed("search", "not_found", 30),  # an answer, not a failure
        completed("search", "error", 5, replayed=True),
        completed("cart", "error", 7.5),
        Event(type=EventType.AGENT_COMPLETED, mission_id="m_1", payload={"duration_ms": 3}),
    ]
    # When health is computed / Then per tool, sorted, with nearest-rank percentiles
    search, cart = tool_health(events)[1], tool_health(events)[0]
    assert (search["tool"], search["calls"], search["errors"], search["error_rate"]) == ("search", 4, 1, 0.25)
    assert search["latency_ms"] == {"mean": 115.0, "p50": 20.0, "p95": 400.0, "max": 400.0}
    assert (cart["tool"], cart["calls"], cart["error_rate"]) == ("cart", 1, 1.0)


def test_tool_metrics_are_the_callers_own_unless_an_operator_asks_for_all(runtime: Runtime):
    # Given a mission of ann's and one of bob's, each with a tool call in its timeline
    for user, status in (("ann", "success"), ("bob", "error")):
        mission_id = start(runtime, user=user)
        runtime.events.append(mission_id, "0002-execute", [completed("catalog.search", status, 12)])
    # When ann asks / Then she sees her own call only
    status, mine = call(runtime, "GET", "/metrics/tools?capability=shopping", user="ann")
    assert status == 200 and mine["scope"] == "mine" and mine["missions"] == 1
    assert [(t["tool"], t["calls"], t["errors"]) for t in mine["tools"]] == [("catalog.search", 1, 0)]
    # When she asks for everyone's / Then 403; an operator gets both calls
    assert call(runtime, "GET", "/metrics/tools?capability=shopping&scope=all", user="ann")[0] == 403
    status, every = call(runtime, "GET", "/metrics/tools?capability=shopping&scope=all", user="ops")
    assert status == 200 and every["tools"][0]["calls"] == 2 and every["tools"][0]["error_rate"] == 0.5
    # And an unknown capability is 422, no token 401
    assert call(runtime, "GET", "/metrics/tools?capability=nope", user="ann")[0] == 422
    assert call(runtime, "GET", "/metrics/tools?capability=shopping", user=None)[0] == 401
