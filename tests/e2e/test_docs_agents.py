"""docs/agents.md's "Agents as data" block, run as written against a dev server whose operator is `ops`.

In a module of its own: its emulation must not overlap test_docs_examples' module-wide one (two
emulations in one process share moto's state, and the second finds the first's tables)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_docs_examples import environment, run_cli
from tests.support.docs import sh_blocks

pytestmark = pytest.mark.e2e


def test_the_agents_block_runs_as_written(tmp_path: Path):
    (block,) = sh_blocks("docs/agents.md", "## Agents as data")
    assert [shlex.split(line)[1] for line in block] == ["agents"] * 4 + ["run", "usage", "agents", "agents"]
    cloud = LocalCloud(["fitness_coach"], settings={"operators": ["ops"]})  # as `missions dev --operator ops`
    with cloud, DevServer(cloud, port=0) as server:
        env = environment(MISSIONS_API_URL=server.url, MISSIONS_TOKEN="dev:ops", MISSIONS_CONFIG_DIR=str(tmp_path))
        values: dict[str, str] = {}
        assert "assess" in run_cli(block[0], values, tmp_path, env)
        assert "created fitness_coach/assess v2" in run_cli(block[1], values, tmp_path, env)
        assert "prompt:" in run_cli(block[2], values, tmp_path, env)
        assert "v2 active" in run_cli(block[3], values, tmp_path, env)
        values["http://127.0.0.1:8787"] = server.url  # the port: the test server's
        ran = run_cli(block[4] + " --json", values, tmp_path, env)
        mission_id = json.loads(ran)["mission_id"]
        assert json.loads(ran)["status"] == "completed"
        values["<mission id>"] = mission_id
        usage = run_cli(block[5], values, tmp_path, env)
        assert "assess" in usage and "v2" in usage and "calls" in usage
        assert "v1 active" in run_cli(block[6], values, tmp_path, env)
        assert run_cli(block[7], values, tmp_path, env).split()[2] == "rollback"
