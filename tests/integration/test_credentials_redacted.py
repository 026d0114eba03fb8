"""An OpenAI-compatible server that quotes the API key back in its refusal: the key appears nowhere a
mission stores anything, nor in any answer of the HTTP API. Run on the embedded emulation (moto), with
the real OpenAI provider and SDK against a local fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from missions.app import api
from missions.local.devserver import http_event
from missions.local.emulation import LocalCloud
from missions.local.moto import LocalContext
from missions.service.checkpoints import states
from tests.support.models.fake_openai import FakeOpenAI, error_body

pytestmark = pytest.mark.integration
API_KEY = "sk-live-Zq8Xv2Lr9Tn4Wb7Kc1Hd6Fj3Mp5Sg0Ye"  # what the operator configured


def everything_stored(cloud: LocalCloud, mission_id: str) -> str:
    """Events, checkpoints (blobs resolved) and the mission record, as text."""
    runtime = cloud.runtime
    events, _ = runtime.events.read(mission_id, limit=5000)
    parts = [json.dumps([e.model_dump(mode="json") for e in events])]
    for checkpoint, state in states(runtime.checkpoints, mission_id):  # what each keeps, and its whole state
        parts.append(checkpoint.model_dump_json())
        parts.append(runtime.codec.decode(state).model_dump_json())
    parts.append(runtime.missions.get(mission_id).model_dump_json())
    return "\n".join(parts)


def get(cloud: LocalCloud, path: str, user: str = "local") -> tuple[int, Any]:
    path, _, query = path.partition("?")
    event = http_event("GET", path, query, {}, b"", user)
    result = api.handle(event, LocalContext("missions-api"), cloud.runtime)
    return int(result["statusCode"]), json.loads(result["body"])


def test_a_key_the_model_server_echoes_is_not_stored_or_shown(tmp_path: Path):
    # Given an OpenAI-compatible server that refuses every call, quoting the key it was sent
    (tmp_path / "tax.py").write_text("def compute_tax(amount):\n    return amount * 0.2\n")
    refusal = f"Incorrect API key provided: {API_KEY}. Authorization: Bearer {API_KEY} was rejected."
    with FakeOpenAI() as server:
        for _ in range(20):
            server.enqueue(status=401, body=error_body(401, refusal, code="invalid_api_key"))
        settings = {
            "llm_provider": "openai",
            "openai_api_key": API_KEY,
            "openai_base_url": server.base_url,
            "repo_roots": [str(tmp_path)],
        }
        with LocalCloud(["code_analysis"], settings=settings) as cloud:
            # When a mission runs into it
            mission_id = cloud.start("code_analysis", "Where is compute_tax defined?")
            cloud.wait(mission_id, timeout=180)
            stored = everything_stored(cloud, mission_id)
            shown = [get(cloud, f"/missions/{mission_id}"), get(cloud, f"/missions/{mission_id}/events?limit=500")]
    # Then the server was asked with the key, and the mission failed with the refusal on record
    assert server.requests, "the model server was never called"
    assert "Incorrect API key provided" in stored, "the refusal itself should be on record"
    # but the key is nowhere: not in what was stored, not in what the API answered
    assert API_KEY not in stored
    for status, body in shown:
        assert status == 200, body
        assert API_KEY not in json.dumps(body)
    assert "Incorrect API key provided: [REDACTED]" in stored
