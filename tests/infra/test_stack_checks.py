"""Checks the synth itself passes: cdk-nag, cfn-lint, CloudFormation's limits, the pinned Node LTS."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from missions.core.capability import registry as registry
from tests.infra.conftest import Assembly
from tests.support.stack import ENVIRONMENTS, _machines


def test_cdk_nag_fails_the_synth_on_an_unacknowledged_finding(tmp_path):
    # Given the app with one extra bucket that breaks AwsSolutions-S10 (no TLS-only policy)
    from aws_cdk import aws_s3 as s3

    from infra.app import build_app
    from layers.build import build

    app = build_app(
        environments=["dev"], layer_dir=build(tmp_path / "layer", sources_only=True), outdir=str(tmp_path / "out")
    )
    s3.Bucket(app.node.find_child("missions-dev"), "Careless")
    # When it is synthesized, Then the synth fails naming the rule
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    report = (tmp_path / "out" / "validation-report.json").read_text()
    assert "AwsSolutions-S10" in report and "Careless" in report


def _shapes(path: Path) -> set[tuple[str, tuple[str, ...]]]:
    """A template's resources as cfn-lint's rules see their structure: each type with the properties it sets."""
    resources = json.loads(path.read_text())["Resources"].values()
    return {(r["Type"], tuple(sorted(r.get("Properties", {})))) for r in resources}


def test_cfn_lint_passes(assembly: Assembly):
    # prod's templates, its stack's and each capability's, in one run (cfn-lint loads its rules once). dev's and
    # staging's are prod's with other sizes and fewer options (about 2 s of the suite each for a capability,
    # 6 s for a stack): linted through prod's, as long as none has a resource shape prod's lack
    largest = ENVIRONMENTS[-1]
    prod_shapes = set().union(*(_shapes(path) for path in assembly.files[largest]))
    for env in ENVIRONMENTS[:-1]:
        for path in assembly.files[env]:
            assert _shapes(path) <= prod_shapes, f"{path.name} has resources prod's templates lack: lint it too"
    paths = [str(path) for path in assembly.files[largest]]
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "--", *paths], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_each_stack_fits_cloudformation_limits(assembly: Assembly, env):
    # 500 resources, 200 parameters and outputs, and 1 MB per template (deployed from S3). Each capability
    # is a nested stack of its own (its stages, state machine and their alarms), so the runtime's stack
    # does not grow with the number of capabilities, and one capability's stays far below the limits.
    stack, *capabilities = [json.loads(path.read_text()) for path in assembly.files[env]]
    assert len(capabilities) == len(_machines(assembly, env))
    for template in (stack, *capabilities):
        assert len(template["Resources"]) <= 500
        assert len(template.get("Parameters", {})) <= 200 and len(template.get("Outputs", {})) <= 200
        assert len(json.dumps(template)) < 1_000_000
    # what the runtime itself takes (about 350 in staging now: each API route is a resource; agents as data added
    # 13 routes, 2 tables and the deploy-time function, users' schedules 6 routes, a table, a schedule group and
    # the scheduler's role), leaving room to grow: past 400, move a concern (the API's routes) into a nested
    # stack of its own before CloudFormation's 500 stops a deploy
    assert len(stack["Resources"]) < 400
    assert all(len(template["Resources"]) < 150 for template in capabilities)


def test_the_cdk_runs_on_the_node_lts_the_tools_pin() -> None:
    # Given the Node tools make installs (package.json pins Node itself)
    root = Path(__file__).resolve().parents[2]
    pinned = json.loads((root / "package.json").read_text())["devDependencies"]["node"]
    # Then the node the CDK library runs on (first on PATH, as in every make target) is that LTS
    node = shutil.which("node")  # the conftest put node_modules/.bin first, as make does
    assert node is not None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == f"v{pinned}" and int(pinned.split(".")[0]) % 2 == 0  # even majors are the LTS lines
