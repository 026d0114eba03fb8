"""The sandbox on AWS: the adapter that invokes the sandbox function (against a stubbed Lambda client), the
function's handler (called directly with an event, as Lambda would), and the composition root's choice.

moto cannot run the function (it would need Docker), and need not: the handler runs the same local
backend that tests/unit/adapters/test_sandbox_local.py holds to the contract.
"""

from __future__ import annotations

import base64
import io
import json

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from functions.sandbox.handler import lambda_handler
from missions.adapters.sandbox_lambda import LambdaSandbox
from missions.adapters.sandbox_local import LocalSandbox
from missions.app.events import sandbox_room
from missions.app.runtime import Runtime
from missions.core.errors import DependencyUnavailable, StageRequestError
from missions.core.sandbox import FUNCTION_HEADROOM_MB, SandboxRequest, SandboxResult
from missions.core.settings import RuntimeSettings
from missions.local.moto import LocalContext

TABLES = {f"{name}_table": f"t-{name}" for name in ("missions", "checkpoints", "events", "interrupts")}
FUNCTIONS = {"quick": "missions-dev-sandbox-quick", "deep": "missions-dev-sandbox-deep"}
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _payload(data: object) -> StreamingBody:
    body = json.dumps(data).encode()
    return StreamingBody(io.BytesIO(body), len(body))


@pytest.fixture
def lambda_client():
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _request(tier: str = "quick") -> SandboxRequest:
    return SandboxRequest(script="RESULT = {'n': len(INPUT)}", input=[1, 2], tier=tier)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the adapter


def test_a_run_is_one_invocation_of_the_tiers_function_and_its_result_comes_back(lambda_client):
    # Given the deep tier's function answers with a result holding a chart
    client, stubber = lambda_client
    request = _request("deep")
    answer = SandboxResult(status="ok", output={"n": 2}, chart_png=PNG, duration_ms=42)
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "Payload": _payload(answer.to_event())},
        {
            "FunctionName": FUNCTIONS["deep"],
            "InvocationType": "RequestResponse",
            "Payload": request.model_dump_json().encode(),
        },
    )
    # When the adapter runs the request
    result = LambdaSandbox(FUNCTIONS, client=client).run(request)
    # Then the function of its tier ran it, and the chart survived the trip through JSON (base64)
    assert result == answer and result.chart_png == PNG
    assert answer.to_event()["chart_png"] == base64.b64encode(PNG).decode()


def test_a_script_error_is_a_result_not_an_exception(lambda_client):
    client, stubber = lambda_client
    failed = SandboxResult.failed("network", "network refused: socket.__new__")
    stubber.add_response("invoke", {"StatusCode": 200, "Payload": _payload(failed.to_event())})
    result = LambdaSandbox(FUNCTIONS, client=client).run(_request())
    assert result.status == "error" and result.error_kind == "network"


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("2026-11-24T10:00:00.000Z 1b2c Task timed out after 20.02 seconds", "timeout"),
        ("RequestId: 1b2c Error: Runtime exited with error: signal: killed", "memory"),
    ],
)
def test_the_functions_own_timeout_and_a_killed_runtime_are_the_scripts_doing(lambda_client, message, kind):
    client, stubber = lambda_client
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": _payload({"errorMessage": message})},
    )
    result = LambdaSandbox(FUNCTIONS, client=client).run(_request())
    assert result.status == "error" and result.error_kind == kind and "quick" in (result.error or "")


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("TooManyRequestsException", "busy"),
        ("ResourceNotFoundException", "ResourceNotFoundException"),
        ("AccessDeniedException", "refused the call"),
    ],
)
def test_when_no_sandbox_can_run_the_script_the_caller_is_told(lambda_client, code, words):
    client, stubber = lambda_client
    stubber.add_client_error("invoke", service_error_code=code, service_message="no", http_status_code=429)
    with pytest.raises(DependencyUnavailable, match=words):
        LambdaSandbox(FUNCTIONS, client=client).run(_request())


