"""The CLI as a user runs it: a real process, the embedded emulation, no network, no key."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e


def missions(*args: str, stdin: str | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "missions.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    (root / "billing").mkdir()
    (root / "billing" / "invoice.py").write_text(
        '"""Invoices."""\n\n\nclass InvoiceBuilder:\n    """Builds invoices from orders."""\n\n'
        "    def add_line(self, sku, quantity):\n        self.lines.append((sku, quantity))\n\n\n"
        'def compute_tax(amount, rate=0.2):\n    """Tax owed on an amount."""\n    return round(amount * rate, 2)\n'
    )
    (root / "app.py").write_text("from billing.invoice import compute_tax\n\nprint(compute_tax(10))\n")
    return root


def test_demo_question_answers_with_real_citations(repo):
    # Given a repository and a two-part question
    # When the user runs a mission with --json
    result = missions(
        "run",
        "code_analysis",
        "Where is compute_tax defined, and how does InvoiceBuilder add lines?",
        "--repo",
        str(repo),
        "--json",
    )
    # Then it completes with an answer whose citations point at lines that say what is claimed
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "SUCCEEDED" and outcome["terminal_reason"] == "completed"
    assert "compute_tax" in outcome["answer"] and "InvoiceBuilder" in outcome["answer"]
    assert outcome["citations"]
    for ref in outcome["citations"]:
        file, line = ref.rsplit(":", 1)
        assert (repo / file).exists()
        assert 1 <= int(line) <= len((repo / file).read_text().splitlines())
    assert "billing/invoice.py:11" in outcome["citations"]  # def compute_tax
    assert outcome["counters"]["llm_calls"] >= 4 and outcome["stages"][-1] == "integration"


def test_progress_is_shown_live_and_the_answer_printed(repo):
    # When the user runs without --json
    result = missions("run", "code_analysis", "Where is compute_tax defined?", "--repo", str(repo))
    # Then stages, tools and the summary appear
    assert result.returncode == 0, result.stderr
    for text in ("▶ perception", "code.find_symbol", "critic", "answer", "terminal reason", "completed"):
        assert text in result.stdout


def test_interrupt_is_asked_in_the_terminal_and_the_mission_resumes(repo):
    # Given a question too vague to search
    # When the user answers the clarification on stdin
    result = missions("run", "code_analysis", "help", "--repo", str(repo), stdin="the compute_tax function\n")
    # Then the mission resumes with the answer and finds the function
    assert result.returncode == 0, result.stderr
    assert "Which function" in result.stdout + result.stderr
    assert "billing/invoice.py:11" in result.stdout


def test_interrupt_answered_with_flag_in_json_mode(repo):
    result = missions("run", "code_analysis", "help", "--repo", str(repo), "--json", "--answer", "InvoiceBuilder")
    assert result.returncode == 0, result.stderr
    assert "InvoiceBuilder" in json.loads(result.stdout)["answer"]


def test_a_question_without_an_answer_is_one_json_document_saying_how_to_answer(repo):
    # When a script asks for JSON and the mission asks a question the run was given no answer for
    result = missions("run", "code_analysis", "help", "--repo", str(repo), "--json")
    # Then stdout holds one document with the question and how to answer it, exit code 3
    assert result.returncode == 3, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["outcome"] == "waiting" and document["question"]["text"]
    assert "--answer" in document["answer_with"]


def test_a_bound_ends_the_mission_cleanly_with_its_reason(repo):
    # When the user caps the stages at 5
    result = missions(
        "run", "code_analysis", "Where is compute_tax defined?", "--repo", str(repo), "--max-agent-hops", "5", "--json"
    )
    # Then the mission ends through integration with terminal reason max_agent_hops
    outcome = json.loads(result.stdout)
    assert result.returncode == 0
    assert outcome["terminal_reason"] == "max_agent_hops"
    assert outcome["counters"]["agent_hops"] <= 5 and outcome["stages"][-1] == "integration"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "nope", "goal"), "unknown capability 'nope'"),
        (("run", "code_analysis", "goal", "--repo", "/does/not/exist"), "is not a directory"),
        (("run", "code_analysis", "goal", "--max-agent-hops", "1"), "max-agent-hops"),
        (("run", "code_analysis", "goal", "--context", "[1]"), "must be a JSON object"),
        (("asl", "nope"), "unknown capability 'nope'"),
        (("run", "code_analysis", "   "), "the goal is empty"),
        (("run", "code_analysis", "x" * 10_001), "at most 10000 characters"),
    ],
)
def test_bad_arguments_give_one_line_errors(args, message):
    # When the user passes bad arguments
    result = missions(*args, timeout=60)
    # Then a clear message, no traceback, exit code 2
    assert result.returncode == 2
    assert message in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_capabilities_and_asl_commands():
    listed = missions("capabilities", "--json", timeout=60)
    assert listed.returncode == 0
    assert "code_analysis" in [c["name"] for c in json.loads(listed.stdout)]
    asl = missions("asl", "code_analysis", timeout=60)
    assert asl.returncode == 0
    machines = json.loads(asl.stdout)
    # both levels: the segment runs the stages, the mission's machine waits for people between segments
    segment = machines["segment"]
    begins = segment["States"][segment["StartAt"]]  # the segment's own end, then the stage to enter
    assert segment["States"][begins["Next"]]["Default"] == "perception"
    assert "await.clarification" in machines["mission"]["States"]
    assert machines["mission"]["States"]["segment"]["Resource"].endswith("startExecution.waitForTaskToken")


def test_classify_names_the_capability_and_the_complexity_level():
    result = missions("classify", "Which function parses the config in this repository?", "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert (found["capability"], found["level"], found["source"]) == ("code_analysis", 1, "offline")
    empty = missions("classify", "  ")
    assert empty.returncode == 2 and "empty" in empty.stderr and "Traceback" not in empty.stderr
