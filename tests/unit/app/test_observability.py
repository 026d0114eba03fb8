"""Observability in one place: every handler logs JSON with the mission as correlation id, module
loggers included, and a stage publishes its latency, model calls, tokens and cost per capability."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest

from functions.stage.handler import lambda_handler as stage_handler
from functions.status.handler import lambda_handler as status_handler
from missions.app import observability
from missions.core.mission.envelope import Counters
from missions.core.mission.requests import MissionRequest
from missions.local.moto import LocalContext
from missions.ports.missions import MissionRecord
from missions.service.launcher import build_envelope
from tests.support.fakes import memory_runtime


@pytest.fixture()
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logger and Metrics made anew for this test, writing to its captured streams."""
    monkeypatch.setattr(observability, "_made", {})
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", f"missions-test-{uuid.uuid4().hex}")  # a logger of its own
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_module_logger_writes_json_with_the_mission_as_correlation_id(fresh, capsys):
    # Given the status function hearing of an execution whose mission does not exist
    event = {
        "detail": {
            "executionArn": "arn:aws:states:us-east-1:123456789012:execution:sm:m_ghost",
            "name": "m_ghost",
            "status": "FAILED",
        }
    }
    # When it runs
    status_handler(event, LocalContext("missions-status"), runtime=memory_runtime())
    # Then the service module's warning is a JSON line naming the mission as its correlation id
    captured = capsys.readouterr()
    lines = _json_lines(captured.err)
    module = logging.getLogger("missions.service.control")
    diagnosis = (captured, module.disabled, module.getEffectiveLevel(), logging.getLogger("missions").handlers)
    warning = next((line for line in lines if "unknown mission" in line["message"]), None)
    assert warning is not None, diagnosis
    assert warning["level"] == "WARNING" and warning["correlation_id"] == "m_ghost"
    assert warning["location"].startswith("execution_ended") and warning["function_name"] == "missions-status"


def test_a_stage_publishes_what_it_cost_per_capability(fresh, capsys):
    # Given a shopping mission's first stage, on the offline model
    runtime = memory_runtime()
    envelope = build_envelope(MissionRequest(capability="shopping", goal="the cheapest USB-C charger"))
    runtime.missions.create(
        MissionRecord(mission_id=envelope.mission_id, user_id="u", capability="shopping", goal="g", status="running")
    )
    request = {"stage": "execute", "mode": "run", "envelope": runtime.codec.encode(envelope), "hop": 0}
    # When the stage function runs it
    stage_handler(request, LocalContext("missions-stage-execute"), runtime=runtime)
    # Then one EMF document carries the stage's latency and model use, by capability
    documents = [d for d in _json_lines(capsys.readouterr().out) if "_aws" in d]
    [document] = [d for d in documents if "StageLatency" in d]
    [directive] = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Missions" and "capability" in directive["Dimensions"][0]
    assert document["capability"] == "shopping"
    names = {metric["Name"] for metric in directive["Metrics"]}
    assert {"StageLatency", "LLMCalls", "TokensIn", "TokensOut", "CostUSD"} <= names
    [latency] = document["StageLatency"] if isinstance(document["StageLatency"], list) else [document["StageLatency"]]
    assert latency > 0
    # and each model call one of its own, by agent, configuration version and model
    calls = [d for d in documents if "ModelCalls" in d]
    assert len(calls) == 1 and calls[0]["agent"] == "execute" and calls[0]["model"] == "scripted"
    assert {"capability", "agent", "version", "model"} <= set(calls[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0])


def test_disabled_metrics_print_nothing_even_past_powertools_batch_of_100(fresh, capsys, monkeypatch):
    # Given metrics disabled, as the emulation disables them (stdout is the CLI's output there)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # When more stages end than Powertools batches before it flushes by itself
    for _ in range(150):
        observability.stage_metrics("shopping", "execute", 1.0, Counters(), Counters(), None)
    # Then nothing was printed
    assert capsys.readouterr().out == ""


def test_the_tracer_is_not_made_unless_the_settings_ask(fresh):
    # Given a runtime whose settings leave tracing off / When a handler runs
    event = {"detail": {"executionArn": "a:b:m_x", "name": "m_x", "status": "FAILED"}}
    status_handler(event, LocalContext("missions-status"), runtime=memory_runtime())
    # Then no Tracer (and no X-Ray SDK import) was paid for
    assert "tracer" not in observability._made
