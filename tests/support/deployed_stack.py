"""Driving the dev stack deployed into moto: its recorded model, and calls to its functions, its API and its state
machines.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import boto3

from missions.core.capability import registry as registry
from missions.local.devserver import http_event
from tests.support.docs import sh_blocks

STACK = "missions-dev"


class RecordedPrompts:
    """The offline model every deployed stage asks (as the dev stack's scripted provider answers), remembering
    the system prompt each mission's stages sent, by mission and stage."""

    name = "scripted"

    def __init__(self) -> None:
        self.prompts: dict[tuple[str, str], list[str]] = {}

    def complete(self, request):
        from missions.adapters.llm.scripted import ScriptedProvider

        key = (request.envelope.mission_id, request.stage)
        self.prompts.setdefault(key, []).append(request.messages[0]["content"])
        policy = registry.load(request.envelope.capability).offline_policy
        return ScriptedProvider(policy, _dev_price()).complete(request)


def _dev_price() -> tuple[float, float] | None:
    """The offline model's price in the dev environment (cdk.json), as the deployed stage's own provider has it."""
    environments = json.loads((ROOT / "cdk.json").read_text())["context"]["environments"]
    price = environments["dev"].get("llm", {}).get("prices", {}).get("scripted")
    return (float(price[0]), float(price[1])) if price else None


PROMPTS = RecordedPrompts()

ROOT = Path(__file__).resolve().parents[2]

GOAL = "How does EnvelopeCodec offload large fields, and where is max_agent_hops enforced?"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _invoke(session: boto3.Session, function: str, event: dict) -> dict:
    response = session.client("lambda").invoke(FunctionName=function, Payload=json.dumps(event).encode())
    payload = json.loads(response["Payload"].read())
    assert "FunctionError" not in response, payload
    return payload


def _api(session, deployment, method, path, body=None, user="ada", claims=None):
    event = http_event(
        method,
        path,
        "",
        {"content-type": "application/json"},
        json.dumps(body).encode() if body else b"",
        user,
        claims=claims,
    )
    response = _invoke(session, deployment.function_named("missions-api"), event)
    return response["statusCode"], json.loads(response["body"]) if response.get("body") else None


def _execution_of(session, deployment, mission_id: str, timeout: float = 10) -> str:
    """Executions are named after their mission: every page of every machine's (a machine past 100 executions
    has more than one), looked for until `timeout` (a start handed over by a function may land a moment later)."""
    sfn = session.client("stepfunctions")
    pages = sfn.get_paginator("list_executions")
    deadline = time.monotonic() + timeout
    while True:
        for arn in deployment.state_machines.values():
            for page in pages.paginate(stateMachineArn=arn):
                for execution in page["executions"]:
                    if execution["name"] == mission_id:
                        return execution["executionArn"]
        if time.monotonic() >= deadline:
            raise AssertionError(f"no execution for {mission_id}")
        time.sleep(0.2)


def _wait_for_end(session, arn: str, timeout: float = 240) -> dict:
    sfn = session.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.05)
    raise TimeoutError(arn)


def _asked(session, deployment, mission_id: str, user: str, timeout: float = 120) -> dict:
    """The mission once it waits for its user (its first stage asked)."""
    deadline = time.monotonic() + timeout
    while True:
        status, mission = _api(session, deployment, "GET", f"/missions/{mission_id}", user=user)
        assert status == 200, mission
        if mission["status"] == "interrupted":
            return mission
        assert mission["status"] not in ("failed", "completed", "cancelled") and time.monotonic() < deadline, mission
        time.sleep(0.1)


def _walkthrough() -> tuple[list[str], list[str]]:
    """docs/deploying.md's two blocks under "From `make deploy` to a first mission": a person's, a machine's."""
    people, machines = sh_blocks("docs/deploying.md", "## From `make deploy` to a first mission")
    return people, machines
