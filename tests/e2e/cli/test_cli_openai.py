"""OPENAI_BASE_URL switches the CLI to the OpenAI provider: driven here by a local fake server."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.models.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e


@pytest.fixture()
def repo(tmp_path):
    (tmp_path / "tax.py").write_text(
        'def compute_tax(amount, rate=0.2):\n    """Tax owed."""\n    return amount * rate\n'
    )
    return tmp_path


def run_cli(server: FakeOpenAI, repo: Path, goal: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_"))}
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="sk-test",
        MISSIONS_OPENAI_MODELS=json.dumps({"planner": "gpt-4o", "critic": "gpt-4o"}),
    )
    return subprocess.run(
        [sys.executable, "-m", "missions.cli", "run", "code_analysis", goal, "--repo", str(repo), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def script(server: FakeOpenAI, synthesis_citation: str, syntheses: int = 1) -> None:
    """The answers of a mission's model calls, in order; the synthesizer's `syntheses` times (it is asked
    again after an answer its evidence check refuses)."""
    server.enqueue(
        content=json.dumps(
            {"intent_type": "locate", "goals": ["where is compute_tax defined"], "search_terms": ["compute_tax"]}
        ),
        prompt_tokens=1000,
        completion_tokens=500,
    )
    server.enqueue(
        content="Here is the plan:\n```json\n"
        + json.dumps(
            {
                "goal": "where is compute_tax defined",
                "steps": [{"tool": "code.find_symbol", "params": {"name": "compute_tax"}, "why": "definition"}],
            }
        )
        + "\n```"
    )
    for _ in range(syntheses):
        server.enqueue(
            content=json.dumps(
                {
                    "summary": "compute_tax is defined in tax.py",
                    "findings": [{"claim": "compute_tax is defined here", "citations": [synthesis_citation]}],
                }
            )
        )
    server.enqueue(content=json.dumps({"decision": "COMPLETE", "verdict": "answered"}))


def test_a_mission_runs_on_an_openai_compatible_server_with_accounting(repo):
    with FakeOpenAI() as server:
        # Given a server scripted to answer each LLM stage (the planner's JSON wrapped in prose)
        script(server, "tax.py:1")
        # When the user runs a mission with OPENAI_BASE_URL set
        result = run_cli(server, repo, "Where is compute_tax defined?")
        # Then every LLM stage asked the server, with the model of its role and a JSON schema
        assert result.returncode == 0, result.stderr + result.stdout
        models = [request["model"] for request in server.requests]
        assert models == ["gpt-4o-mini", "gpt-4o", "gpt-4o-mini", "gpt-4o"]
        assert all(r["response_format"]["type"] == "json_schema" for r in server.requests)
    outcome = json.loads(result.stdout)
    assert outcome["terminal_reason"] == "completed"
    assert outcome["citations"] == ["tax.py:1"]
    # And tokens and dollars were accounted (gpt-4o-mini: 1000 in / 500 out = $0.00045 for intent alone)
    assert outcome["counters"]["llm_calls"] == 4
    assert outcome["counters"]["tokens_in"] == 1000 + 3 * 10
    assert outcome["counters"]["cost_usd"] > 0.00045


def test_a_hallucinated_citation_breaks_the_evidence_chain_and_ends_the_mission(repo):
    with FakeOpenAI() as server:
        # Given a synthesizer answering, each time it is asked, with a line no tool returned
        script(server, "tax.py:99", syntheses=3)
        # When the mission runs
        result = run_cli(server, repo, "Where is compute_tax defined?")
        asked = len(server.requests)
    # Then the synthesizer was asked again twice (its repairs), the stage not retried after them, and the
    # mission ends through integration with the reason and each attempt's violation
    outcome = json.loads(result.stdout)
    assert result.returncode == 1
    assert asked == 2 + 3
    assert outcome["terminal_reason"] == "stage_failed:synthesizer"
    violations = [e for e in outcome["errors"] if e["kind"] == "EvidenceChainViolation" and "tax.py:99" in e["message"]]
    assert len(violations) == 3
    assert outcome["mission_status"] == "failed"
