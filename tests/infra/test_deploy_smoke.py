"""The synthesized dev stack, deployed into moto's CloudFormation, runs a real mission.

Everything a mission touches comes from the deployment: table and bucket names, the state
machine (the compiler's definition with CloudFormation's substitutions), each function's
environment. Every AWS call each function makes is recorded and must be allowed by the role
the template gave that function, so the access table is proven sufficient as well as narrow.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from missions.core import capability as registry
from missions.core.refs import snapshot_key
from missions.core.specs import state_machine_name
from missions.local import patches
from missions.local.devserver import http_event
from missions.service.repositories.archive import extract_snapshot
from missions.service.webhooks import sign
from tests.infra.conftest import Assembly, synthesize
from tests.support.archives import tar_gz_bytes
from tests.support.aws import FAKE_AWS_ENV
from tests.support.deploy import (
    Deployment,
    Need,
    allowed,
    deploy,
    emulate_bootstrap,
    needs,
    role_statements,
    run_in_process,
    table_arn,
)
from tests.support.git_server import serve_git

STACK = "missions-dev"
ROOT = Path(__file__).resolve().parents[2]
GOAL = "How does EnvelopeCodec offload large fields, and where is max_agent_hops enforced?"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    # as an operator who mounts repositories into the functions (EFS) would: this checkout is a root
    environments = json.loads((ROOT / "cdk.json").read_text())["context"]["environments"]
    # and, for this test only, git imports from a server on loopback
    environments["dev"] = {**environments["dev"], "repo_roots": [str(ROOT)], "local_git_sources": True}
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
    patches.install()
    try:
        session = boto3.Session(region_name="us-east-1")
        emulate_bootstrap(session, dev.directory, STACK)
        deployment = deploy(session, dev.directory, STACK)
        run_in_process(deployment, lambda: boto3.Session(region_name="us-east-1"))
        yield deployment, session
    finally:
        for name in list(patches._FUNCTIONS):
            patches.unregister(name)
        mock.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _invoke(session: boto3.Session, function: str, event: dict) -> dict:
    response = session.client("lambda").invoke(FunctionName=function, Payload=json.dumps(event).encode())
    payload = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, payload
    return payload


def _api(session, deployment, method, path, body=None, user="ada"):
    event = http_event(
        method, path, "", {"content-type": "application/json"}, json.dumps(body).encode() if body else b"", user
    )
    response = _invoke(session, deployment.function_named("missions-api"), event)
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def _execution_of(session, deployment, mission_id: str) -> str:
    """Executions are named after their mission."""
    sfn = session.client("stepfunctions")
    for arn in deployment.state_machines.values():
        for execution in sfn.list_executions(stateMachineArn=arn)["executions"]:
            if execution["name"] == mission_id:
                return execution["executionArn"]
    raise AssertionError(f"no execution for {mission_id}")


def _wait_for_end(session, arn: str, timeout: float = 240) -> dict:
    sfn = session.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.05)
    raise TimeoutError(arn)


def test_the_stack_deploys_completely(deployed):
    deployment, session = deployed
    # Then every function, the state machine and the tables exist
    installed = [registry.load(name) for name in registry.installed()]
    assert set(deployment.state_machines) == {state_machine_name("missions-dev", c.name) for c in installed}
    services = sorted(c["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] for c in deployment.functions.values())
    assert services.count("missions-stage") == sum(len(c.pipeline.agents) for c in installed)  # one per stage
    assert {
        "missions-api",
        "missions-webhook",
        "missions-trigger",
        "missions-schedule",
        "missions-status",
        "missions-memory-stream",
        "missions-interrupt",
        "missions-sla",
        "missions-retention",
        "missions-repository-import",
    } <= set(services)
    assert deployment.outputs["ApiUrlDDEE0114"].startswith("https://")


def test_a_code_analysis_mission_runs_through_the_deployed_state_machine(deployed):
    deployment, session = deployed
    # When a user starts a mission through the deployed API function
    status, created = _api(
        session,
        deployment,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repo": str(ROOT)}},
    )
    assert status == 202, created
    execution_arn = _execution_of(session, deployment, created["mission_id"])
    ended = _wait_for_end(session, execution_arn)
    # Then the execution succeeded with an answer that cites the code
    assert ended["status"] == "SUCCEEDED", ended
    envelope = json.loads(ended["output"])["envelope"]
    # and, once Step Functions reports the end to the status function, the mission shows it
    _invoke(
        session,
        deployment.function_named("missions-status"),
        {
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "detail": {"executionArn": execution_arn, "status": "SUCCEEDED", "name": created["mission_id"]},
        },
    )
    status, shown = _api(session, deployment, "GET", f"/missions/{created['mission_id']}")
    assert shown["status"] in {"completed", "succeeded"}, shown
    result = shown.get("result") or envelope
    assert "offload" in json.dumps(result).lower()


def test_a_repository_registered_by_git_url_is_analyzed_on_the_deployed_stack(deployed, tmp_path):
    deployment, session = deployed
    # Given this project served by a git server on loopback
    with serve_git(ROOT) as url:
        # When ada registers it through the deployed API (the bus rule hands the import to its function)
        status, registered = _api(session, deployment, "POST", "/repositories", {"url": url, "name": "missions"})
        assert status == 202, registered
        status, record = _api(session, deployment, "GET", f"/repositories/{registered['repository_id']}")
    # Then an immutable snapshot is in the snapshot bucket under ada's prefix
    assert record["status"] == "ready", record
    snapshot = record["snapshots"][-1]
    bucket = deployment.functions[deployment.function_named("missions-api")]["Environment"]["Variables"][
        "MISSIONS_SNAPSHOT_BUCKET"
    ]
    key = snapshot_key("ada", record["repository_id"], snapshot["sha256"])
    assert session.client("s3").head_object(Bucket=bucket, Key=key)["ContentLength"] == snapshot["archive_bytes"]
    # When ada asks about it
    status, created = _api(
        session,
        deployment,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repository": record["repository_id"]}},
    )
    assert status == 202, created
    ended = _wait_for_end(session, _execution_of(session, deployment, created["mission_id"]))
    assert ended["status"] == "SUCCEEDED", ended
    # Then the answer cites real lines of the snapshot the stages unpacked
    envelope = json.loads(ended["output"])["envelope"]
    citations = envelope["outputs"]["integration"]["citations"]
    assert citations
    archive, unpacked = tmp_path / "s.tar.gz", tmp_path / "s"
    session.client("s3").download_file(bucket, key, str(archive))
    extract_snapshot(archive, unpacked)
    for ref in citations:
        file, line = ref.rsplit(":", 1)[0], int(ref.rsplit(":", 1)[1].split("-")[0])
        assert 1 <= line <= len((unpacked / file).read_text().splitlines()), ref
    # and another user cannot see it, or start a mission on it
    assert _api(session, deployment, "GET", f"/repositories/{record['repository_id']}", user="eve")[0] == 404
    status, refused = _api(
        session,
        deployment,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repository": record["repository_id"]}},
        user="eve",
    )
    assert status == 422, refused


def test_an_uploaded_archive_is_imported_through_its_presigned_url_on_the_deployed_stack(deployed):
    import requests  # moto intercepts requests to S3, as it does boto3's

    deployment, session = deployed
    archive = tar_gz_bytes(
        {"ledger-main/ledger.py": b"class Ledger:\n    def post(self, amount):\n        return amount\n"}
    )
    # Given ada registers an upload through the deployed API
    status, registered = _api(
        session, deployment, "POST", "/repositories", {"upload": {"format": "tar.gz", "size_bytes": len(archive)}}
    )
    assert status == 201 and registered["status"] == "awaiting_upload", registered
    # When she PUTs the archive to the presigned URL and asks for the import
    put = requests.put(registered["upload"]["url"], data=archive, timeout=30)
    assert put.status_code == 200, put.text
    status, importing = _api(session, deployment, "POST", f"/repositories/{registered['repository_id']}/imports", {})
    assert status == 202, importing
    # Then the import function made a snapshot of it
    status, record = _api(session, deployment, "GET", f"/repositories/{registered['repository_id']}")
    assert record["status"] == "ready" and record["snapshots"][0]["files"] == 1, record


def test_a_signed_webhook_starts_a_mission_through_the_bus_rule(deployed):
    deployment, session = deployed
    # Given the webhook source's secret, created as an operator would, under the deployed prefix
    prefix = deployment.functions[deployment.function_named("missions-webhook")]["Environment"]["Variables"][
        "MISSIONS_WEBHOOK_SECRETS_PREFIX"
    ]
    session.client("secretsmanager").create_secret(
        Name=f"{prefix}/git", SecretString=json.dumps({"secret": "whsec_czNjcmV0", "user_id": "grace"})
    )
    body = json.dumps({"type": "push", "symbol": "EnvelopeCodec"}).encode()
    timestamp = str(int(time.time()))
    headers = {
        "content-type": "application/json",
        "webhook-id": "d-1",
        "webhook-timestamp": timestamp,
        "webhook-signature": sign("whsec_czNjcmV0", "d-1", timestamp, body),
    }
    # When the CI system posts it (no JWT: webhooks carry a Standard Webhooks signature)
    event = http_event("POST", "/webhooks/git", "", headers, body, None)
    response = _invoke(session, deployment.function_named("missions-webhook"), event)
    # Then it was accepted, and the bus rule's target started grace's mission
    assert response["statusCode"] in (200, 202), response
    status, listed = _api(session, deployment, "GET", "/missions", user="grace")
    assert status == 200 and listed["missions"], listed
    assert "EnvelopeCodec" in listed["missions"][0]["goal"]


def test_the_housekeeping_functions_run_with_their_deployed_roles(deployed):
    deployment, session = deployed
    assert _invoke(session, deployment.function_named("missions-sla"), {})["overdue"] == 0
    assert _invoke(session, deployment.function_named("missions-retention"), {})["failures"] == {}


def test_every_call_a_function_made_is_allowed_by_its_own_role(deployed):
    # (runs after the missions above: it checks the calls they made)
    deployment, session = deployed
    by_function = deployment.calls_by_function()
    exercised = {deployment.functions[f]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] for f in by_function}
    assert {
        "missions-api",
        "missions-stage",
        "missions-status",
        "missions-webhook",
        "missions-trigger",
        "missions-sla",
        "missions-retention",
        "missions-repository-import",
    } <= exercised, exercised
    denied = []
    for function, calls in by_function.items():
        statements = role_statements(session, deployment.functions[function]["Role"])
        for call in calls:
            denied += [(function, need) for need in needs(call) if not allowed(need, statements)]
    assert not denied, "\n".join(f"{f}: {n.action} on {n.resource}" for f, n in denied)


def test_a_role_denies_what_the_access_table_does_not_grant(deployed):
    # Given the SLA function's role (it may only count the questions waiting on the interrupts' index)
    deployment, session = deployed
    statements = role_statements(session, deployment.functions[deployment.function_named("missions-sla")]["Role"])
    tables = {c["Environment"]["Variables"]["MISSIONS_CHECKPOINTS_TABLE"] for c in deployment.functions.values()}
    # Then reading checkpoints or starting executions is not allowed (the checker really checks)
    assert not allowed(Need("dynamodb:GetItem", table_arn(tables.pop())), statements)
    assert not allowed(Need("states:StartExecution", next(iter(deployment.state_machines.values()))), statements)
