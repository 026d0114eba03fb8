"""The sandbox functions in the synthesized stacks: one per tier, sized from the tier, in a VPC with no
way out, under a role that may only write its logs (and let Lambda attach the function to that VPC),
invoked by no one until a stage is granted it. The synth itself ran cdk-nag's AwsSolutions pack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match, Template

from infra.components.functions import FunctionFactory
from infra.components.sandbox import ENI_DESCRIBE, ENI_MANAGE, Sandbox, function_memory_mb, function_timeout_seconds
from infra.config import load_environments
from missions.core.capability import registry as registry
from missions.core.sandbox import FUNCTION_HEADROOM_MB, FUNCTION_HEADROOM_SECONDS, TIERS
from tests.infra.conftest import Assembly, deploy_time, synthesize

ENVIRONMENTS = ("dev", "prod")  # the smallest and the one nearest CloudFormation's 500 resources
CLOUDFORMATION_LIMIT = 500
NO_PATH_OUT = (
    "AWS::EC2::InternetGateway",
    "AWS::EC2::EgressOnlyInternetGateway",
    "AWS::EC2::NatGateway",
    "AWS::EC2::VPCEndpoint",
    "AWS::EC2::VPCPeeringConnection",
    "AWS::EC2::TransitGatewayAttachment",
    "AWS::EC2::VPNGateway",
    "AWS::EC2::Route",
    "AWS::EC2::SecurityGroupEgress",
)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    return synthesize(tmp_path_factory.mktemp("synth-sandbox"), environments=list(ENVIRONMENTS))


def _sandbox_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tier -> the sandbox function's resource."""
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function" or deploy_time(logical_id):
            continue
        tier = resource["Properties"]["Environment"]["Variables"].get("MISSIONS_SANDBOX_TIER")
        if tier:
            found[tier] = {"id": logical_id, **resource}
    return found


