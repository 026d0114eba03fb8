"""The one mechanism that installs the patches (missions.local.moto._mechanism): the points it patches in
the pinned moto, idempotent install, exact restore, and the in-process function registry."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from missions.local import moto as moto_patches
from missions.local.moto import Patch, PatchRefused, PatchSet, awslambda, dynamodb, events, stepfunctions
from tests.integration.moto_patches.conftest import patched


def test_the_patched_moto_internals_still_exist() -> None:
    # Given the pinned moto
    from moto.awslambda.models import LambdaFunction
    from moto.events.models import Rule

    # Then the two internals the emulation replaces are still there, with the arguments it passes
    assert callable(getattr(LambdaFunction, "_invoke_lambda", None)), "moto renamed LambdaFunction._invoke_lambda"
    assert callable(getattr(Rule, "send_to_targets", None)), "moto renamed Rule.send_to_targets"
    import inspect

    assert "event" in inspect.signature(LambdaFunction._invoke_lambda).parameters
    assert list(inspect.signature(Rule.send_to_targets).parameters)[:3] == ["self", "original_event", "transform_input"]
    # and what patch 8 caches: the parser's static parse, the JSONPath module's parse, the task client
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.utils import json_path

    assert isinstance(AmazonStateLanguageParser.__dict__["parse"], staticmethod)
    assert callable(json_path.parse) and callable(lambda_eval_utils.boto_client_for)
    # and where patch 10 filters what moto searches for a task token
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    assert "execution_status" in inspect.signature(StepFunctionsParserBackend._get_executions).parameters


def test_install_is_idempotent_and_uninstall_restores_the_originals(keep_patch_state: None) -> None:
    from moto.awslambda.models import LambdaFunction
    from moto.events.models import Rule

    # Given moto without the patches
    moto_patches.uninstall()
    original_invoke, original_send = LambdaFunction._invoke_lambda, Rule.send_to_targets
    assert not patched()

    # When the patches are installed twice
    moto_patches.install()
    moto_patches.install()

    # Then they are in place, and the second install did not record the patch as "the original"
    assert patched()
    assert awslambda.INVOKE.original is original_invoke
    assert events.SEND_TO_TARGETS.original is original_send

    # When they are uninstalled (twice: also idempotent)
    moto_patches.uninstall()
    moto_patches.uninstall()

    # Then moto's own methods are back, the caches of patch 8 included
    assert LambdaFunction._invoke_lambda is original_invoke
    assert Rule.send_to_targets is original_send
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    assert not hasattr(AmazonStateLanguageParser.parse, "cache_info")
    # and those of patches 10 and 11
    from moto.dynamodb.responses import DynamoHandler
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    assert StepFunctionsParserBackend._get_executions is not stepfunctions.WITH_ENVIRONMENT.replacement
    assert DynamoHandler.call_action is not dynamodb.ONE_REQUEST_AT_A_TIME.replacement


def test_registration_is_by_function_name() -> None:
    # Given a handler registered under a name
    name = f"fn-{uuid.uuid4().hex[:10]}"
    moto_patches.register(name, lambda event, context: None)
    try:
        # Then it is known until unregistered (unregistering twice is harmless)
        assert moto_patches.registered(name)
    finally:
        moto_patches.unregister(name)
        moto_patches.unregister(name)
    assert not moto_patches.registered(name)


def test_uninstall_restores_every_patched_attribute_exactly(keep_patch_state: None) -> None:
    # Given what each patch's owner holds of its own (nothing, where it inherits or lacks the attribute)
    import importlib

    def held() -> dict[str, Any]:
        owners = {}
        for patch in moto_patches.PATCHES.patches:
            module, _, qualname = patch.owner.partition(":")
            owner: Any = importlib.import_module(module)
            for name in filter(None, qualname.split(".")):
                owner = getattr(owner, name)
            owners[str(patch)] = vars(owner).get(patch.attribute, "absent")
        return owners

    moto_patches.uninstall()
    before = held()

    # When every patch is installed, then uninstalled
    moto_patches.install()
    during = held()
    moto_patches.uninstall()

    # Then each one replaced its attribute, and each owner holds again exactly what it held
    assert [n for n in before if during[n] is before[n]] == []
    after = held()
    assert [n for n in before if after[n] is not before[n]] == []


# --------------------------------------------------------------------------- the mechanism on an owner of ours


class _Base:
    def inherited(self, value: int) -> int:
        return value


class Target(_Base):
    """Stands in for a moto class."""

    def method(self, event: str, flag: bool = True) -> str:
        return f"moto's {event}"

    @classmethod
    def build(cls, name: str) -> str:
        return f"moto built {name}"


def helper(path: str) -> str:
    """Stands in for a moto module's function."""
    return f"moto's {path}"


