"""One mission of every capability on a real model: llama.cpp's own OpenAI-compatible server with Gemma 3
270M (tests/support/models/llama_server.py), reached through the OpenAI provider as a user reaches it, by setting
OPENAI_BASE_URL and nothing else (the settings `missions run` builds from the environment).

A 270M model gets most structured answers wrong, so what is held here is not success but truthfulness:
each mission ends (or waits for its user with a question), its status and terminal reason agree, a failure
carries its errors and no traceback, every model call is in the usage records with the tokens the server
counted and a cost, and on the wire every structured output was asked as response_format json_schema and
answered by the server's own implementation (its grammar-constrained sampling). A recording proxy between
the SDK and the server shows the wire (tests/support/models/llama_server.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from missions.cli._inputs import llm_settings
from missions.cli._render import BOUND_REASONS
from missions.core.capability import registry
from missions.core.mission.envelope import InterruptKind
from missions.local.emulation import LocalCloud
from tests.realmodel.conftest import FIGURES
from tests.support.api import call
from tests.support.models.llama_server import SERVER_MAX_TOKENS, RecordingProxy

pytestmark = pytest.mark.realmodel

# the README's small TypeScript package
UPLOADS = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "uploads-ts")
USER = "ada"
# each capability's own example goal, but code_analysis asks the README's question of a small package,
# not of this whole repository (its index alone would take minutes here)
GOALS = {"code_analysis": ("Where is toFile defined, and who calls it?", {"repo": UPLOADS})}
MAX_ANSWERS = 4  # questions answered (the first option, yes, approve) before the mission is left waiting
MISSION_TIMEOUT = 900.0  # each stage has its own timeout; this only keeps a hung mission from hanging CI
ENDED = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}


def answer_for(kind: str, options: list[str]) -> dict[str, Any]:
    """What a cooperative user answers: the first real option, yes to a confirmation or a review."""
    if kind == InterruptKind.CHOICE and options:
        return {"decision": next((o for o in options if o != "none"), options[0])}
    if kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW):
        return {"approved": True}
    return {"text": "Whatever you think is best."}


def user_settings(monkeypatch: pytest.MonkeyPatch, base_url: str) -> dict[str, Any]:
    """The settings `missions run` makes from an environment whose only model variable is OPENAI_BASE_URL."""
    for name in ("OPENAI_API_KEY", "MISSIONS_LLM_PROVIDER", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    # the global output ceiling (bounded generations), the same as the server's own cap on every reply; and
    # embeddings made locally, as the librarian's failure on a server without embeddings tells the user
    monkeypatch.setenv("MISSIONS_LLM_MAX_OUTPUT_TOKENS", str(SERVER_MAX_TOKENS))
    monkeypatch.setenv("MISSIONS_EMBEDDINGS", "local")
    settings = llm_settings()
    assert settings["llm_provider"] == "openai" and settings["openai_base_url"] == base_url
    assert settings["llm_max_output_tokens"] == SERVER_MAX_TOKENS and settings["embeddings"] == "local"
    return settings


def run_mission(cloud: LocalCloud, capability: str) -> tuple[str, str, list[str]]:
    """Start the capability's mission, answer up to MAX_ANSWERS questions; the execution's status, the id
    and the questions answered."""
    goal, context = GOALS.get(capability, (registry.load(capability).example_goal, {}))
    assert goal, f"{capability} has no example_goal: give it one (capability.toml) or a goal here"
    mission_id = cloud.start(capability, goal, context=context, user_id=USER)
    answered: list[str] = []
    while True:
        status = cloud.wait(mission_id, timeout=MISSION_TIMEOUT, until_interrupt=True)
        pending = cloud.runtime.interrupts.pending(mission_id) if status == "INTERRUPTED" else []
        if not pending or len(answered) >= MAX_ANSWERS:
            return status, mission_id, answered
        for record in pending:
            answered.append(str(record.kind))
            cloud.answer(mission_id, record.interrupt_id, answer_for(record.kind, list(record.options)))


@pytest.mark.parametrize("capability", registry.available())
def test_a_mission_ends_truthfully_through_the_openai_provider(capability, wire, monkeypatch, tmp_path):
    proxy, base_url = wire
    assert isinstance(proxy, RecordingProxy)
    settings = user_settings(monkeypatch, base_url)
    mark = proxy.mark()
    started = time.monotonic()
    # Given llama.cpp's server behind OPENAI_BASE_URL, as the only model setting
    with LocalCloud([capability], settings={**settings, "repo_roots": [UPLOADS]}) as cloud:
        # When one mission of the capability runs, its questions answered as a cooperative user would
        status, mission_id, questions = run_mission(cloud, capability)
        record = cloud.runtime.missions.get(mission_id)
        envelope = cloud.outcome(mission_id).envelope
        pending = cloud.runtime.interrupts.pending(mission_id)
        usage_status, usage = call(cloud.runtime, "GET", f"/missions/{mission_id}/usage", user=USER)
    wall = time.monotonic() - started
    exchanges = proxy.since(mark)
    reason = envelope.terminal_reason if envelope else record.terminal_reason
    errors = [e.model_dump() for e in envelope.errors] if envelope else []
    counters = envelope.counters if envelope else None
    FIGURES.append(
        {
            "capability": capability,
            "status": record.status,
            "reason": reason,
            "model_calls": len(exchanges),
            "abandoned": sum(e.abandoned for e in exchanges),
            "cut_off": sum(e.status == 200 and e.answer["choices"][0]["finish_reason"] == "length" for e in exchanges),
            "tool_calls": counters.tool_calls if counters else None,
            "cost_usd": counters.cost_usd if counters else None,
            "answers": len(questions),
            "wall_s": round(wall, 1),
            "error": (errors[-1]["message"][:160] if errors else ""),
        }
    )

    # Then it ended, or waits for its user with a question, and its status and reason agree
    assert status in ENDED | {"INTERRUPTED"}, f"{capability} still {status} after {MISSION_TIMEOUT:.0f} s"
    assert envelope is not None
    if status == "INTERRUPTED":
        assert record.status == "interrupted" and pending and all(p.question for p in pending)
    elif record.status == "completed":
        assert reason == "completed" or str(reason).startswith(BOUND_REASONS), reason
        assert not envelope.failed
    else:
        assert record.status == "failed", (record.status, reason)
        assert reason and reason != "completed" and not str(reason).startswith(BOUND_REASONS), reason
        # a failure says why: the errors, each with a message (none a traceback)
        assert errors and all(e["message"] for e in errors), reason
    assert "Traceback" not in json.dumps(errors) + str(reason) + str(record.terminal_reason)

    # Then every model call the server answered is in the usage records, with the tokens the server counted
    assert usage_status == 200, usage
    calls = usage["calls"]
    answered = [e for e in exchanges if e.status == 200]
    # an answer that was invalid (cut off, off its schema) was generated and is paid for: counted as well
    counted = sorted((c["tokens_in"], c["tokens_out"]) for c in calls if c["outcome"] != "abandoned" and c["tokens_in"])
    served = sorted((e.answer["usage"]["prompt_tokens"], e.answer["usage"]["completion_tokens"]) for e in answered)
    assert all(c["provider"] == "openai" for c in calls)
    assert len(calls) >= len(answered), (calls, len(answered))
    assert counted == served, (counted, served)
    assert all(c["tokens_in"] > 0 and c["cost_usd"] > 0 for c in calls if c["outcome"] == "ok"), calls
    assert counters is not None and counters.llm_calls <= len(counted)
    assert (counters.cost_usd > 0) == (counters.llm_calls > 0), counters
    assert round(sum(c["cost_usd"] for c in calls), 8) >= counters.cost_usd - 1e-9

    # Then on the wire: every structured output asked as json_schema (never the json_object fallback),
    # every answer the server's own, with its usage
    assert all(e.request["response_format"]["type"] == "json_schema" for e in exchanges), exchanges
    assert all(e.request["response_format"]["json_schema"]["schema"] for e in exchanges)
    for exchange in answered:
        usage_fields = exchange.answer["usage"]
        assert usage_fields["prompt_tokens"] > 0 and usage_fields["completion_tokens"] > 0, exchange.answer
        assert exchange.answer["choices"][0]["message"]["content"], exchange.answer
    assert all(e.status in (0, 200) for e in exchanges), [(e.status, e.answer) for e in exchanges]


def test_the_api_is_ready_with_the_model_server_behind_it(wire, monkeypatch):
    # Given llama.cpp's server behind OPENAI_BASE_URL (it has no GET /v1/models/{model}: the probe lists)
    _, base_url = wire
    with LocalCloud(["shopping"], settings=user_settings(monkeypatch, base_url)) as cloud:
        # When GET /ready asks every dependency
        status, report = call(cloud.runtime, "GET", "/ready")
    # Then the model provider's check passes with the rest
    assert report["checks"]["model:openai"] == {**report["checks"]["model:openai"], "ok": True, "error": None}
    assert status == 200 and report["ready"] is True, report
