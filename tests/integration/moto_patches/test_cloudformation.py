"""Patches 12, 13 and 15 (missions.local.moto.cloudformation), tested against moto itself."""

from __future__ import annotations

import json
from typing import Any

import pytest

from missions.local import moto as moto_patches
from tests.integration.moto_patches.conftest import REGION, Aws, eventually

NESTED = {
    "Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "nested-queue"}}},
    "Outputs": {"QueueUrl": {"Value": {"Ref": "Queue"}}},
}


PARENT = {
    "Resources": {
        "Nested": {
            "Type": "AWS::CloudFormation::Stack",
            "Properties": {"TemplateURL": "https://s3.amazonaws.com/templates/nested.json"},
        },
        "Reader": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": "reader",
                "Tags": [{"Key": "nested", "Value": {"Fn::GetAtt": ["Nested", "Outputs.QueueUrl"]}}],
            },
        },
    },
    "Outputs": {"FromNested": {"Value": {"Fn::GetAtt": ["Nested", "Outputs.QueueUrl"]}}},
}


def _deploy_parent(aws: Aws) -> dict[str, Any]:
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="templates")
    s3.put_object(Bucket="templates", Key="nested.json", Body=json.dumps(NESTED).encode())
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName="parent", TemplateBody=json.dumps(PARENT))
    return cloudformation.describe_stacks(StackName="parent")["Stacks"][0]


def test_a_parent_stack_reads_its_nested_stacks_outputs(aws: Aws) -> None:
    # Given a parent stack whose resource and output read a nested stack's output (each capability's
    # stack is nested in the runtime's, and the runtime reads its state machine's ARN this way)
    stack = _deploy_parent(aws)
    # Then it deploys, and the value is the nested stack's output
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    (output,) = stack["Outputs"]
    assert output["OutputKey"] == "FromNested" and output["OutputValue"].endswith("/nested-queue")


def test_without_patch_12_moto_cannot_read_a_nested_stacks_output(aws: Aws, keep_patch_state: None) -> None:
    # If a moto upgrade answers Outputs.X itself, installing patch 12 (it adds a missing method) is refused
    from moto.cloudformation.models import Stack

    moto_patches.uninstall()
    assert not hasattr(Stack, "get_cfn_attribute"), "moto reads nested outputs now: patch 12 can go"
    with pytest.raises(Exception, match="get_cfn_attribute|Outputs"):
        _deploy_parent(aws)


def _function_url_stack(aws: Aws) -> dict[str, Any]:
    import boto3

    template = {
        "Resources": {
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "FunctionName": "streamer",
                    "Runtime": "python3.11",
                    "Handler": "run.sh",
                    "Role": aws.role,
                    "Code": {"ZipFile": "print('never run')"},
                },
            },
            "Url": {
                "Type": "AWS::Lambda::Url",
                "Properties": {
                    "TargetFunctionArn": {"Fn::GetAtt": ["Fn", "Arn"]},
                    "AuthType": "NONE",
                    "InvokeMode": "RESPONSE_STREAM",
                    "Cors": {"AllowOrigins": ["http://localhost:8787"], "AllowMethods": ["GET", "POST"]},
                },
            },
        },
        "Outputs": {"StreamUrl": {"Value": {"Fn::GetAtt": ["Url", "FunctionUrl"]}}},
    }
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName="streaming", TemplateBody=json.dumps(template))
    return cloudformation.describe_stacks(StackName="streaming")["Stacks"][0]


def test_a_function_url_deploys_and_its_url_is_an_output(aws: Aws) -> None:
    """Given a stack with a function, its AWS::Lambda::Url (response stream, no auth) and an output of it
    When it is deployed (patch 13)
    Then it completes, the function has that URL configured as the template says, and the output is it;
    deleting the stack removes the URL with the function."""
    stack = _function_url_stack(aws)
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    config = aws.lambda_.get_function_url_config(FunctionName="streamer")
    assert (config["InvokeMode"], config["AuthType"]) == ("RESPONSE_STREAM", "NONE")
    assert config["Cors"]["AllowOrigins"] == ["http://localhost:8787"]
    (output,) = stack["Outputs"]
    assert output["OutputValue"] == config["FunctionUrl"] and ".lambda-url." in config["FunctionUrl"]
    import boto3

    boto3.client("cloudformation", region_name=REGION).delete_stack(StackName="streaming")
    assert aws.lambda_.list_functions()["Functions"] == []


