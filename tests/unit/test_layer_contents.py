"""The Lambda layer carries production code only: no emulation, CLI, HTTP client, web page or a
capability's development package (sample data, fake servers), and what it carries imports without them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from layers.build import RUNTIME_DEVELOPMENT, build, development_modules

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("layer") / "layer", sources_only=True) / "python"


def _files(layer: Path) -> list[str]:
    return sorted(str(p.relative_to(layer)) for p in layer.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_the_layer_holds_no_development_code(layer: Path):
    # Given the layer as layers/build.py builds it
    files = _files(layer)
    # Then it holds the runtime, the handlers' composition root and every capability's production code
    assert "missions/app/runtime.py" in files
    assert "capabilities/home_assistant/ha/rest.py" in files
    assert "capabilities/home_assistant/tools.py" in files
    assert "capabilities/shopping/catalog.json" in files  # production data the sample price service answers from
    # And none of the development code: the emulation, the CLI, the HTTP client, the web page...
    development = [
        f
        for f in files
        if (f.startswith("missions/") and Path(f).parts[1] in RUNTIME_DEVELOPMENT)
        or (f.startswith("capabilities/") and Path(f).parts[2:3] == ("dev",))
    ]
    assert development == []
    # ...nor the sample home, its week of data, its template renderer or the fake HA server, by any path
    names = {Path(f).name for f in files}
    assert not names & {"fake_server.py", "sample_data.py", "sample.py", "templates.py", "emulation.py", "cli.py"}


def test_what_the_layer_leaves_out_is_what_the_import_contract_puts_above_the_app():
    # Given the runtime library's layering (pyproject.toml: the import contract lint-imports checks)
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layering,) = [c for c in contracts if c.get("containers") == ["missions"] and c["type"] == "layers"]
    above_the_app = layering["layers"][: layering["layers"].index("app")]
    # Then each layer above the app (which no production module may import) is development code
    assert {f"missions.{name}" for name in above_the_app} <= set(development_modules())
    for name in above_the_app:
        assert name in RUNTIME_DEVELOPMENT or f"{name}.py" in RUNTIME_DEVELOPMENT


# A fresh process laid out as Lambda's: the layer, the functions' code, site-packages for the dependencies;
# nothing from this checkout; development code unimportable even if some finder could reach it.
PRELUDE = """
import fnmatch, importlib, importlib.abc, sys
LAYER, TASK, DEVELOPMENT = {layer!r}, {task!r}, {development!r}
sys.path[:] = [LAYER, TASK] + [p for p in sys.path if p and p not in ({root!r}, {root!r} + "/shared")]

class Development(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(fnmatch.fnmatch(name, rule) or fnmatch.fnmatch(name, rule + ".*") for rule in DEVELOPMENT):
            raise ModuleNotFoundError(f"No module named {{name!r}} (development code, not in the layer)", name=name)
        return None

sys.meta_path.insert(0, Development())
"""

IMPORT_ALL = """
import json, pathlib
modules = []
for top, base in ((LAYER, "missions"), (LAYER, "capabilities"), (TASK, "functions")):
    for source in sorted(pathlib.Path(top, base).rglob("*.py")):
        parts = source.relative_to(top).with_suffix("").parts
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
failed = {}
for name in modules:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
ours = [(m, getattr(module, "__file__", None) or LAYER) for m, module in sys.modules.items()]
outside = sorted(m for m, f in ours if m.split(".")[0] in ("missions", "capabilities") and not f.startswith(LAYER))
print(json.dumps({"imported": len(modules), "failed": failed, "outside": outside}))
"""


def _run_in_the_layer(layer: Path, tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    task = tmp_path / "task"
    shutil.copytree(ROOT / "functions", task / "functions", ignore=shutil.ignore_patterns("__pycache__"))
    prelude = PRELUDE.format(layer=str(layer), task=str(task), development=list(development_modules()), root=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", prelude + code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def test_every_module_of_the_layer_and_every_handler_imports_without_development_code(layer: Path, tmp_path: Path):
    # Given a process that sees the layer and the functions' code only, development code unimportable
    # When every module of the layer and of the functions is imported
    result = _run_in_the_layer(layer, tmp_path, IMPORT_ALL)
    # Then each one imports: no production module needs the emulation, the CLI or a capability's dev package
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["imported"] > 150
    assert report["failed"] == {}
    # And the runtime and the capabilities came from the layer, not from this checkout
    assert report["outside"] == []


def test_home_assistant_without_a_connection_says_what_to_configure_in_aws(layer: Path, tmp_path: Path):
    # Given the layer (no sample home) and no HA_URL
    code = (
        "from capabilities.home_assistant.ha import HAError, HASettings, connect\n"
        "try:\n    connect(HASettings())\nexcept HAError as exc:\n    print('HAError:', exc)\n"
    )
    # When a mission's tools connect to Home Assistant
    result = _run_in_the_layer(layer, tmp_path, code)
    # Then they are refused with what to configure, not answered from a fake house
    assert result.returncode == 0, result.stderr
    assert "HAError: no Home Assistant is configured" in result.stdout
    assert "connection in cdk.json" in result.stdout


def test_the_bench_s_layer_before_is_the_layer_with_its_development_code(layer: Path, tmp_path: Path):
    # Given the layer as it was built before development code was left out (what `make bench` compares with)
    before = build(tmp_path / "before", sources_only=True, include_development=True) / "python"
    # Then it is the shipped layer plus the development code, the web page aside (it never shipped)
    added = sorted(set(_files(before)) - set(_files(layer)))
    assert set(_files(layer)) <= set(_files(before))
    assert "missions/local/emulation.py" in added
    assert "capabilities/home_assistant/dev/sample_data.py" in added
    assert not [f for f in added if "/web/" in f]
