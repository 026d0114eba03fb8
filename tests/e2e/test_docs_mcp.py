"""docs/mcp.md's examples, run as written against a dev server of this repository (as `make dev` serves it):
only the port changes (localhost:8787 -> the test server's)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.support.docs import fenced, sh_blocks

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/mcp.md"
LOCAL = "http://127.0.0.1:8787"


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with LocalCloud(["code_analysis"], settings={"repo_roots": [str(ROOT)]}) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


def test_the_printed_configuration_is_the_one_the_page_shows(server: DevServer):
    # Given the page's command, pointed at the test's dev server
    ((command,),) = sh_blocks(PAGE, "## Connect a client")
    words = shlex.split(command)
    assert words[0] == ".venv/bin/missions"
    # When it runs
    ran = subprocess.run(
        [str(Path(sys.executable).parent / "missions"), *words[1:], "--api-url", server.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    )
    # Then it prints the page's configuration (with the server's port)
    (shown,) = fenced(PAGE, "## Connect a client", "json")
    assert json.loads(ran.stdout) == json.loads(shown.replace(LOCAL, server.url))


def test_the_python_client_example_runs_as_written(server: DevServer):
    (example,) = fenced(PAGE, "## From code", "python")
    ran = subprocess.run(
        [sys.executable, "-c", example.replace(LOCAL, server.url)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert ran.returncode == 0, ran.stderr
    question, status, result = ran.stdout.split("\n", 2)
    assert question == "Which function, class, file or behaviour should I look into?"
    assert status == "completed" and '"status": "completed"' in result, ran.stdout
