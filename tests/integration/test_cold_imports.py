"""Stages that call no LLM never import openai (it costs ~0.6 s of cold start)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from missions.local.emulation import LocalCloud
from missions.service.launcher import build_envelope
from missions.core.mission.requests import MissionRequest

settings = {"llm_provider": "openai", "openai_api_key": "sk-test", "openai_base_url": "http://127.0.0.1:9/v1"}
with LocalCloud(["code_analysis"], settings=settings) as cloud:
    envelope = build_envelope(MissionRequest(capability="code_analysis", goal="Where is EnvelopeCodec?",
                                             context={"repo": "."}), cloud.runtime.repositories)
    from missions.ports.missions import MissionRecord
    cloud.runtime.missions.create(MissionRecord(mission_id=envelope.mission_id, user_id="u",
                                                capability="code_analysis", goal="g"))
    import functions.stage.handler as handler
    from missions.local.moto import LocalContext
    request = {"stage": "perception", "mode": "run", "envelope": cloud.runtime.codec.encode(envelope)}
    result = handler.lambda_handler(request, LocalContext("perception"), runtime=cloud.runtime)
    assert result["next_stage"] == "intent", result["next_stage"]
    print("after non-LLM stage:", "openai" in sys.modules)
    try:
        handler.lambda_handler({"stage": "intent", "mode": "run", "envelope": result},
                               LocalContext("intent"), runtime=cloud.runtime)
    except Exception as exc:  # nothing listens on port 9: the call fails, after importing openai
        print("LLM stage failed as expected:", type(exc).__name__)
    print("after LLM stage:", "openai" in sys.modules)
"""


@pytest.mark.integration
def test_non_llm_stage_does_not_import_openai_even_when_openai_is_configured():
    # Given a runtime configured for OpenAI
    # When a non-LLM stage (perception) runs through the real handler, then an LLM stage
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=180)
    # Then openai was imported only by the LLM stage
    assert result.returncode == 0, result.stderr
    assert "after non-LLM stage: False" in result.stdout
    assert "after LLM stage: True" in result.stdout