OWNER = f"{__name__}:Target"


def _ours(self: Any, event: str, flag: bool = True) -> str:
    return "ours, then " + METHOD.original(self, event, flag)


METHOD = Patch(OWNER, "method", _ours, "a method")


def test_a_patch_set_replaces_adds_and_restores_exactly() -> None:
    # Given patches that replace an own method, an inherited one, add an attribute and wrap a module function
    own, inherited = Target.__dict__["method"], _Base.__dict__["inherited"]
    patches = PatchSet(
        [
            METHOD,
            Patch(OWNER, "inherited", lambda self, value: value + 1, "an inherited method"),
            Patch(OWNER, "added", property(lambda target: "added"), "an attribute it lacks", adds=True),
            Patch(
                __name__, "helper", lambda original: lambda path: original(path).upper(), "a wrapped one", wraps=True
            ),
        ]
    )

    # When they are installed (twice)
    patches.install()
    patches.install()
    try:
        # Then each is in place, and a replacement reaches the original through its patch
        assert Target().method("event") == "ours, then moto's event"
        assert METHOD.original is own
        assert (Target().inherited(1), Target().added, helper("x")) == (2, "added", "MOTO'S X")  # type: ignore[attr-defined]
    finally:
        patches.uninstall()

    # And when uninstalled, the owner holds exactly what it held: its own method, nothing it inherited or lacked
    assert Target.__dict__["method"] is own
    assert "inherited" not in Target.__dict__ and Target.inherited is inherited
    assert not hasattr(Target, "added") and helper("x") == "moto's x"


@pytest.mark.parametrize(
    ("patch", "why"),
    [
        (Patch(OWNER, "renamed", lambda self: None, "gone"), "no such attribute"),
        (Patch(OWNER, "method", lambda self, event: "", "a parameter more"), "not accepted"),
        (Patch(OWNER, "method", lambda self, payload, flag=True: "", "renamed"), "not accepted"),
        (Patch(OWNER, "method", lambda self, payload=None, flag=True, **rest: "", "renamed, loosely"), "parameters"),
        (Patch(OWNER, "build", lambda cls, name: "", "now a classmethod"), "classmethod"),
        (Patch(OWNER, "method", property(lambda target: ""), "now a property"), "property"),
        (Patch(OWNER, "method", lambda self, *, event: "", "keyword-only"), "not accepted"),
        (Patch(OWNER, "build", classmethod(lambda cls, name: ""), "moto has it", adds=True), "moto has it now"),
    ],
)
def test_a_target_moto_moved_or_reshaped_is_refused_and_nothing_stays_patched(patch: Patch, why: str) -> None:
    # Given a patch that installs, then one whose target moto moved, re-signed, or now has itself
    own = Target.__dict__["method"]
    patches = PatchSet([METHOD, patch])

    # When the set is installed, then it is refused, naming the patch, its reason and what changed
    with pytest.raises(PatchRefused, match=why) as refused:
        patches.install()
    assert f"{patch}" in str(refused.value) and patch.reason in str(refused.value)

    # and nothing stays patched: the first one was undone
    assert Target.__dict__["method"] is own and not patches.installed


# --------------------------------------------------------------------------- patched on import, packages deferred


def _module(root: Any, name: str, source: str) -> None:
    path = root.joinpath(*name.split("."))
    if source.startswith("#package"):
        path.mkdir(parents=True)
        (path / "__init__.py").write_text(source)
    else:
        path.with_suffix(".py").write_text(source)


