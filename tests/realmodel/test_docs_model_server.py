"""docs/cli.md's "A model server of your own" block, run as written (on a free port instead of 8080): llama.cpp's
server started from the model venv, and a shopping mission through `missions run` with OPENAI_BASE_URL."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.realmodel.conftest import FIGURES
from tests.support.docs import sh_blocks
from tests.support.models.llama_server import MISSING, free_port, installed, serving_process

pytestmark = pytest.mark.realmodel

ROOT = Path(__file__).resolve().parents[2]


def test_the_model_server_block_runs_as_written(tmp_path):
    if not installed():
        pytest.skip(MISSING)
    ((install, serve, run),) = sh_blocks("docs/cli.md", "## A model server of your own")
    assert install.endswith("pip install -r requirements/model.lock")  # what `make model` did (its stamp)
    port = free_port()
    # Given the server started as the page says
    with serving_process(shlex.split(serve.replace("8080", str(port))), port, tmp_path / "server.log"):
        # When the page's mission runs, OPENAI_BASE_URL its only model setting
        assignment, *command = shlex.split(run.replace("8080", str(port)))
        name, _, value = assignment.partition("=")
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "MISSIONS_LLM_PROVIDER")}
        started = time.monotonic()
        ran = subprocess.run(
            command, cwd=ROOT, env={**env, name: value}, capture_output=True, text=True, timeout=900, check=False
        )
    reasons = [line for line in ran.stdout.splitlines() if "terminal reason" in line]
    FIGURES.append({"docs": "missions run shopping", "exit": ran.returncode, "reason": "".join(reasons).strip()})
    FIGURES[-1]["wall_s"] = round(time.monotonic() - started, 1)
    # Then it ends with the terminal reason in its summary, and exit code 0 only if it completed (1: failed, as
    # a 270M model's answers may make it), never a traceback
    assert ran.returncode in (0, 1) and "Traceback" not in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    [reason] = reasons
    assert ("completed" in reason) == (ran.returncode == 0), ran.stdout
