"""ANTHROPIC_API_KEY (or MISSIONS_LLM_PROVIDER=anthropic) switches the local CLI to the Anthropic provider:
driven here by a local server speaking the Messages API, through the anthropic SDK in the CLI's process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.models.fake_anthropic import FakeAnthropic

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e


def run_cli(*args: str, **environment: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "AWS_", "MISSIONS_"))}
    env.update(environment)
    return subprocess.run(
        [sys.executable, "-m", "missions.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


def test_a_mission_runs_on_anthropic_streaming_each_answer_with_its_accounting(tmp_path):
    (tmp_path / "tax.py").write_text(
        'def compute_tax(amount, rate=0.2):\n    """Tax owed."""\n    return amount * rate\n'
    )
    with FakeAnthropic() as server:
        # Given a Messages API scripted to answer each LLM stage of a code question
        server.enqueue(
            {"intent_type": "locate", "goals": ["where is compute_tax defined"], "search_terms": ["compute_tax"]},
            1000,
            500,
        )
        server.enqueue(
            {
                "goal": "where is compute_tax defined",
                "steps": [{"tool": "code.find_symbol", "params": {"name": "compute_tax"}, "why": "definition"}],
            }
        )
        server.enqueue(
            {
                "summary": "compute_tax is defined in tax.py",
                "findings": [{"claim": "compute_tax is defined here", "citations": ["tax.py:1"]}],
            }
        )
        server.enqueue({"decision": "COMPLETE", "verdict": "answered"})
        # When the user runs a mission with ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL set
        result = run_cli(
            "run",
            "code_analysis",
            "Where is compute_tax defined?",
            "--repo",
            str(tmp_path),
            "--json",
            ANTHROPIC_API_KEY="sk-ant-test",
            ANTHROPIC_BASE_URL=server.base_url,
            MISSIONS_ANTHROPIC_MODELS=json.dumps({"planner": "claude-sonnet-4-5"}),
        )
        # Then every LLM stage asked the Messages API, streaming, with its role's model and a forced tool
        assert result.returncode == 0, result.stderr + result.stdout
        assert [r["model"] for r in server.requests] == [
            "claude-haiku-4-5",
            "claude-sonnet-4-5",
            "claude-haiku-4-5",
            "claude-haiku-4-5",
        ]
        assert all(r["stream"] is True and r["tool_choice"]["type"] == "tool" for r in server.requests)
    outcome = json.loads(result.stdout)
    assert outcome["terminal_reason"] == "completed" and outcome["citations"] == ["tax.py:1"]
    # And the tokens were counted (the intent call's 1000 in, the three others' 10)
    assert outcome["counters"]["llm_calls"] == 4 and outcome["counters"]["tokens_in"] == 1000 + 3 * 10
    assert outcome["counters"]["cost_usd"] > 0


def test_bedrock_is_refused_locally_in_one_line_saying_why():
    # When the user asks the local emulation for Bedrock / Then one line says it needs AWS, nothing runs
    result = run_cli("run", "shopping", "a lamp", MISSIONS_LLM_PROVIDER="bedrock")
    assert result.returncode != 0
    assert "Bedrock runs in AWS only" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_classify_asks_anthropic_for_the_goals_shape():
    with FakeAnthropic() as server:
        # Given a model that sees a hierarchical plan with sequential steps and three services
        analysis = {
            "subgoals": 4,
            "dependencies": "sequential",
            "external_services": 3,
            "planning": "hierarchical",
            "review_loop": True,
        }
        server.enqueue(analysis)
        # When a goal is classified with ANTHROPIC_API_KEY set
        result = run_cli(
            "classify",
            "Plan a 5-day Paris trip",
            "--json",
            ANTHROPIC_API_KEY="sk-ant-test",
            ANTHROPIC_BASE_URL=server.base_url,
        )
    # Then the model's analysis decided it: complex (level 3), from the LLM
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert (found["level"], found["source"], found["analysis"]) == (3, "llm", analysis)
    assert server.requests[0]["model"] == "claude-haiku-4-5"
