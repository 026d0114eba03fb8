"""A capability's remote MCP servers in the stack: the stage that uses a server's tools may read that
server's token secret and no other; a stage without them reads none (docs/mcp-tool-sources.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import App, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from infra.components.access import ACCESS, Resources
from infra.components.functions import FunctionFactory
from infra.components.pipeline import CapabilityPipeline
from infra.config import load_environments
from missions.core.capability import registry
from tests.infra.conftest import Assembly

CATALOG_TOKEN = "secret:missions-dev/catalog-token-??????"
TICKETS_TOKEN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:tickets-token-AbCdEf"


def _environments() -> dict[str, Any]:
    from infra.app import ROOT

    return json.loads((ROOT / "cdk.json").read_text())["context"]["environments"]  # type: ignore[no-any-return]


def _pipeline_template(tmp_path: Path) -> dict[str, Any]:
    """remote_lookup's pipeline alone, in a stack of its own (the tables and bucket it is granted are stand-ins)."""
    (tmp_path / "layer" / "python").mkdir(parents=True)
    stack = Stack(App(), "scratch")
    config = load_environments(_environments())["dev"]
    layer = lambda_.LayerVersion(stack, "Layer", code=lambda_.Code.from_asset(str(tmp_path / "layer")))
    key = dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    tables = {name: dynamodb.Table(stack, f"T{name}", partition_key=key) for name in ACCESS["stage"].tables}
    resources = Resources(tables=tables, bucket=s3.Bucket(stack, "Blobs"))
    interrupt = lambda_.Function.from_function_arn(
        stack, "Interrupt", "arn:aws:lambda:us-east-1:123456789012:function:interrupt"
    )
    capability = registry.Registry(package="tests.support.mcp_capabilities", plugins=dict).load("remote_lookup")
    CapabilityPipeline(
        stack,
        "Pipeline",
        capability=capability,
        config=config,
        functions=FunctionFactory(config=config, layer=layer, environment={}),
        resources=resources,
        interrupt_function=interrupt,
    )
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _secret_reads(template: dict[str, Any]) -> dict[str, list[Any]]:
    """Per stage: the resources its role may read secrets of."""
    roles = {}
    for function in template["Resources"].values():
        if function["Type"] == "AWS::Lambda::Function" and "Description" in function["Properties"]:
            stage = function["Properties"]["Description"].split(": ")[-1].removesuffix(" stage")
            roles[function["Properties"]["Role"]["Fn::GetAtt"][0]] = stage
    reads: dict[str, list[Any]] = {stage: [] for stage in roles.values()}
    for policy in template["Resources"].values():
        if policy["Type"] != "AWS::IAM::Policy":
            continue
        for role in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if any(action.startswith("secretsmanager:") for action in actions):
                    assert actions == ["secretsmanager:GetSecretValue"] or actions == "secretsmanager:GetSecretValue"
                    found = (
                        statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                    )
                    reads[roles[role["Ref"]]] += found
    return reads


def test_each_stage_may_read_exactly_the_tokens_of_the_mcp_servers_it_uses(tmp_path: Path):
    # Given remote_lookup: lookup uses the catalog server, file the tickets server, report neither
    reads = _secret_reads(_pipeline_template(tmp_path))
    # Then lookup may read the catalog's token (by name, any suffix), file the tickets' token (its exact ARN)
    (catalog,) = reads["lookup"]
    assert CATALOG_TOKEN in json.dumps(catalog)
    assert reads["file"] == [TICKETS_TOKEN]
    # and report reads no secret at all
    assert reads["report"] == []


def test_no_deployed_function_runs_mcp_servers_as_child_processes(assembly: Assembly):
    # Given every function of every environment / Then none enables stdio MCP servers: in Lambda they are
    # refused with the reason (missions.service.mcp_tools), and code_analysis's history questions say so
    functions = [f for env in ("dev", "prod") for f in assembly.resources(env, "AWS::Lambda::Function").values()]
    assert functions
    enabled = [
        f["Properties"]["Description"]
        for f in functions
        if (f["Properties"].get("Environment") or {}).get("Variables", {}).get("MISSIONS_MCP_STDIO")
        not in (None, "false")
    ]
    assert enabled == []
