"""The house rules as tests: the import contracts (layers by folder), ruff, and mypy strict on the runtime."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_are_kept():
    # Given the contracts in pyproject.toml
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    # When import-linter analyses the packages
    result = subprocess.run([command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    # Then every contract is kept
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_importing_the_library_reads_no_environment_and_creates_no_client():
    # Given a process with no AWS settings at all
    code = (
        "import os, sys\n"
        "for k in list(os.environ):\n"
        "    if k.startswith(('AWS_', 'MISSIONS_')): del os.environ[k]\n"
        "import missions.app.runtime, missions.service.runner, missions.core.pipeline.compiler\n"
        "import functions.stage.handler, functions.interrupt.handler\n"
        "import capabilities.code_analysis\n"
        "assert 'openai' not in sys.modules, 'openai imported at import time'\n"
        "print('ok')\n"
    )
    # When the handlers and the runtime are imported
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # Then nothing fails for want of settings or credentials
    assert result.returncode == 0, result.stderr


def test_ruff_finds_nothing():
    # Given the lint rules in pyproject.toml / When ruff checks the code / Then it is clean
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run(
        [str(ruff), "check", "shared", "functions", "capabilities", "tests", "bench", "infra", "layers"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_finds_nothing():
    # Given the strict mypy configuration in pyproject.toml (the runtime library and its handlers)
    mypy = Path(sys.executable).parent / "mypy"
    # When mypy checks them (its cache in a temporary folder: the suite must not depend on a warm one)
    result = subprocess.run(
        [str(mypy), "--cache-dir", "/tmp/missions-mypy-cache"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    # Then it finds no error
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
