"""docs/repositories.md's repository walkthrough, run as written against a dev server.

Only what a reader must fill in is replaced: the port, the placeholders (`<repository id>`, `<upload id>`,
`<upload url>`), the archive and its size, and the GitHub URL (no network here: a git server on loopback instead).
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.support.docs import sh_blocks
from tests.support.git_server import serve_git

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = "H='Authorization: Bearer dev:alice'; J='Content-Type: application/json';"


def curl_lines(page: str, heading: str) -> list[str]:
    """The curl lines of a section's first ```sh block, without trailing comments."""
    return [line for line in sh_blocks(page, heading)[0] if line.startswith("curl")]


def test_the_repository_walkthrough_runs(tmp_path: Path):
    commands = curl_lines("docs/repositories.md", "## Repositories: what a mission may read")
    assert len(commands) == 7, commands
    assert commands[-1].endswith("/repositories/<repository id>") and "-X DELETE" in commands[-1]
    archive = tmp_path / "shop.tar.gz"
    with tarfile.open(archive, "w:gz") as packed:
        data = b"def compute_tax(amount):\n    return amount\n"
        info = tarfile.TarInfo("shop-main/tax.py")
        info.size = len(data)
        packed.addfile(info, io.BytesIO(data))
    cloud = LocalCloud(["code_analysis"], settings={"repo_roots": [str(ROOT)]})
    with cloud, DevServer(cloud, port=0) as server, serve_git(ROOT) as git_url:
        values = {"<upload id>": "", "<upload url>": "", "<repository id>": ""}
        outputs = []
        for command in commands:
            command = command.replace("localhost:8787", server.url.removeprefix("http://"))
            command = command.replace("https://github.com/owner/shop.git", git_url)
            command = command.replace("48213", str(archive.stat().st_size))
            for placeholder, value in values.items():
                command = command.replace(placeholder, value)
            script = f"{ENVIRONMENT} {command} -w '\\n%{{http_code}}'"
            result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
            body, _, status = result.stdout.rpartition("\n")
            outputs.append((command, status, body))
            assert result.returncode == 0 and status.startswith("2"), (command, status, body, result.stderr)
            answer = json.loads(body) if body.strip() else {}
            if isinstance(answer.get("upload"), dict) and not values["<upload id>"]:
                values["<upload url>"] = answer["upload"]["url"]
                values["<upload id>"] = answer["repository_id"]
            elif answer.get("source") == "git" and not values["<repository id>"]:
                values["<repository id>"] = answer["repository_id"]
        # the upload was imported; the git repository's import of the unknown ref "v2" failed, with the
        # reason, and it still answers at the snapshot of "main"
        listed = json.loads(outputs[-2][2])["repositories"]
        assert [(r["source"], r["status"]) for r in listed] == [("upload", "ready"), ("git", "failed")], listed
        assert "unknown ref 'v2'" in listed[1]["reason"] and len(listed[1]["snapshots"]) == 1
