"""The synthesized stacks' storage: tables, the blob and snapshot buckets, the repository importer.

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import json

from aws_cdk.assertions import Match, Template

from missions.core.capability import registry as registry
from missions.core.specs import TABLES
from tests.infra.conftest import Assembly
from tests.support.stack import _function_service


def _by_logical_id_prefix(resources: dict, prefix: str) -> dict:
    return {k: v for k, v in resources.items() if k.startswith(prefix)}


def test_tables_have_the_specs_keys_indexes_streams_and_ttl(assembly: Assembly):
    tables = assembly.resources("dev", "AWS::DynamoDB::Table")
    assert len(tables) == len(TABLES)
    for spec in TABLES:
        (props,) = [t["Properties"] for k, t in tables.items() if k.startswith(f"Storage{spec.id.capitalize()}")]
        assert props["KeySchema"] == spec.key_schema()
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["SSESpecification"]["SSEEnabled"] is True
        if spec.ttl_attribute:
            assert props["TimeToLiveSpecification"] == {"AttributeName": spec.ttl_attribute, "Enabled": True}
        else:
            assert "TimeToLiveSpecification" not in props
        if spec.stream:
            assert props["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
        else:
            assert "StreamSpecification" not in props
        indexes = {i["IndexName"]: i for i in props.get("GlobalSecondaryIndexes", [])}
        assert set(indexes) == {index.name for index in spec.indexes}
        for index in spec.indexes:  # each holds what its queries read, as the specs say
            expected = {"ProjectionType": index.projection_type}
            if index.non_key_attributes:
                expected["NonKeyAttributes"] = list(index.non_key_attributes)
            assert indexes[index.name]["Projection"] == expected


def test_indexes_project_only_what_their_queries_read(assembly: Assembly):
    # Then the missions' summary indexes include the summary, the others hold keys, repositories are listed whole
    tables = assembly.resources("dev", "AWS::DynamoDB::Table")
    projections = {
        index["IndexName"]: index["Projection"]
        for table in tables.values()
        for index in table["Properties"].get("GlobalSecondaryIndexes", [])
    }
    summary = {"goal", "status", "priority", "trigger", "completed_at", "terminal_reason", "pending_interrupt"}
    for name, key in (("by_user", "capability"), ("by_capability", "user_id")):
        assert projections[name]["ProjectionType"] == "INCLUDE"
        included = set(projections[name]["NonKeyAttributes"])
        assert summary | {key, "feedback", "listed_stage", "listed_cost_usd"} == included
        # nothing a stage's update changes (its stage, counters, next stage, updated_at) is in a summary index
        assert not included & {"stage", "counters", "next_stage", "phase", "updated_at", "result", "asking"}
    assert {projections[n]["ProjectionType"] for n in ("by_status", "waiting", "by_namespace_head")} == {"KEYS_ONLY"}
    assert projections["by_owner"] == {"ProjectionType": "ALL"}
    # and the 100 projected attributes DynamoDB allows a table are far off
    assert all(len(p.get("NonKeyAttributes", [])) <= 20 for p in projections.values())


def test_the_blob_bucket_is_private_encrypted_tls_only_and_expires_blobs(assembly: Assembly):
    template = Template.from_json(assembly.templates["dev"])
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": Match.object_like({"ServerSideEncryptionConfiguration": Match.any_value()}),
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LifecycleConfiguration": {"Rules": Match.array_with([Match.object_like({"ExpirationInDays": 90})])},
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_the_snapshot_bucket_is_private_encrypted_versioned_and_forgets_deleted_repositories(assembly: Assembly):
    buckets = _by_logical_id_prefix(assembly.resources("dev", "AWS::S3::Bucket"), "StorageSnapshots")
    (bucket,) = buckets.values()
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert all(props["PublicAccessBlockConfiguration"].values())
    rules = {rule["Id"]: rule for rule in props["LifecycleConfiguration"]["Rules"]}
    # a deleted repository's snapshots are gone after the configured days; unused uploads after a day
    assert rules["forget-deleted-repositories"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}
    assert rules["forget-deleted-repositories"]["ExpiredObjectDeleteMarker"] is True
    assert rules["expire-uploads"]["Prefix"] == "uploads/" and rules["expire-uploads"]["ExpirationInDays"] == 1


def _snapshot_grants(assembly: Assembly, function: dict) -> dict[str, set[str]]:
    """prefix ('repositories/*', 'uploads/*') -> s3 actions the function's role has on the snapshot bucket."""
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    grants: dict[str, set[str]] = {}
    for policy in assembly.resources("dev", "AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            text = json.dumps(statement["Resource"])
            if "StorageSnapshots" not in text:
                continue
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            prefix = next((p for p in ("repositories/*", "uploads/*") if p in text), "bucket")
            grants.setdefault(prefix, set()).update(actions)
    return grants


def test_only_the_importer_writes_snapshots_and_only_stages_that_read_code_read_them(assembly: Assembly):
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    writers, readers = set(), set()
    for function in functions.values():
        grants = _snapshot_grants(assembly, function)
        name = _function_service(function)
        variables = function["Properties"]["Environment"]["Variables"]
        label = f"{variables.get('MISSIONS_CAPABILITY', '')}:{function['Properties']['Description']}"
        if "s3:PutObject" in grants.get("repositories/*", set()):
            writers.add(name)
        if "s3:GetObject" in grants.get("repositories/*", set()):
            readers.add(label)
        if name == "missions-api":  # presigns uploads, deletes what a repository leaves, and erases users
            # (every version of their snapshots and uploads: DELETE /me), listing only under those prefixes
            assert grants["uploads/*"] == {"s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:DeleteObjectVersion"}
            assert grants["repositories/*"] == {"s3:DeleteObject", "s3:DeleteObjectVersion"}
            assert grants["bucket"] == {"s3:ListBucket", "s3:ListBucketVersions"}
    assert writers == {"missions-repository-import"}
    code_analysis = registry.load("code_analysis")
    expected = {f"code_analysis:code_analysis: {a.name} stage" for a in code_analysis.pipeline.agents if a.has_tools}
    assert readers == expected and expected  # perception and traverser; no LLM stage, no other capability


def test_stages_that_read_code_and_the_importer_have_room_for_snapshots(assembly: Assembly):
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    sizes = {}
    for function in functions.values():
        props = function["Properties"]
        key = props["Environment"]["Variables"].get("MISSIONS_CAPABILITY", "") + ":" + props["Description"]
        sizes[key] = props.get("EphemeralStorage", {}).get("Size", 512)
    assert sizes["code_analysis:code_analysis: traverser stage"] == 2048
    assert sizes["code_analysis:code_analysis: intent stage"] == 512
    (importer,) = [f for f in functions.values() if _function_service(f) == "missions-repository-import"]
    props = importer["Properties"]
    assert props["EphemeralStorage"] == {"Size": 4096} and props["Timeout"] == 900 and props["MemorySize"] == 1024
    assert "DeadLetterConfig" in props


def test_import_requests_on_the_bus_reach_the_importer_with_a_dead_letter_queue(assembly: Assembly):
    rules = assembly.resources("dev", "AWS::Events::Rule")
    (rule,) = [
        r for r in rules.values() if r["Properties"].get("EventPattern", {}).get("source") == ["missions.repositories"]
    ]
    assert rule["Properties"]["EventPattern"]["detail-type"] == ["repository.import"]
    (target,) = rule["Properties"]["Targets"]
    assert "RepositoriesrepositoryimportFunction" in json.dumps(target["Arn"]) and target["DeadLetterConfig"]
