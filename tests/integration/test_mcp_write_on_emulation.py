"""A real third-party MCP server's write tool, asked for and approved on the emulation (moto's Step Functions
waits on the question's task token): branch_maker and mcp-server-git's git_create_branch run exactly once
after the user's yes, and not at all after a no; the effect is read with dulwich."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from missions.core.capability import registry
from missions.core.mission.events import EventType
from missions.local.emulation import LocalCloud
from tests.support.mcp_servers import branches, git_repo


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    found = registry.Registry(package="tests.support.mcp_capabilities", plugins=dict)
    with LocalCloud(["branch_maker"], registry=found, settings={"repo_roots": [str(tmp_path)]}) as local:
        yield local


@pytest.mark.parametrize(("approved", "expected"), [(True, {"main", "feature"}), (False, {"main"})])
def test_the_mission_asks_and_the_write_runs_once_after_a_yes_and_never_after_a_no(
    cloud: LocalCloud, tmp_path: Path, approved: bool, expected: set[str]
):
    # Given a repository, and a mission that will create a branch in it
    repo = git_repo(tmp_path / "repo", [("first", {"a.py": "x = 1\n"})])
    mission_id = cloud.start("branch_maker", "make a branch", context={"repo": str(repo), "branch": "feature"})
    # When it asks, the question names the tool and its risk, and nothing has been written yet
    assert cloud.wait(mission_id, timeout=60, until_interrupt=True) == "INTERRUPTED"
    (asked,) = cloud.runtime.interrupts.pending(mission_id)
    assert asked.kind.value == "confirmation"
    assert asked.data["tool_id"] == "git__git_create_branch" and asked.data["risk"] == "write"
    assert branches(repo) == {"main"}
    # and the user answers
    cloud.answer(mission_id, asked.interrupt_id, {"approved": approved})
    cloud.wait(mission_id, timeout=120)
    outcome = cloud.outcome(mission_id)
    # Then the mission ends, and the branch exists exactly when the user said yes
    assert outcome.status == "SUCCEEDED", outcome
    assert branches(repo) == expected
    events, _ = cloud.events(mission_id)
    ran = [e.payload for e in events if e.type is EventType.TOOL_COMPLETED and e.payload["tool"].endswith("branch")]
    writes = [p for p in ran if p["tool"] == "git__git_create_branch"]
    assert [p["status"] for p in writes] == (["success"] if approved else ["denied"])  # one call: a second would fail