def test_a_patch_on_import_waits_for_its_module_and_a_refused_one_fails_that_import(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two modules nobody imported yet, each with a function a patch replaces when it is imported
    name = f"owner_{uuid.uuid4().hex[:8]}"
    _module(tmp_path, name, "def helper(path):\n    return 'moto ' + path\n")
    _module(tmp_path, f"{name}_moved", "def renamed(path):\n    return path\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys

    waits = Patch(name, "helper", lambda path: "ours " + path, "on import", on_import=True)
    moved = Patch(f"{name}_moved", "helper", lambda path: path, "moved", on_import=True)
    patches = PatchSet([METHOD, waits, moved])

    # When the set is installed
    patches.install()
    try:
        # Then the modules are still not imported, and the patch in place once its module is
        assert name not in sys.modules and f"{name}_moved" not in sys.modules
        module = __import__(name)
        assert module.helper("x") == "ours x" and waits.original("x") == "moto x"
        # and the module whose target moved fails to import, naming the patch, and is not left half made
        with pytest.raises(PatchRefused, match="no such attribute") as refused:
            __import__(f"{name}_moved")
        assert str(moved) in str(refused.value) and f"{name}_moved" not in sys.modules
    finally:
        patches.uninstall()

    # And once uninstalled, the module holds its own function, nothing waits on imports, and the moved one
    # imports as it is
    assert module.helper("x") == "moto x"
    assert not any(type(finder).__name__ == "_OnImport" for finder in sys.meta_path)
    assert __import__(f"{name}_moved").renamed("y") == "y"


def test_a_deferred_package_runs_its_init_only_when_asked_for_its_own(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a package whose __init__ re-exports what its heavy models module defines, and a light submodule
    name = f"pkg_{uuid.uuid4().hex[:8]}"
    _module(tmp_path, name, "#package\nfrom .models import backends\n")
    _module(tmp_path, f"{name}.models", "backends = {'loaded': True}\n")
    _module(tmp_path, f"{name}.utils", "STATUS = 'light'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    patches = PatchSet([], lazy=[moto_patches.LazyInit(name, "its models are heavy")])
    patches.install()
    try:
        # When its light submodule is imported
        assert importlib.import_module(f"{name}.utils").STATUS == "light"

        # Then the models were not
        assert f"{name}.models" not in sys.modules

        # When the package is asked for what its __init__ defines, it has it (the models loaded then)
        assert importlib.import_module(name).backends == {"loaded": True} and f"{name}.models" in sys.modules
        with pytest.raises(AttributeError, match="no attribute 'missing'"):
            _ = importlib.import_module(name).missing
    finally:
        patches.uninstall()

    # And a package whose __init__ never ran is forgotten at uninstall: imported again, it is whole
    other = f"pkg_{uuid.uuid4().hex[:8]}"
    _module(tmp_path, other, "#package\nfrom .models import backends\n")
    _module(tmp_path, f"{other}.models", "backends = 1\n")
    importlib.invalidate_caches()
    patches = PatchSet([], lazy=[moto_patches.LazyInit(other, "heavy")])
    patches.install()
    patches.uninstall()
    assert other not in sys.modules
    assert "backends" in vars(importlib.import_module(other))


def test_a_process_that_starts_the_emulation_loads_no_cloudformation_batch_ec2_or_api_until_it_uses_them() -> None:
    # Given a fresh interpreter that starts the emulation (the patches installed, every function registered)
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        from missions.local.emulation import LocalCloud
        loaded = lambda *names: [n for n in names if n in sys.modules]
        with LocalCloud(["shopping"]) as cloud:
            print(loaded("moto.cloudformation.models", "moto.batch.models", "moto.ec2.models", "moto.ecs.models",
                         "functions.api.handler"))

        # when moto's CloudFormation is imported (a deploy), its patches are in place
        from moto.cloudformation import parsing
        from moto.cloudformation.models import Stack
        from missions.local.moto import cloudformation
        print(parsing.resource_class_from_type is cloudformation.RESOURCE_TYPES.replacement,
              Stack.get_cfn_attribute is cloudformation.NESTED_OUTPUTS.replacement)

        # and AWS Batch, loaded then, answers as moto does
        import boto3
        from moto import mock_aws
        with mock_aws():
            print(boto3.client("batch", region_name="us-east-1").describe_job_queues()["jobQueues"])
        """
    )
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    import os

    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )

    # Then none of those modules was loaded by the start; CloudFormation's patches waited for it
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["[]", "True True", "[]"]