def test_a_handler_crash_and_a_malformed_answer_are_the_sandboxs_fault(lambda_client):
    client, stubber = lambda_client
    crash = {"errorType": "ValidationError", "errorMessage": "1 validation error for SandboxRequest"}
    stubber.add_response("invoke", {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": _payload(crash)})
    stubber.add_response("invoke", {"StatusCode": 200, "Payload": _payload({"status": "maybe"})})
    sandbox = LambdaSandbox(FUNCTIONS, client=client)
    with pytest.raises(DependencyUnavailable, match="ValidationError"):
        sandbox.run(_request())
    with pytest.raises(DependencyUnavailable, match="no sandbox result"):
        sandbox.run(_request())


def test_a_tier_without_a_function_is_refused_before_any_call(lambda_client):
    client, _ = lambda_client
    with pytest.raises(DependencyUnavailable, match="standard"):
        LambdaSandbox(FUNCTIONS, client=client).run(_request("standard"))
    with pytest.raises(ValueError, match="unknown tiers"):
        LambdaSandbox({"huge": "f"}, client=client)


# --------------------------------------------------------------------------- the function's handler


def _sandbox_runtime(**settings) -> Runtime:
    return Runtime(RuntimeSettings(blob_bucket="blobs", **TABLES, **settings))


def test_the_handler_runs_the_request_in_a_child_and_returns_the_result_as_json():
    # Given the quick tier's function (a big memory so this test process's size does not matter)
    runtime = _sandbox_runtime()
    context = LocalContext(function_name="missions-dev-sandbox-quick", memory_limit_in_mb=2048, timeout_seconds=20)
    event = {"script": "import statistics\nRESULT = {'median': statistics.median(INPUT)}", "input": [3, 1, 2]}
    # When Lambda calls it with a request
    answer = lambda_handler(event, context, runtime=runtime)
    # Then the answer is a SandboxResult as JSON, as the adapter reads it
    result = SandboxResult.model_validate(answer)
    assert result.ok and result.output == {"median": 2}
    json.dumps(answer)


def test_the_handler_reports_an_escape_as_a_result(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-of-the-function")
    runtime = _sandbox_runtime()
    context = LocalContext(function_name="missions-dev-sandbox-quick", memory_limit_in_mb=2048, timeout_seconds=20)
    answer = lambda_handler({"script": "import os\nRESULT = dict(os.environ)"}, context, runtime=runtime)
    assert "fake-secret" not in json.dumps(answer)
    answer = lambda_handler({"script": "import socket\nsocket.socket()"}, context, runtime=runtime)
    assert answer["status"] == "error" and answer["error_kind"] == "network"


def test_a_function_serves_only_its_own_tier(monkeypatch, tmp_path):
    # the function made undumpable would only be this test process, its /tmp this machine's: keep them
    monkeypatch.setattr("missions.adapters.sandbox_local._undumpable", lambda: None)
    monkeypatch.setattr("missions.adapters.sandbox_local._remove_leftovers", lambda base_dir: None)
    runtime = _sandbox_runtime(sandbox_tier="quick")
    context = LocalContext(function_name="missions-dev-sandbox-quick", memory_limit_in_mb=2048, timeout_seconds=20)
    with pytest.raises(StageRequestError, match="quick"):
        lambda_handler({"script": "RESULT = {}", "tier": "deep"}, context, runtime=runtime)


def test_the_function_removes_what_runs_cut_short_left_in_its_temp_dir(monkeypatch, tmp_path):
    # Given an invocation ended by Lambda's timeout left a run's directory (and its input) behind
    monkeypatch.setattr("missions.adapters.sandbox_local._undumpable", lambda: None)
    leftover = tmp_path / "missions-sandbox-abc123"
    leftover.mkdir()
    (leftover / "input.json").write_text('{"someone": "else"}')
    (tmp_path / "unrelated").mkdir()
    # When the function's sandbox starts
    LocalSandbox(base_dir=str(tmp_path), in_function=True)
    # Then the leftover is gone, and nothing else
    assert [p.name for p in tmp_path.iterdir()] == ["unrelated"]


def test_the_child_gets_the_functions_memory_less_its_headroom_and_its_time_less_a_margin():
    context = LocalContext(function_name="f", memory_limit_in_mb=256 + FUNCTION_HEADROOM_MB, timeout_seconds=20)
    room = sandbox_room(context)
    assert room is not None and room.memory_mb == 256
    assert 17 < room.timeout_seconds <= 18
    assert sandbox_room(object()) is None  # outside Lambda: the tier's limits as they are


# --------------------------------------------------------------------------- the composition root


def test_the_runtime_runs_scripts_locally_unless_sandbox_functions_are_named():
    assert isinstance(_sandbox_runtime().sandbox, LocalSandbox)
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    deployed = Runtime(
        RuntimeSettings(blob_bucket="blobs", **TABLES, sandbox_functions=FUNCTIONS), clients={"lambda": client}
    )
    assert isinstance(deployed.sandbox, LambdaSandbox) and deployed.sandbox.functions == FUNCTIONS


def test_the_function_names_come_from_the_environment_as_json():
    settings = RuntimeSettings.from_env(
        {
            **{f"MISSIONS_{k.upper()}": v for k, v in TABLES.items()},
            "MISSIONS_BLOB_BUCKET": "blobs",
            "MISSIONS_SANDBOX_FUNCTIONS": json.dumps(FUNCTIONS),
            "MISSIONS_SANDBOX_TIER": "quick",
        }
    )
    assert settings.sandbox_functions == FUNCTIONS and settings.sandbox_tier == "quick"


def test_the_function_makes_itself_undumpable_so_no_child_reads_its_memory_or_environment():
    # in a process of its own: this test process keeps its dumpable flag
    import subprocess
    import sys

    check = (
        "import ctypes\n"
        "from missions.adapters.sandbox_local import _undumpable\n"
        "libc = ctypes.CDLL(None)\n"
        "before = libc.prctl(3, 0, 0, 0, 0)\n"  # PR_GET_DUMPABLE
        "_undumpable()\n"
        "print(before, libc.prctl(3, 0, 0, 0, 0))"
    )
    assert subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout.split() == [
        "1",
        "0",
    ]
