"""One synthesized CDK assembly per test run (synth costs ~15 s of CPU and ~1 GB: shared by every module
and xdist worker, never repeated). The layer is built sources-only: the template does not depend on its contents."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from missions.local import moto as moto_patches
from tests.support.aws import FAKE_AWS_ENV
from tests.support.deploy import Deployment, deploy, emulate_bootstrap, run_in_process
from tests.support.deployed_stack import PROMPTS, ROOT, STACK, _free_port

# the CDK library's jsii runtime runs on the Node 24 LTS that `make node` installs (as `make test` does);
# a bare `pytest` on a machine without it falls back to the machine's Node, quietly if that is Node 20
_NODE_BIN = Path(__file__).resolve().parents[2] / "node_modules" / ".bin"
if (_NODE_BIN / "node").exists() and not os.environ.get("PATH", "").startswith(str(_NODE_BIN)):
    os.environ["PATH"] = f"{_NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@dataclass
class Assembly:
    directory: Path
    templates: dict[str, dict[str, Any]]  # environment -> its stack with its nested stacks folded in
    files: dict[str, list[Path]]  # environment -> the template files deployed: the stack's, then each nested one's

    def dumps(self) -> str:
        files = {env: [str(path) for path in paths] for env, paths in self.files.items()}
        return json.dumps({"directory": str(self.directory), "templates": self.templates, "files": files})

    @classmethod
    def loads(cls, text: str) -> Assembly:
        data = json.loads(text)
        files = {env: [Path(path) for path in paths] for env, paths in data["files"].items()}
        return cls(Path(data["directory"]), data["templates"], files)

    def resources(self, env: str, type_: str) -> dict[str, dict[str, Any]]:
        """The template's resources of a type; for functions, the runtime's own (CDK's deploy-time
        function that uploads the dashboard is not one of them: see test_site.py)."""
        return {
            k: r
            for k, r in self.templates[env]["Resources"].items()
            if r["Type"] == type_ and not (type_.startswith("AWS::Lambda::") and deploy_time(k))
        }


def deploy_time(logical_id: str) -> bool:
    """CDK's own function (and its AWS CLI layer) that copies the dashboard's files into its bucket, run
    only during a deploy."""
    return logical_id.startswith("CustomCDKBucketDeployment") or "AwsCliLayer" in logical_id


def synthesize(
    directory: Path, environments: list[str] | None = None, context: dict[str, Any] | None = None
) -> Assembly:
    from infra.app import build_app
    from layers.build import build

    layer = build(directory / "layer", sources_only=True)
    app = build_app(environments=environments, layer_dir=layer, outdir=str(directory / "cdk.out"), context=context)
    assembly = app.synth()
    templates: dict[str, dict[str, Any]] = {}
    files: dict[str, list[Path]] = {}
    for stack in assembly.stacks:
        env = stack.stack_name.removeprefix("missions-")
        path = Path(assembly.directory) / stack.template_file
        files[env] = [path]
        templates[env] = fold_nested(json.loads(path.read_text()), Path(assembly.directory), files[env])
    return Assembly(Path(assembly.directory), templates, files)


def fold_nested(template: dict[str, Any], directory: Path, files: list[Path]) -> dict[str, Any]:
    """One template holding a stack's resources and those of its nested stacks (a capability's), as the
    tests read them: a nested resource is named `<nested stack>.<its id>`, a nested stack's parameter
    is the parent's value it is passed, and the parent's `Outputs.X` of a nested stack is its value."""
    folded = {**template, "Resources": dict(template["Resources"])}
    for stack_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::CloudFormation::Stack":
            continue
        path = directory / _nested_template_file(resource["Properties"]["TemplateURL"], directory)
        files.append(path)
        nested = fold_nested(json.loads(path.read_text()), directory, files)
        arguments = resource["Properties"].get("Parameters", {})
        local = set(nested["Resources"])

        def rewrite(
            value: Any, local: set[str] = local, arguments: dict[str, Any] = arguments, stack_id: str = stack_id
        ) -> Any:
            if isinstance(value, list):
                return [rewrite(v) for v in value]
            if not isinstance(value, dict):
                return value
            if set(value) == {"Ref"} and value["Ref"] in arguments:
                return arguments[value["Ref"]]
            if set(value) == {"Ref"} and value["Ref"] in local:
                return {"Ref": f"{stack_id}.{value['Ref']}"}
            if set(value) == {"Fn::GetAtt"} and value["Fn::GetAtt"][0] in local:
                return {"Fn::GetAtt": [f"{stack_id}.{value['Fn::GetAtt'][0]}", *value["Fn::GetAtt"][1:]]}
            return {k: rewrite(v) for k, v in value.items()}

        for logical_id, inner in nested["Resources"].items():
            folded["Resources"][f"{stack_id}.{logical_id}"] = rewrite(inner)
        outputs = {name: rewrite(output["Value"]) for name, output in nested.get("Outputs", {}).items()}
        folded["Resources"] = {k: _resolve_outputs(v, stack_id, outputs) for k, v in folded["Resources"].items()}
        folded["Outputs"] = {k: _resolve_outputs(v, stack_id, outputs) for k, v in folded.get("Outputs", {}).items()}
    return folded


def _nested_template_file(url: Any, directory: Path) -> str:
    """The file a nested stack's TemplateURL names: its asset hash, looked up in the assets manifests."""
    text = json.dumps(url)
    for manifest in directory.glob("*.assets.json"):
        for asset_hash, asset in json.loads(manifest.read_text()).get("files", {}).items():
            if f"{asset_hash}.json" in text:
                return str(asset["source"]["path"])
    raise LookupError(f"no asset for the nested template {text}")


