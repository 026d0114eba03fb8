"""The synthesized stacks' stream function: its server, its URL, its role and the deploy's agent configurations.

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from infra.components.access import ACCESS
from infra.components.agent_versions import RESOURCE_TYPE, shipped_fingerprint
from missions.app.streaming import READINESS_PATH
from missions.core.capability import registry as registry
from tests.infra.conftest import Assembly
from tests.support.stack import (
    ENVIRONMENTS,
    SUITE_PYTHON,
    _actions,
    _function_service,
    _resources,
    _role_statements,
    _tables_referenced,
)

SITE = {"Fn::Join": ["", ["https://", {"Fn::GetAtt": ["SiteDistribution390DED28", "DomainName"]}]]}  # the dashboard


def _stream_function(assembly: Assembly, env: str) -> tuple[str, dict]:
    (found,) = [
        (k, f)
        for k, f in assembly.resources(env, "AWS::Lambda::Function").items()
        if _function_service(f) == "missions-stream"
    ]
    return found


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_stream_function_runs_its_server_behind_the_web_adapter(assembly: Assembly, env):
    # Given the stream function of each environment
    _, function = _stream_function(assembly, env)
    properties = function["Properties"]
    variables = properties["Environment"]["Variables"]
    # Then Lambda runs run.sh through the adapter's wrapper, on the runtime every function runs, for 15 minutes
    assert properties["Handler"] == "run.sh" and properties["Runtime"] == SUITE_PYTHON
    assert properties["Timeout"] == 900
    # with the runtime layer, then the adapter's public layer for the function's architecture, pinned
    runtime_layer, adapter = properties["Layers"]
    assert runtime_layer == {"Ref": "RuntimeLayer962B8856"}
    arch = {"arm64": "Arm64", "x86_64": "X86"}[properties["Architectures"][0]]
    assert adapter == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":lambda:",
                {"Ref": "AWS::Region"},
                f":753240598075:layer:LambdaAdapterLayer{arch}:30",
            ],
        ]
    }
    # and the adapter streams the server's responses, found on its port once it answers readiness
    assert {k: v for k, v in variables.items() if k.startswith(("AWS_LAMBDA_", "AWS_LWA_"))} == {
        "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
        "AWS_LWA_INVOKE_MODE": "response_stream",
        "AWS_LWA_PORT": "8080",
        "AWS_LWA_READINESS_CHECK_PATH": READINESS_PATH,
    }
    # and it verifies tokens of the API's own authorizer: the pool's issuer, its two clients as the audience
    (authorizer,) = assembly.resources(env, "AWS::ApiGatewayV2::Authorizer").values()
    issuer = authorizer["Properties"]["JwtConfiguration"]["Issuer"]
    audience = authorizer["Properties"]["JwtConfiguration"]["Audience"]
    assert variables["MISSIONS_JWT_ISSUER"] == issuer
    assert variables["MISSIONS_JWT_AUDIENCE"] == {"Fn::Join": ["", [audience[0], ",", audience[1]]]}
    # and it has every setting the other functions have (tables, buses, state machines)
    (api,) = [
        f for f in assembly.resources(env, "AWS::Lambda::Function").values() if _function_service(f) == "missions-api"
    ]
    shared = {k for k in api["Properties"]["Environment"]["Variables"] if k != "POWERTOOLS_SERVICE_NAME"}
    assert shared <= set(variables)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_stream_url_streams_without_an_authorizer_for_the_sign_in_origins(assembly: Assembly, env):
    # Given the stream function's URL
    logical_id, _ = _stream_function(assembly, env)
    (url,) = assembly.resources(env, "AWS::Lambda::Url").values()
    properties = url["Properties"]
    # Then it streams (RESPONSE_STREAM), has no authorizer of its own (the function verifies the JWT), and
    # browsers on the sign-in callbacks' origin may call it
    assert properties["TargetFunctionArn"] == {"Fn::GetAtt": [logical_id, "Arn"]}
    assert (properties["InvokeMode"], properties["AuthType"]) == ("RESPONSE_STREAM", "NONE")
    assert properties["Cors"] == {
        "AllowOrigins": ["http://localhost:8787", SITE],  # and the dashboard's site
        "AllowMethods": ["GET", "POST"],
        "AllowHeaders": ["authorization", "content-type", "last-event-id", "x-conversation-id"],
        "ExposeHeaders": ["x-conversation-id", "x-mission-id"],
        "MaxAge": 3600,
    }
    # and anyone may invoke it through the URL (and only through it)
    permissions = [
        p["Properties"]
        for p in assembly.resources(env, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [logical_id, "Arn"]}
    ]
    assert {
        (p["Action"], p["Principal"], p.get("FunctionUrlAuthType"), p.get("InvokedViaFunctionUrl")) for p in permissions
    } == {
        ("lambda:InvokeFunctionUrl", "*", "NONE", None),
        ("lambda:InvokeFunction", "*", None, True),
    }
    # and its URL is the output StreamUrl
    assert assembly.templates[env]["Outputs"]["StreamUrl"]["Value"] == {
        "Fn::GetAtt": [next(iter(assembly.resources(env, "AWS::Lambda::Url"))), "FunctionUrl"]
    }


def test_the_stream_role_starts_follows_and_answers_missions_and_nothing_more(assembly: Assembly):
    # Given the stream function's role in dev
    _, function = _stream_function(assembly, "dev")
    statements = _role_statements(assembly, "dev", function["Properties"]["Role"]["Fn::GetAtt"][0])
    actions = set().union(*(_actions(s) for s in statements))
    # Then it reads missions, events, interrupts and conversations, and starts and answers missions
    for table, entry in ACCESS["stream"].tables.items():
        granted = set().union(*(_actions(s) for s in statements if table in _tables_referenced(s)))
        assert set(entry.actions) <= granted, table
    assert {"dynamodb:Query"} <= set().union(
        *(_actions(s) for s in statements if "conversations" in _tables_referenced(s))
    )
    assert {"states:StartExecution", "states:SendTaskSuccess", "secretsmanager:GetSecretValue"} <= actions
    (by_user,) = [s for s in statements if "missions" in _tables_referenced(s)]
    assert any("index/by_user" in json.dumps(r) for r in _resources(by_user))
    # and it stops executions (failing their waiting tasks) only as a chat message that interrupts or rolls back
    # its conversation's active mission does: through mission control, for the caller's own conversation
    assert {"states:StopExecution", "states:SendTaskFailure"} <= actions
    # and it neither publishes on the bus nor touches repositories' snapshots
    assert not actions & {"events:PutEvents", "s3:DeleteObject"}
    assert "dynamodb:Scan" not in actions


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_a_deploy_stores_the_shipped_agent_configurations_through_its_own_function(assembly: Assembly, env):
    # Given the stack's deploy-time custom resource
    (resource,) = assembly.resources(env, RESOURCE_TYPE).values()
    properties = resource["Properties"]
    functions = assembly.resources(env, "AWS::Lambda::Function")
    (name,) = [n for n, f in functions.items() if _function_service(f) == "missions-deploy"]
    # Then CloudFormation asks the deploy function, naming every deployed capability, once the role may write
    assert properties["ServiceToken"] == {"Fn::GetAtt": [name, "Arn"]}
    installed = [registry.load(n) for n in registry.installed()]
    assert properties["Capabilities"] == [c.name for c in installed]
    role = functions[name]["Properties"]["Role"]["Fn::GetAtt"][0]
    assert role in resource["DependsOn"]
    # And an update is sent exactly when a capability.toml ships other agent settings
    assert properties["Fingerprint"] == shipped_fingerprint(installed)
    fitness = registry.load("fitness_coach")
    changed = dataclasses.replace(fitness, prompts={**fitness.prompts, "assess": "another prompt"})
    assert (
        shipped_fingerprint([changed if c.name == "fitness_coach" else c for c in installed])
        != properties["Fingerprint"]
    )
    # And its role reads and adds agent versions, and nothing else of any table
    statements = _role_statements(assembly, env, role)
    data = [s for s in statements if any(a.startswith("dynamodb:") for a in _actions(s))]
    assert [(_actions(s), _tables_referenced(s)) for s in data] == [
        ({"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}, {"agents"})
    ]


def test_the_interrupt_role_keeps_a_paused_missions_wait_and_appends_to_its_timeline_only(assembly: Assembly):
    # Given the interrupt function's role in dev (it waits for answers, and for a paused mission's resume)
    (function,) = [
        f
        for f in assembly.resources("dev", "AWS::Lambda::Function").values()
        if _function_service(f) == "missions-interrupt"
    ]
    statements = _role_statements(assembly, "dev", function["Properties"]["Role"]["Fn::GetAtt"][0])

    def granted(table: str) -> set[str]:
        return set().union(*(_actions(s) for s in statements if table in _tables_referenced(s)))

    # Then it records the pause on the mission (an update) and appends `mission.paused`; it creates a mission
    # only as a delegation's sub-mission (a submit, whose record is deleted again if its start fails)
    assert granted("missions") == {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem"}
    assert granted("interrupts") == {"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem"}
    assert granted("events") == {"dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"}
    # and it neither stops executions nor fails tasks (a cancel does that, from the API)
    actions = set().union(*(_actions(s) for s in statements))
    assert not actions & {"states:StopExecution", "states:SendTaskFailure", "dynamodb:Scan"}


def test_the_stream_function_follows_the_environments_auth(variants: Assembly):
    # Given an environment with its own identity provider, and one with IAM auth
    _, function = _stream_function(variants, "sso")
    variables = function["Properties"]["Environment"]["Variables"]
    # Then the first's stream function verifies that issuer's tokens for its audience
    assert (variables["MISSIONS_JWT_ISSUER"], variables["MISSIONS_JWT_AUDIENCE"]) == (
        "https://login.example.com",
        "missions",
    )
    # and the second has none (a URL with IAM auth would name a principal, not the claims the handler reads)
    assert not [
        f
        for f in variants.resources("iamonly", "AWS::Lambda::Function").values()
        if _function_service(f) == "missions-stream"
    ]
    assert "StreamUrl" not in variants.templates["iamonly"]["Outputs"]
    # and browsers may call it from the origins of the environment's sign-in callbacks
    (url,) = variants.resources("ops", "AWS::Lambda::Url").values()
    assert url["Properties"]["Cors"]["AllowOrigins"] == ["http://localhost:8787", "https://console.team.test", SITE]
