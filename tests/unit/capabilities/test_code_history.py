"""code_analysis's history questions ("when and why did this line change?"), answered through the real
git MCP server (mcp-server-git from PyPI, stdio) from a local checkout's history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from capabilities.code_analysis import history
from capabilities.code_analysis.questions import classify
from missions.adapters.mcp_client import McpSessions
from missions.core.capability import registry
from missions.core.mission.events import EventType
from missions.service.mcp_tools import McpTools
from tests.support.driver import DirectDriver
from tests.support.mcp_servers import gateway, git_repo

CAPABILITY = registry.load("code_analysis")


@pytest.mark.parametrize(
    ("goal", "subjects"),
    [
        ("When and why did compute_tax change?", ["compute_tax"]),
        ("Who changed the rounding in compute_tax?", ["compute_tax"]),
        ("Why was MAX_RATE introduced?", ["MAX_RATE"]),
        ("Show the history of compute_tax", ["compute_tax"]),
    ],
)
def test_a_question_about_change_is_a_history_question(goal: str, subjects: list[str]):
    asked = classify(goal)
    assert asked.kind == "history" and asked.subjects == subjects
    assert not {"chang", "introduc", "history"} & set(asked.terms)  # the words of asking are not searched


@pytest.mark.parametrize(
    "goal",
    ["Where is compute_tax defined?", "What happens when an item is added to the cart?", "Who calls compute_tax?"],
)
def test_other_questions_are_not_history_questions(goal: str):
    assert classify(goal).kind != "history"


@pytest.fixture
def driver() -> Iterator[DirectDriver]:
    driver = DirectDriver(CAPABILITY)
    with gateway() as mcp:
        driver.services.mcp = mcp
        yield driver


def shop(tmp_path: Path) -> Path:
    return git_repo(
        tmp_path / "shop",
        [
            (
                "add compute_tax",
                {"tax.py": "def compute_tax(amount):\n    return amount * 0.2\n", "README": "a shop\n"},
            ),
            ("document the shop", {"README": "a shop that sells things\n"}),
            (
                "raise the tax rate to 25%: the 2026 budget",
                {"tax.py": "def compute_tax(amount):\n    return amount * 0.25\n"},
            ),
            ("more words", {"README": "a shop that sells many things\n"}),
        ],
    )


def test_when_and_why_a_line_changed_is_answered_from_the_history(driver: DirectDriver, tmp_path: Path):
    # Given a repository whose tax rate changed in the third of four commits
    repo = shop(tmp_path)
    # When the mission asks when and why compute_tax changed
    env = driver.run("When and why did compute_tax change?", context={"repo": str(repo)})
    # Then the answer names the commit that changed the rate, with its reason and what the line was before
    assert env.terminal_reason == "completed", env.errors
    answer = env.outputs["integration"]
    rate = next(f for f in answer["findings"] if "0.25" in f["claim"])
    assert rate["citations"] == ["tax.py:2"]
    assert '"raise the tax rate to 25%: the 2026 budget"' in rate["claim"]
    assert "(before: `return amount * 0.2`)" in rate["claim"] and "by Ada <ada@example.com>" in rate["claim"]
    # and the definition line was last changed when it was added, in the first commit
    added = next(f for f in answer["findings"] if f["citations"] == ["tax.py:1"])
    assert '"add compute_tax"' in added["claim"] and "(the line was added then)" in added["claim"]
    # and the git server's calls are in the events like any tool's, with their source
    events, _ = driver.stores.events.read(env.mission_id, limit=1000)
    started = [e.payload for e in events if e.type is EventType.TOOL_STARTED and e.payload.get("source")]
    assert {p["source"] for p in started} == {"mcp:git"}
    assert [p["tool"] for p in started][:2] == ["git__git_log", "git__git_show"]
    assert all("repo_path" in p["params"] for p in started)


def test_a_repository_without_history_says_so(driver: DirectDriver, tmp_path: Path):
    # Given a directory of code that is not a git repository
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "tax.py").write_text("def compute_tax(amount):\n    return amount * 0.25\n")
    # When the mission asks about its history
    env = driver.run("When and why did compute_tax change?", context={"repo": str(plain)})
    # Then it completes without inventing a change: the log's failure is its evidence
    assert env.terminal_reason == "completed", env.errors
    assert not any("last changed" in f["claim"] for f in env.outputs["integration"]["findings"])
    traversed = env.outputs["traverser"]["results"]
    log = next(run for run in traversed if run["tool"] == "git__git_log")
    assert log["status"] == "error" and "MCP server 'git' refused git_log" in log["error"]
    # and the answer says the history could not be read, in the server's words
    assert (
        "(gap: the history could not be read: error: MCP server 'git' refused git_log"
        in env.outputs["integration"]["answer"]
    )


def test_where_stdio_servers_are_refused_the_answer_says_why(tmp_path: Path):
    # Given the git server refused as in Lambda (no child processes), and a repository with history
    driver = DirectDriver(CAPABILITY)
    driver.services.mcp = McpTools(McpSessions(), allow_stdio=False)
    repo = shop(tmp_path)
    # When the mission asks when compute_tax changed
    env = driver.run("When and why did compute_tax change?", context={"repo": str(repo)})
    # Then it ends saying why it could not read the history, and claims no change
    answer = env.outputs["integration"]["answer"]
    assert "the history could not be read" in answer and "runs as a child process (stdio)" in answer
    assert not any("last changed" in f["claim"] for f in env.outputs["integration"]["findings"])


def test_a_commit_as_the_server_shows_it_is_read_back():
    shown = (
        "commit " + "a" * 40 + "\nAuthor: Ada <ada@example.com>\nDate:   2026-01-02 03:04:05 +0000\n\n"
        "    raise the rate\n    \n    the 2026 budget\n\n--- tax.py\n+++ tax.py\n"
        "@@ -1,2 +1,2 @@\n def compute_tax(amount):\n-    return amount * 0.2\n+    return amount * 0.25\n"
    )
    commit = history.parse_show(shown)
    assert commit is not None and commit.message == "raise the rate\n\nthe 2026 budget"
    pending = {("tax.py", 2): "    return amount * 0.25", ("tax.py", 1): "def compute_tax(amount):"}
    changes = history.attribute(commit, pending)
    assert [c["line"] for c in changes] == [2] and changes[0]["before"] == ["return amount * 0.2"]
    assert list(pending) == [("tax.py", 1)]  # a context line is not a change