def _resolve_outputs(value: Any, stack_id: str, outputs: dict[str, Any]) -> Any:
    if isinstance(value, list):
        return [_resolve_outputs(v, stack_id, outputs) for v in value]
    if not isinstance(value, dict):
        return value
    got = value.get("Fn::GetAtt")
    if set(value) == {"Fn::GetAtt"} and got[0] == stack_id and str(got[1]).startswith("Outputs."):
        return outputs[got[1].removeprefix("Outputs.")]
    return {k: _resolve_outputs(v, stack_id, outputs) for k, v in value.items()}


def shared_synth(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Assembly]) -> Assembly:
    """One synth per test run, however many xdist workers ask for it (a synth costs ~15 s of CPU): the first
    makes it under a lock in the run's own temporary folder, the others read what it wrote. Alone (no
    xdist), the process's own synth."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return make(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / "shared-synth"  # this run's, shared by its workers
    shared.mkdir(exist_ok=True)
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        manifest = shared / f"{name}.json"
        if manifest.exists():
            return Assembly.loads(manifest.read_text())
        (shared / name).mkdir()
        made = make(shared / name)
        manifest.write_text(made.dumps())
        return made


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """dev, staging and prod as cdk.json defines them: read-only, so one synth per test run serves every
    module that reads it."""
    return shared_synth(tmp_path_factory, "synth", synthesize)


# sign-in, alarm and model settings the `variants` environments use, that their tests look for
OPS_EMAIL = "oncall@team.test"

BEDROCK_PROFILE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"

OPS_CALLBACKS = ["https://console.team.test/callback", "http://localhost:8787/callback"]


@pytest.fixture(scope="session")
def variants(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """Environments configured otherwise than cdk.json's, synthesized once per
    test process for every test that reads them (read-only, as `assembly`)."""
    context = {
        "environments": {
            "iamonly": {"auth": {"type": "iam"}, "alarms": False, "llm": {"provider": "scripted"}},
            "sso": {
                "auth": {"issuer": "https://login.example.com", "audience": ["missions"]},
                "alarms": False,
                "capabilities": ["home_assistant", "shopping"],
                "connections": {
                    "home_assistant": {
                        "environment": {"HA_URL": "https://ha.home.example"},
                        "secrets": {"HA_TOKEN_SECRET": "missions-sso/home-assistant-token"},
                    }
                },
                "account": "111122223333",  # a concrete environment renders ARNs (and nag findings) with values
                "region": "eu-west-1",
            },
            "bedrock": {
                "alarms": False,
                "capabilities": ["shopping"],
                "llm": {"provider": "bedrock", "fallback_model": BEDROCK_PROFILE},
                "account": "111122223333",
                "region": "us-east-1",
            },
            "claude": {"alarms": False, "capabilities": ["shopping"], "llm": {"provider": "anthropic"}},
            "ops": {
                "alarms": True,
                "alarm_email": OPS_EMAIL,
                "auth": {"domain_prefix": "team-missions", "callback_urls": OPS_CALLBACKS},
                "capabilities": ["shopping"],
            },
        }
    }
    return shared_synth(tmp_path_factory, "variants", lambda directory: synthesize(directory, context=context))


# the dev stack deployed into moto, for test_deploy_smoke.py: a deploy takes ~50 s, made once for that module
@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    # as an operator who mounts repositories into the functions (EFS) would: this checkout is a root
    environments = json.loads((ROOT / "cdk.json").read_text())["context"]["environments"]
    # and, for this test only, git imports from a server on loopback
    environments["dev"] = {**environments["dev"], "repo_roots": [str(ROOT)], "local_git_sources": True}
    # and without the dashboard: moto's CloudFormation has no CloudFront (tests/infra/test_site.py checks
    # the site in the template)
    environments["dev"]["dashboard"] = False
    # and the sign-in callback on a free port (the CLI listens there for `login --browser`), not on 8787
    auth = environments["dev"].get("auth", {})
    environments["dev"]["auth"] = {**auth, "callback_urls": [f"http://localhost:{_free_port()}/callback"]}
    return synthesize(
        tmp_path_factory.mktemp("synth-dev"), environments=["dev"], context={"environments": environments}
    )


@pytest.fixture(scope="module")
def deployed(dev: Assembly) -> Iterator[tuple[Deployment, boto3.Session]]:
    from moto import mock_aws

    saved = {k: os.environ.get(k) for k in FAKE_AWS_ENV}
    os.environ.update(FAKE_AWS_ENV)
    mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
    mock.start()
    moto_patches.install()
    try:
        session = boto3.Session(region_name="us-east-1")
        emulate_bootstrap(session, dev.directory, STACK)
        deployment = deploy(
            session, dev.directory, STACK, session_factory=lambda: boto3.Session(region_name="us-east-1")
        )
        run_in_process(deployment, lambda: boto3.Session(region_name="us-east-1"), stage_llm=PROMPTS)
        yield deployment, session
    finally:
        for name in list(moto_patches.functions._FUNCTIONS):
            moto_patches.unregister(name)
        mock.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