def _policies_of(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"]["Roles"]
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_a_function_per_tier_sized_from_the_tier_with_headroom_for_itself(stacks: Assembly, env: str):
    functions = _sandbox_functions(stacks.templates[env])
    config = load_environments(_environments())[env]
    assert set(functions) == set(TIERS)
    for tier, limits in TIERS.items():
        props = functions[tier]["Properties"]
        # the script's limits are the tier's (256/512/1024 MB, 15/30/60 s); the function holds it and itself
        assert props["MemorySize"] == limits.memory_mb + FUNCTION_HEADROOM_MB == function_memory_mb(tier)
        assert props["Timeout"] == limits.timeout_seconds + FUNCTION_HEADROOM_SECONDS == function_timeout_seconds(tier)
        assert props["ReservedConcurrentExecutions"] == config.sandbox_concurrency
        assert (props["Runtime"], props["Handler"]) == ("python3.11", "handler.lambda_handler")
        assert props.get("TracingConfig", {"Mode": "PassThrough"}) == {"Mode": "PassThrough"}
        assert props["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "missions-sandbox"
        assert "MISSIONS_SANDBOX_FUNCTIONS" not in props["Environment"]["Variables"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_role_allows_only_its_own_logs_and_the_interfaces_lambda_attaches(stacks: Assembly, env: str):
    template = stacks.templates[env]
    assert _sandbox_functions(template), "no sandbox function in the template"
    for tier, function in _sandbox_functions(template).items():
        role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
        role = template["Resources"][role_id]["Properties"]
        assert "ManagedPolicyArns" not in role and "Policies" not in role, tier
        logs, describe, manage = _policies_of(template, role_id)
        log_group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert logs == {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [log_group, "Arn"]},
        }
        assert describe == {"Action": list(ENI_DESCRIBE), "Effect": "Allow", "Resource": "*"}
        assert manage["Action"] == list(ENI_MANAGE) and manage["Effect"] == "Allow"
        assert manage["Resource"] == {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":ec2:",
                    {"Ref": "AWS::Region"},
                    ":",
                    {"Ref": "AWS::AccountId"},
                    ":*/*",
                ],
            ]
        }


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_no_network_path_out_isolated_subnets_no_dns_and_a_security_group_without_egress(stacks: Assembly, env: str):
    template = stacks.templates[env]
    resources = template["Resources"]
    assert not [k for k, r in resources.items() if r["Type"] in NO_PATH_OUT]
    (vpc,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::VPC"]
    assert vpc["EnableDnsSupport"] is False and vpc["EnableDnsHostnames"] is False
    subnets = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::Subnet"]
    assert len(subnets) == 2 and all(s["MapPublicIpOnLaunch"] is False for s in subnets)
    for function in _sandbox_functions(template).values():
        (group_id,) = [g["Fn::GetAtt"][0] for g in function["Properties"]["VpcConfig"]["SecurityGroupIds"]]
        group = resources[group_id]["Properties"]
        assert "SecurityGroupIngress" not in group
        # CloudFormation gives a group without rules allow-all egress; this rule matches no packet instead
        assert group["SecurityGroupEgress"] == [
            {
                "CidrIp": "255.255.255.255/32",
                "Description": "Disallow all traffic",
                "FromPort": 252,
                "IpProtocol": "icmp",
                "ToPort": 86,
            }
        ]
        assert len(function["Properties"]["VpcConfig"]["SubnetIds"]) == 2
    Template.from_json(template).resource_count_is("AWS::EC2::SecurityGroup", 1)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_only_stages_that_declare_sandbox_may_invoke_it(stacks: Assembly, env: str):
    # Given the roles of every function, and the stages whose capability.toml says `sandbox = true`
    template = stacks.templates[env]
    sandbox_ids = {function["id"] for function in _sandbox_functions(template).values()}
    declared = {
        (name, agent.name)
        for name in registry.installed()
        for agent in registry.load(name).pipeline.agents
        if agent.sandbox
    }
    assert declared, "a capability runs analysis scripts (home_assistant's specialists)"
    roles = {
        resource["Properties"]["Role"]["Fn::GetAtt"][0]: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function" and not deploy_time(logical_id)
    }
    allowed: set[str] = set()
    for role_id, function in roles.items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        stage = function["Properties"].get("Description", "").removesuffix(" stage").split(": ")[-1]
        if (variables.get("MISSIONS_CAPABILITY"), stage) in declared:
            allowed.add(role_id)
    assert len(allowed) == len(declared)
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::IAM::Policy":
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                named = {t["Fn::GetAtt"][0] for t in targets if isinstance(t, dict) and "Fn::GetAtt" in t}
                if named & sandbox_ids:  # Then only those stages may invoke it, and only that
                    attached = {role["Ref"] for role in resource["Properties"]["Roles"]}
                    assert attached <= allowed, f"{logical_id} may invoke a sandbox function"
                    assert statement["Action"] == "lambda:InvokeFunction" and named == sandbox_ids
        if resource["Type"] == "AWS::Lambda::Permission":
            assert resource["Properties"]["FunctionName"].get("Fn::GetAtt", [None])[0] not in sandbox_ids


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_other_function_knows_the_sandbox_functions_so_none_runs_scripts_itself(stacks: Assembly, env: str):
    template = stacks.templates[env]
    sandbox_ids = {function["id"] for function in _sandbox_functions(template).values()}
    others = [
        r
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function" and k not in sandbox_ids and not deploy_time(k)
    ]
    assert others
    for function in others:
        names = function["Properties"]["Environment"]["Variables"]["MISSIONS_SANDBOX_FUNCTIONS"]
        referenced = {part["Ref"] for part in names["Fn::Join"][1] if isinstance(part, dict) and "Ref" in part}
        assert referenced == sandbox_ids


def test_the_stacks_stay_under_cloudformations_resource_limit(stacks: Assembly):
    counts = {env: len(json.loads(stacks.files[env][0].read_text())["Resources"]) for env in stacks.templates}
    sandbox = {
        env: len([k for k in template["Resources"] if k.startswith("Sandbox")])
        for env, template in stacks.templates.items()
    }
    print(f"resources per environment: {counts}; the sandbox's own: {sandbox}")
    assert all(count < CLOUDFORMATION_LIMIT for count in counts.values()), counts
    assert sandbox == {"dev": 20, "prod": 20}  # VPC, 2 subnets, 2 route tables + associations, SG, 3 x 4
    alarms = Template.from_json(stacks.templates["prod"]).find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"AlarmDescription": Match.string_like_regexp("^sandbox-")}}
    )
    assert len(alarms) == 2 * len(TIERS)  # errors and throttles per function, as every function has


def test_grant_invoke_gives_a_stage_exactly_invoke_on_the_tiers_it_names(tmp_path: Path):
    # Given the sandbox in a stack of its own, and the role of a stage that runs quick and deep scripts
    (tmp_path / "layer" / "python").mkdir(parents=True)
    stack = Stack(App(), "scratch")
    config = load_environments(_environments())["dev"]
    layer = lambda_.LayerVersion(stack, "Layer", code=lambda_.Code.from_asset(str(tmp_path / "layer")))
    sandbox = Sandbox(
        stack, "Sandbox", config=config, functions=FunctionFactory(config=config, layer=layer, environment={})
    )
    stage = iam.Role(stack, "Stage", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    # When it is granted invoke on two tiers
    sandbox.grant_invoke(stage, ("quick", "deep"))
    # Then its policy is that one action on those two functions, and nothing else
    template = Template.from_stack(stack).to_json()
    role_id = next(
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role" and k.startswith("Stage")
    )
    (statement,) = _policies_of(template, role_id)
    assert statement["Action"] == "lambda:InvokeFunction"
    assert {target["Fn::GetAtt"][0] for target in statement["Resource"]} == {
        function["id"] for tier, function in _sandbox_functions(template).items() if tier in ("quick", "deep")
    }


def _environments() -> dict[str, Any]:
    import json

    from infra.app import ROOT

    return json.loads((ROOT / "cdk.json").read_text())["context"]["environments"]  # type: ignore[no-any-return]
