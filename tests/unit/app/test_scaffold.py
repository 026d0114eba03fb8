"""`missions new capability NAME` makes a capability that loads, compiles and runs offline to completed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from missions.core.capability import registry as registry
from missions.core.pipeline.compiler import compile_pipeline
from missions.local.scaffold import ScaffoldError, new_capability
from tests.conformance.test_capability_conformance import answer
from tests.support.driver import DirectDriver

ROOT = Path(__file__).resolve().parents[3]


def test_a_scaffolded_capability_runs_offline_as_generated(tmp_path, monkeypatch):
    # Given a capabilities package of one's own, and a capability scaffolded into it
    package = tmp_path / "my_capabilities"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    written = new_capability("garden_planner", package)
    assert [path.name for path in written] == ["capability.toml", "__init__.py"]
    # When the registry loads it and it runs its example goal offline
    capability = registry.Registry(package="my_capabilities").load("garden_planner")
    compile_pipeline(capability.pipeline)
    envelope = DirectDriver(capability).run(capability.example_goal, answer_with=answer)
    # Then it completed, with the canned plan filled in with the goal
    assert envelope.terminal_reason == "completed" and not envelope.errors
    assert envelope.outputs["answer"]["answer"].startswith("1. Understand the goal: Help me get started with garden")
    assert envelope.counters.llm_calls == 1


@pytest.mark.parametrize(("name", "why"), [("Bad-Name", "is not a capability name"), ("taken", "exists already")])
def test_a_bad_or_taken_name_is_refused_and_writes_nothing(tmp_path, name, why):
    (tmp_path / "taken").mkdir()
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ScaffoldError, match=why):
        new_capability(name, tmp_path)
    assert sorted(tmp_path.rglob("*")) == before


def test_the_cli_scaffolds_and_refuses_in_one_line(tmp_path):
    command = [sys.executable, "-m", "missions.cli", "new", "capability"]
    made = subprocess.run([*command, "pantry", "--dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "pantry" / "capability.toml").exists() and "missions run pantry" in made.stdout
    again = subprocess.run([*command, "pantry", "--dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "exists already" in again.stderr


def test_registries_are_values_that_do_not_leak_into_each_other(tmp_path, monkeypatch):
    # Given a capability in a package of its own, named by an entry point
    package = tmp_path / "garden_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    new_capability("garden_helper", package)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = registry.Registry(plugins=lambda: {"garden_helper": "garden_pkg.garden_helper"})
    # Then the registry that knows the entry point finds it beside the folders, and no other does
    assert "garden_helper" in plugins.available() and "shopping" in plugins.available()
    assert plugins.load("garden_helper").name == "garden_helper"
    assert "garden_helper" not in registry.Registry(plugins=dict).available()
    assert "garden_helper" not in registry.default_registry().available()
    # and one made for a test keeps its extra capability to itself
    extra = registry.Registry(plugins=dict).including(plugins.load("garden_helper"))
    assert "garden_helper" in extra.available()
    assert "garden_helper" not in registry.Registry(plugins=dict).available()