def test_without_patch_13_moto_cannot_deploy_a_function_url(aws: Aws, keep_patch_state: None) -> None:
    # If a moto upgrade knows AWS::Lambda::Url itself, patch 13 can go
    from moto.cloudformation.parsing import get_model_map

    moto_patches.uninstall()
    assert "AWS::Lambda::Url" not in get_model_map(), "moto deploys function URLs now: patch 13 can go"
    with pytest.raises(Exception, match="has_cfn_attr|Url"):
        _function_url_stack(aws)


def _custom_resource_stack(aws: Aws, reply_status: str) -> tuple[Any, list[dict[str, Any]]]:
    """A stack whose custom resource names a function registered only through `resolve_with`, which
    replies `reply_status` through CloudFormationReplies (as the deploy function does)."""
    import boto3

    asked: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        asked.append(event)
        reply = {
            "Status": reply_status,
            "Reason": "the table refused it" if reply_status == "FAILED" else "done",
            "PhysicalResourceId": "made",
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": {"Answer": "42"},
        }
        moto_patches.CloudFormationReplies().send(event["ResponseURL"], reply)

    moto_patches.resolve_with(lambda name, environment: handler if environment.get("ROLE") == "deployer" else None)
    aws.registered.append("deployer")
    template = {
        "Resources": {
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "FunctionName": "deployer",
                    "Runtime": "python3.12",
                    "Handler": "handler.lambda_handler",
                    "Role": aws.role,
                    "Code": {"ZipFile": "never run"},
                    "Environment": {"Variables": {"ROLE": "deployer"}},
                },
            },
            "Step": {
                "Type": "Custom::Step",
                "Properties": {"ServiceToken": {"Fn::GetAtt": ["Fn", "Arn"]}, "Wanted": ["a", "b"]},
            },
        },
        "Outputs": {"Answer": {"Value": {"Fn::GetAtt": ["Step", "Answer"]}}},
    }
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    try:
        cloudformation.create_stack(StackName="custom", TemplateBody=json.dumps(template))
        eventually(
            lambda: (
                cloudformation.describe_stacks(StackName="custom")["Stacks"][0]["StackStatus"] != "CREATE_IN_PROGRESS"
            ),
            what="the custom resource's reply",
        )
    finally:
        moto_patches.resolve_with(None)
    return cloudformation, asked


def test_a_custom_resource_asks_its_function_and_the_stack_completes_on_its_reply(aws: Aws) -> None:
    """Given a stack with a custom resource whose function replies SUCCESS with data (patch 15)
    When it is deployed
    Then the function was asked once with the resource's properties, the stack completes, and an output
    reading the reply's data has it."""
    cloudformation, asked = _custom_resource_stack(aws, "SUCCESS")
    stack = cloudformation.describe_stacks(StackName="custom")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert len(asked) == 1, [(e["RequestType"], e["LogicalResourceId"], e["StackId"]) for e in asked]
    (event,) = asked
    assert (event["RequestType"], event["ResourceProperties"]["Wanted"]) == ("Create", ["a", "b"])
    assert {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])} == {"Answer": "42"}


def test_a_failed_reply_fails_the_stack_with_the_functions_reason(aws: Aws) -> None:
    # Given a custom resource whose function replies FAILED / When deployed / Then the stack failed, saying why
    cloudformation, _ = _custom_resource_stack(aws, "FAILED")
    assert cloudformation.describe_stacks(StackName="custom")["Stacks"][0]["StackStatus"] == "CREATE_FAILED"
    events = cloudformation.describe_stack_events(StackName="custom")["StackEvents"]
    assert "the table refused it" in [e.get("ResourceStatusReason") for e in events]
