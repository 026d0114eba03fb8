"""What the tests of the moto patches share (missions.local.moto): moto's clients in a mock_aws with the
patches installed, functions whose handlers run in-process, and patches left as each test found them.

moto is pinned exactly because the local emulation replaces some of its internals. If a moto upgrade
renames, re-signs or bypasses one, these tests fail loudly instead of the emulation silently running
nothing.
"""

from __future__ import annotations

import io
import json
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from missions.local import moto as moto_patches
from missions.local.moto import awslambda, events

REGION = "us-east-1"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


def _code_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "handler.py", "def lambda_handler(event, context):\n    raise RuntimeError('in-process only')\n"
        )
    return buffer.getvalue()


def eventually(check: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} not reached within {timeout}s")


@dataclass
class Aws:
    """moto clients plus helpers to create functions whose handlers run in-process."""

    lambda_: Any
    sfn: Any
    events: Any
    sqs: Any
    role: str
    registered: list[str] = field(default_factory=list)

    def function(self, handler: Callable[[dict[str, Any], Any], Any] | None) -> tuple[str, str]:
        """Create a Lambda function (registering `handler` unless None); return (name, arn)."""
        name = f"fn-{uuid.uuid4().hex[:10]}"
        arn = self.lambda_.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=self.role,
            Handler="handler.lambda_handler",
            Code={"ZipFile": _code_zip()},
        )["FunctionArn"]
        if handler is not None:
            moto_patches.register(name, handler)
            self.registered.append(name)
        return name, arn

    def state_machine(self, definition: dict[str, Any], kind: str = "STANDARD") -> str:
        return self.sfn.create_state_machine(
            name=f"sm-{uuid.uuid4().hex[:10]}",
            definition=json.dumps(definition),
            roleArn=self.role,
            type=kind,
        )["stateMachineArn"]

    def finished(self, execution_arn: str, timeout: float = 10.0) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            described = self.sfn.describe_execution(executionArn=execution_arn)
            return described if described["status"] != "RUNNING" else None

        return eventually(done, timeout, f"end of {execution_arn}")


def patched() -> bool:
    from moto.awslambda.models import LambdaFunction
    from moto.events.models import Rule

    return (
        LambdaFunction._invoke_lambda is awslambda.INVOKE.replacement
        and Rule.send_to_targets is events.SEND_TO_TARGETS.replacement
    )


@pytest.fixture
def keep_patch_state() -> Iterator[None]:
    """Whatever a test does to the patches, leave them as they were (another module may use them)."""
    was_installed = patched()
    yield
    if was_installed:
        moto_patches.install()
    else:
        moto_patches.uninstall()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, keep_patch_state: None) -> Iterator[Aws]:
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    import boto3
    from moto import mock_aws

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        moto_patches.install()
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="patches-test", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        clients = Aws(
            lambda_=boto3.client("lambda", region_name=REGION),
            sfn=boto3.client("stepfunctions", region_name=REGION),
            events=boto3.client("events", region_name=REGION),
            sqs=boto3.client("sqs", region_name=REGION),
            role=role,
        )
        try:
            yield clients
        finally:
            for name in clients.registered:
                moto_patches.unregister(name)


def payload_of(response: dict[str, Any]) -> Any:
    return json.loads(response["Payload"].read())
