"""The deploy-time step: CloudFormation's custom resource stores the shipped agent configurations and
always hears back, with the reason when it failed."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from functions.deploy.handler import lambda_handler
from missions.adapters.cloudformation import HttpDeploymentReplies
from missions.adapters.memory.agents import InMemoryAgentStore
from missions.app.runtime import Runtime
from missions.core.capability import registry as registry
from missions.core.errors import DeploymentError
from missions.core.settings import RuntimeSettings
from missions.core.specs import AGENTS
from missions.local.moto import LocalContext
from missions.service.agents import AgentConfigs
from missions.service.deployment import CustomResourceRequest, handle_agent_deploy
from tests.support.aws import use_fake_aws

URL = "https://cloudformation-custom-resource-response.s3.amazonaws.com/reply?signed"


class Replies:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(self, url: str, reply: dict[str, Any]) -> None:
        self.sent.append((url, reply))


def request(kind: str = "Create", capabilities: tuple[str, ...] = ("fitness_coach",)) -> CustomResourceRequest:
    return CustomResourceRequest(
        kind, URL, "arn:aws:cloudformation:us-east-1:1:stack/s/1", "r1", "Shipped", capabilities
    )  # type: ignore[arg-type]


def configs(store: InMemoryAgentStore) -> AgentConfigs:
    return AgentConfigs(store, registry.default_registry(), environment_models=["gpt-4o-mini"])


def test_a_create_stores_version_one_of_every_agent_and_replies_success():
    # Given an empty agents table
    store, replies, failures = InMemoryAgentStore(), Replies(), []
    # When CloudFormation creates the custom resource
    reply = handle_agent_deploy(request(), configs(store).deploy, replies, failures.append)
    # Then every agent of the capability has version 1 and CloudFormation hears success with what was stored
    agents = registry.load("fitness_coach").pipeline.agents
    assert {state.agent: state.active for state in store.states("fitness_coach")} == {a.name: 1 for a in agents}
    assert replies.sent == [(URL, reply)]
    assert reply["Status"] == "SUCCESS" and reply["Data"]["Stored"] == str(len(agents))
    assert reply["Data"]["Outcomes"] == f"fitness_coach: {len(agents)} seeded"
    assert (reply["StackId"], reply["RequestId"], reply["LogicalResourceId"]) == (
        "arn:aws:cloudformation:us-east-1:1:stack/s/1",
        "r1",
        "Shipped",
    )
    assert not failures
    # When an update ships the same capability.toml / Then nothing more is stored
    again = handle_agent_deploy(request("Update"), configs(store).deploy, replies, failures.append)
    assert again["Data"] == {"Stored": "0", "Outcomes": "fitness_coach: unchanged"}
    assert again["PhysicalResourceId"] == reply["PhysicalResourceId"]  # the same resource: no replacement


def test_a_delete_stores_and_erases_nothing_and_replies_success():
    # Given stored versions
    store, replies = InMemoryAgentStore(), Replies()
    configs(store).deploy("fitness_coach")
    before = store.versions("fitness_coach", "assess")
    # When the stack is deleted / Then the versions (data, not infrastructure) stay and CloudFormation goes on
    reply = handle_agent_deploy(request("Delete"), configs(store).deploy, replies, lambda exc: None)
    assert reply["Status"] == "SUCCESS" and store.versions("fitness_coach", "assess") == before


def test_a_failure_fails_the_deploy_with_its_reason_instead_of_leaving_it_waiting():
    # Given a capability the function does not know (a stack and layer out of step)
    replies, failures = Replies(), []
    # When CloudFormation asks / Then it hears FAILED with the reason, and the failure is recorded
    reply = handle_agent_deploy(
        request(capabilities=("no_such_capability",)), configs(InMemoryAgentStore()).deploy, replies, failures.append
    )
    assert reply["Status"] == "FAILED" and "no_such_capability" in reply["Reason"]
    assert replies.sent == [(URL, reply)] and len(failures) == 1


def test_the_handler_parses_cloudformations_event_and_replies_through_the_runtime(monkeypatch):
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.tables import table_definition

    # Given the deploy function on an agents table of its own (moto)
    use_fake_aws(monkeypatch)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(**table_definition(AGENTS, "t-agents"))
        replies = Replies()
        runtime = Runtime(
            RuntimeSettings(
                agents_table="t-agents",
                missions_table="t-missions",
                checkpoints_table="t-checkpoints",
                events_table="t-events",
                interrupts_table="t-interrupts",
                blob_bucket="t-blobs",
            ),
            clients={"dynamodb": dynamodb},
            deployment_replies=replies,
        )
        event = {
            "RequestType": "Create",
            "ServiceToken": "arn:aws:lambda:us-east-1:1:function:deploy",
            "ResponseURL": URL,
            "StackId": "arn:aws:cloudformation:us-east-1:1:stack/s/1",
            "RequestId": "r1",
            "LogicalResourceId": "Shipped",
            "ResourceType": "Custom::AgentConfigurations",
            "ResourceProperties": {"ServiceToken": "x", "Capabilities": ["fitness_coach"], "Fingerprint": "f"},
        }
        # When CloudFormation invokes it / Then its reply reaches the ResponseURL
        reply = lambda_handler(event, LocalContext("missions-deploy"), runtime=runtime)
        assert reply["Status"] == "SUCCESS" and replies.sent == [(URL, reply)]
        assert runtime.agents is not None and runtime.agents.pins("fitness_coach")["assess"] == 1


class _Recorder(BaseHTTPRequestHandler):
    received: list[tuple[str, dict[str, str], bytes]] = []
    status = 200

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, dict(self.headers), body))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def presigned_url():
    _Recorder.received, _Recorder.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/reply?X-Amz-Signature=abc"
    server.shutdown()


def test_a_reply_is_one_put_of_the_response_object_with_no_content_type(presigned_url):
    # When a reply is sent to a presigned URL
    HttpDeploymentReplies().send(presigned_url, {"Status": "SUCCESS", "Data": {}})
    # Then it is one PUT of the JSON, with the empty content type the URL was signed with
    ((path, headers, body),) = _Recorder.received
    assert path == "/reply?X-Amz-Signature=abc" and json.loads(body) == {"Status": "SUCCESS", "Data": {}}
    assert headers.get("Content-Type", "") == ""


def test_a_refused_reply_is_an_error_not_a_silent_success(presigned_url):
    # Given an URL that refuses the reply (an expired signature)
    _Recorder.status = 403
    # When a reply is sent / Then the function fails, so the failure shows in its logs and metrics
    with pytest.raises(DeploymentError, match="HTTP 403"):
        HttpDeploymentReplies().send(presigned_url, {"Status": "SUCCESS"})
