"""An imported repository's history, asked through the git MCP server on the emulation (moto): the import
keeps the history beside the snapshot in S3, the stage's function unpacks both, and code_analysis's
traverser asks mcp-server-git (a child process, as on the dev server) when and why a line changed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from missions.core.mission.refs import SNAPSHOT_PREFIX
from missions.local.emulation import LocalCloud
from missions.ports.repositories import RepositoryStatus
from tests.support.mcp_servers import git_repo


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return git_repo(
        tmp_path / "shop",
        [
            ("add compute_tax", {"tax.py": "def compute_tax(amount):\n    return amount * 0.2\n"}),
            ("raise the tax rate: the 2026 budget", {"tax.py": "def compute_tax(amount):\n    return amount * 0.25\n"}),
        ],
    )


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    with LocalCloud(["code_analysis"], settings={"repo_roots": [str(tmp_path)]}) as local:
        yield local


def test_an_imported_repositorys_history_answers_when_and_why_a_line_changed(cloud: LocalCloud, shop: Path):
    # Given alice's repository, registered by URL and imported (the import function, through the bus)
    service = cloud.runtime.repository_service
    record, _ = service.register("alice", url=f"file://{shop}")
    deadline = time.monotonic() + 60
    while service.get("alice", record.repository_id).status == RepositoryStatus.IMPORTING:
        assert time.monotonic() < deadline, "the import did not finish"
        time.sleep(0.1)
    imported = service.get("alice", record.repository_id)
    assert imported.status == RepositoryStatus.READY and imported.snapshots[-1].history
    # and the bucket holds the snapshot and its history beside it
    listed = cloud.s3.list_objects_v2(Bucket=cloud.runtime.settings.snapshot_bucket, Prefix=SNAPSHOT_PREFIX)
    sha = imported.snapshots[-1].sha256
    names = sorted(item["Key"].rsplit("/", 1)[1] for item in listed.get("Contents", []))
    assert names == [f"{sha}.history.tar.gz", f"{sha}.tar.gz"]
    # When alice asks when and why compute_tax changed
    outcome = cloud.run(
        "code_analysis",
        "When and why did compute_tax change?",
        context={"repository": record.repository_id},
        user_id="alice",
        timeout=180,
    )
    # Then the mission answers from the history, citing the line
    assert outcome.status == "SUCCEEDED", outcome
    assert outcome.envelope is not None
    answer = outcome.envelope.outputs["integration"]
    rate = next(f for f in answer["findings"] if "0.25" in f["claim"])
    assert rate["citations"] == ["tax.py:2"] and '"raise the tax rate: the 2026 budget"' in rate["claim"]
