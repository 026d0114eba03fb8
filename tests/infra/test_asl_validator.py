"""Every shipped capability compiles to ASL that the asl-validator npm package accepts."""

import json
import subprocess
from pathlib import Path

import pytest

from missions.core.capability import registry as registry
from missions.core.pipeline.compiler import compile_pipeline

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = ROOT / "node_modules" / ".bin" / "asl-validator"


@pytest.mark.parametrize("name", registry.available())
def test_compiled_asl_passes_asl_validator(name, tmp_path):
    # Given the validator installed by `make test` (npm ci)
    if not VALIDATOR.exists():
        pytest.fail("asl-validator is not installed: run `make test` (it runs `npm ci`)")
    # When the capability's pipeline is compiled and validated
    path = tmp_path / f"{name}.asl.json"
    path.write_text(json.dumps(compile_pipeline(registry.load(name).pipeline)))
    result = subprocess.run([str(VALIDATOR), "--json-path", str(path)], capture_output=True, text=True, timeout=120)
    # Then it is valid
    assert result.returncode == 0, result.stdout + result.stderr


def test_validator_rejects_a_broken_definition(tmp_path):
    # Given a definition whose Next points nowhere (proves the validator is really checking)
    if not VALIDATOR.exists():
        pytest.fail("asl-validator is not installed: run `make test` (it runs `npm ci`)")
    broken = {"StartAt": "a", "States": {"a": {"Type": "Pass", "Next": "nowhere"}}}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    # When validated / Then it is rejected
    result = subprocess.run([str(VALIDATOR), "--json-path", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
