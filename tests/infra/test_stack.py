"""Template assertions on the synthesized stacks (dev, staging, prod from cdk.json).

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.components.access import ACCESS
from infra.components.agent_versions import RESOURCE_TYPE, shipped_fingerprint
from infra.components.api import WEBHOOK_ROUTE, api_routes
from infra.components.monitoring import NO_SUBSCRIBER
from infra.components.pipeline import definition_of
from infra.config import ConfigError, load_environments
from missions.app.streaming import READINESS_PATH
from missions.core.capability import registry as registry
from missions.core.specs import TABLES
from missions.core.triggers.specs import memory_rules, schedule_specs, webhook_rules
from tests.infra.conftest import Assembly, deploy_time, synthesize

ENVIRONMENTS = ("dev", "staging", "prod")
ASYNCHRONOUS = {
    "missions-trigger",
    "missions-schedule",
    "missions-status",
    "missions-sla",
    "missions-retention",
    "missions-repository-import",
}
NO_RESOURCE = {"dynamodb:ListStreams"}  # lists stream ARNs of the account; IAM offers no narrower resource
# Lambda attaching the sandbox functions to their VPC (infra/components/sandbox.py)
NO_RESOURCE |= {"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"}
SUITE_PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"  # what this test process runs


def _by_logical_id_prefix(resources: dict, prefix: str) -> dict:
    return {k: v for k, v in resources.items() if k.startswith(prefix)}


SITE = {"Fn::Join": ["", ["https://", {"Fn::GetAtt": ["SiteDistribution390DED28", "DomainName"]}]]}  # the dashboard
SITE_PAGE = {"Fn::Join": ["", ["https://", {"Fn::GetAtt": ["SiteDistribution390DED28", "DomainName"]}, "/"]]}


def _function_service(function: dict) -> str:
    return function["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]


# --------------------------------------------------------------------------- pipelines


def test_a_lambda_per_stage_per_capability_sized_by_the_capability(assembly: Assembly):
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    assert registry.installed(), "no capability installed"
    for name in registry.installed():
        capability = registry.load(name)
        stages = {
            f["Properties"]["Description"].split(": ", 1)[1].removesuffix(" stage"): f["Properties"]
            for f in functions.values()
            if f["Properties"]["Environment"]["Variables"].get("MISSIONS_CAPABILITY") == name
        }
        assert set(stages) == {agent.name for agent in capability.pipeline.agents}
        for agent in capability.pipeline.agents:
            props = stages[agent.name]
            assert props["MemorySize"] == agent.memory_mb
            assert props["Timeout"] == agent.timeout_seconds
            assert props.get("ReservedConcurrentExecutions") == agent.reserved_concurrency
            assert (props["Handler"], props["Runtime"], props["Architectures"]) == (
                "handler.lambda_handler",
                SUITE_PYTHON,
                ["arm64"],
            )
            assert props["TracingConfig"] == {"Mode": "Active"} and len(props["Layers"]) == 1


def _machines(assembly: Assembly, env: str, kind: str = "STANDARD") -> dict[str, Any]:
    """The stack's state machines of one type: STANDARD (a mission each) or EXPRESS (its segments)."""
    return {
        k: m
        for k, m in assembly.resources(env, "AWS::StepFunctions::StateMachine").items()
        if m["Properties"].get("StateMachineType", "STANDARD") == kind
    }


def test_a_state_machine_per_capability_whose_definition_is_the_compilers(assembly: Assembly):
    machines = _machines(assembly, "dev")
    segments = _machines(assembly, "dev", "EXPRESS")
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    assert len(machines) == len(registry.installed())
    for name in registry.installed():
        capability = registry.load(name)
        (machine,) = [
            m
            for m in machines.values()
            if m["Properties"]["StateMachineName"] == f"missions-dev-{name}".replace("_", "-")
        ]
        props = machine["Properties"]
        # the definition is the compiler's output verbatim; CloudFormation substitutes the ARNs
        assert props["DefinitionString"] == definition_of(capability)
        substitutions = props["DefinitionSubstitutions"]
        interrupt = functions[substitutions["fn_interrupt"]["Fn::GetAtt"][0]]
        assert _function_service(interrupt) == "missions-interrupt"
        assert props["TracingConfiguration"] == {"Enabled": True}
        assert props["LoggingConfiguration"]["Level"] == "ALL"
        # and its stages run in an Express machine of its own, the one the mission's machine starts
        segment = segments[substitutions["segment"]["Ref"]]["Properties"]
        assert segment["StateMachineName"] == f"missions-dev-{name}-segment".replace("_", "-")
        assert segment["DefinitionString"] == definition_of(capability, "segment")
        assert segment["TracingConfiguration"] == {"Enabled": True}
        assert segment["LoggingConfiguration"]["Level"] == "ALL"
        for agent in capability.pipeline.agents:
            target = functions[segment["DefinitionSubstitutions"][f"fn_{agent.name}"]["Fn::GetAtt"][0]]
            assert target["Properties"]["Description"] == f"{name}: {agent.name} stage"
        assert (
            substitutions[f"fn_{capability.pipeline.final}"]
            == segment["DefinitionSubstitutions"][f"fn_{capability.pipeline.final}"]
        )
    assert len(segments) == len(machines)


def test_a_missions_machine_may_start_only_its_own_segments_and_follow_them(assembly: Assembly):
    assert _machines(assembly, "dev"), "no mission state machine"
    for machine in _machines(assembly, "dev").values():
        props = machine["Properties"]
        name = props["StateMachineName"]
        statements = _role_statements(assembly, "dev", props["RoleArn"]["Fn::GetAtt"][0])
        (start,) = [s for s in statements if "states:StartExecution" in _actions(s)]
        # Then it starts its own segment machine and nothing else
        assert start["Resource"] == props["DefinitionSubstitutions"]["segment"]
        # and describes and stops only that machine's executions (standard and express ARNs)
        (follow,) = [s for s in statements if "states:DescribeExecution" in _actions(s)]
        assert _actions(follow) == {"states:DescribeExecution", "states:StopExecution"}
        rendered = json.dumps(follow["Resource"])
        assert f":execution:{name}-segment:*" in rendered and f":express:{name}-segment:*" in rendered
        # and the managed rule through which Step Functions learns that a segment ended
        (rule,) = [s for s in statements if "events:PutRule" in _actions(s)]
        assert "rule/StepFunctionsGetEventsForStepFunctionsExecutionRule" in json.dumps(rule["Resource"])
        assert _actions(rule) == {"events:PutTargets", "events:PutRule", "events:DescribeRule"}


# --------------------------------------------------------------------------- storage


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


# --------------------------------------------------------------------------- least privilege


def test_no_policy_grants_a_wildcard_action_or_data_on_every_resource(assembly: Assembly):
    assert all(assembly.resources(env, "AWS::IAM::Policy") for env in ENVIRONMENTS), "no policy to check"
    for env in ENVIRONMENTS:
        for logical_id, policy in assembly.resources(env, "AWS::IAM::Policy").items():
            if deploy_time(logical_id):  # CDK's own, for the deploy: test_site.py holds it to two buckets
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                assert not any("*" in action for action in actions), (logical_id, actions)
                if statement["Resource"] == "*":  # only actions that take no resource may be granted on '*'
                    assert all(a.split(":")[0] in {"xray", "logs"} or a in NO_RESOURCE for a in actions), actions


def _role_statements(assembly: Assembly, env: str, role: str) -> list[dict]:
    """Every statement of the inline policies attached to the role with this logical id."""
    return [
        statement
        for policy in assembly.resources(env, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict) -> set[str]:
    return set(statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])


def _resources(statement: dict) -> list:
    return statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_function_may_write_its_logs_to_its_own_log_group_only(assembly: Assembly, env):
    # Given every function of the stack (moto enforces no IAM: this is the only guard of logging)
    functions = assembly.resources(env, "AWS::Lambda::Function")
    groups = assembly.resources(env, "AWS::Logs::LogGroup")
    assert functions
    for logical_id, function in functions.items():
        # When its role's policies are read
        own_group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert own_group in groups, logical_id
        statements = _role_statements(assembly, env, function["Properties"]["Role"]["Fn::GetAtt"][0])
        # Then it may create streams in and put events to its own group
        writes = [s for s in statements if {"logs:CreateLogStream", "logs:PutLogEvents"} <= _actions(s)]
        assert writes, f"{logical_id} cannot write its logs"
        assert all(s["Effect"] == "Allow" for s in writes)
        assert {"Fn::GetAtt": [own_group, "Arn"]} in [r for s in writes for r in _resources(s)], logical_id
        # and to no other group: every logs: grant names its own group and nothing else
        for statement in statements:
            if any(a.startswith("logs:") for a in _actions(statement)):
                assert _resources(statement) == [{"Fn::GetAtt": [own_group, "Arn"]}], (logical_id, statement)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_function_runs_the_python_the_suite_runs(assembly: Assembly, env):
    # Given the interpreter this test runs on (the venv the whole suite uses)
    from infra.components.functions import PYTHON_VERSION
    from layers.build import PYTHON as LAYER_PYTHON

    # Then the layer is built for it, and every function and the layer declare it
    assert f"python{PYTHON_VERSION}" == f"python{LAYER_PYTHON}" == SUITE_PYTHON
    runtimes = {f["Properties"]["Runtime"] for f in assembly.resources(env, "AWS::Lambda::Function").values()}
    assert runtimes == {SUITE_PYTHON}
    for layer in assembly.resources(env, "AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleRuntimes"] == [SUITE_PYTHON]


def _tables_referenced(statement: dict) -> set[str]:
    text = json.dumps(statement["Resource"])
    return {spec.id for spec in TABLES if f'"Storage{spec.id.capitalize()}' in text}


def test_each_function_role_reaches_only_the_tables_and_actions_of_its_access_entry(assembly: Assembly):
    resources = assembly.templates["dev"]["Resources"]
    policies = assembly.resources("dev", "AWS::IAM::Policy")
    checked = set()
    for function in assembly.resources("dev", "AWS::Lambda::Function").values():
        access = ACCESS[_function_service(function).removeprefix("missions-")]
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        granted: dict[str, set[str]] = {}
        for policy in policies.values():
            if {"Ref": role} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                for table in _tables_referenced(statement):
                    granted.setdefault(table, set()).update(a for a in actions if a.startswith("dynamodb:"))
        # the memory-stream function also reads its table's stream (granted by the event source)
        expected = {table: set(entry.actions) for table, entry in access.tables.items()}
        if access.readiness:  # GET /ready: the metadata of every table, nothing of its items
            for table in {spec.id for spec in TABLES}:
                expected.setdefault(table, set()).add("dynamodb:DescribeTable")
        if _function_service(function) == "missions-memory-stream":
            granted.pop("memory", None)
        assert granted == expected, _function_service(function)
        checked.add(_function_service(function))
        assert resources[role]["Properties"].get("ManagedPolicyArns") is None  # no AWS managed policies
    assert checked >= {"missions-stage", "missions-interrupt", "missions-api", "missions-webhook"}


def _referenced_ids(value: object) -> set[str]:
    """Logical ids a policy resource refers to (Ref and Fn::GetAtt, however deep in Fn::Join)."""
    if isinstance(value, dict):
        if "Ref" in value:
            return set() if value["Ref"].startswith("AWS::") else {value["Ref"]}  # pseudo parameters
        if "Fn::GetAtt" in value:
            return {value["Fn::GetAtt"][0]}
        return set().union(*(_referenced_ids(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_referenced_ids(v) for v in value)) if value else set()
    return set()


def _stages_by_capability(assembly: Assembly, env: str) -> dict[str, dict[str, dict]]:
    stages: dict[str, dict[str, dict]] = {}
    for logical_id, function in assembly.resources(env, "AWS::Lambda::Function").items():
        capability = function["Properties"]["Environment"]["Variables"].get("MISSIONS_CAPABILITY")
        if capability:
            stages.setdefault(capability, {})[logical_id] = function
    return stages


def test_a_capabilitys_state_machines_invoke_only_its_own_stages_and_the_interrupt(assembly: Assembly):
    # Given each capability's machines (the mission's and its segments') and their roles
    machines = assembly.resources("dev", "AWS::StepFunctions::StateMachine")
    stages = _stages_by_capability(assembly, "dev")
    interrupt = {
        k
        for k, f in assembly.resources("dev", "AWS::Lambda::Function").items()
        if _function_service(f) == "missions-interrupt"
    }
    assert 2 * len(stages) == len(machines) >= 4
    for machine in machines.values():
        name = machine["Properties"]["StateMachineName"].removeprefix("missions-dev-").removesuffix("-segment")
        (capability,) = [c for c in stages if c.replace("_", "-") == name]
        statements = _role_statements(assembly, "dev", machine["Properties"]["RoleArn"]["Fn::GetAtt"][0])
        invoked = set().union(
            *(_referenced_ids(s["Resource"]) for s in statements if "lambda:InvokeFunction" in _actions(s))
        )
        final = {
            k
            for k, f in stages[capability].items()
            if f["Properties"]["Description"].endswith(f": {registry.load(capability).pipeline.final} stage")
        }
        if machine["Properties"].get("StateMachineType") == "EXPRESS":
            # Then a segment invokes its own capability's stages, and nothing else
            assert invoked == set(stages[capability]), name
        else:
            # and the mission's machine the interrupt function and its final stage (the failure path), nothing else
            assert invoked == final | interrupt, name


def test_a_stage_reaches_no_state_machine_and_nothing_of_another_capability(assembly: Assembly):
    # Given every stage function of every capability, and what other capabilities own
    resources = assembly.templates["dev"]["Resources"]
    stages = _stages_by_capability(assembly, "dev")
    machines = set(assembly.resources("dev", "AWS::StepFunctions::StateMachine"))
    # what stages of all capabilities share: the runtime's data stores, keyed by mission id and content hash
    # (no capability in any key, so IAM cannot tell one capability's items or blobs from another's)
    shared = {k for k, r in resources.items() if r["Type"] in ("AWS::DynamoDB::Table", "AWS::S3::Bucket")}
    assert stages, "no stage function"
    for capability, functions in stages.items():
        for logical_id, function in functions.items():
            statements = _role_statements(assembly, "dev", function["Properties"]["Role"]["Fn::GetAtt"][0])
            actions = set().union(*(_actions(s) for s in statements))
            # Then it cannot start, stop or answer any execution, invoke a function (but the sandbox, if it
            # declares it runs analysis scripts) or put events
            stage = function["Properties"]["Description"].removesuffix(" stage").split(": ")[-1]
            analyzes = registry.load(capability).pipeline.agent(stage).sandbox
            allowed = {"lambda:InvokeFunction"} if analyzes else set()
            assert not [a for a in actions - allowed if a.split(":")[0] in ("states", "lambda", "events")], logical_id
            # and every resource it names is its own log group or a shared data store: no state machine,
            # no function, no log group or role of another capability's stages
            own_group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
            named = set().union(*(_referenced_ids(s["Resource"]) for s in statements))
            sandbox = (
                {k for k, r in resources.items() if "MISSIONS_SANDBOX_TIER" in json.dumps(r)} if analyzes else set()
            )
            assert named - shared - sandbox == {own_group}, (capability, logical_id, named - shared)
            assert not named & machines
            # (the one secret it may read, when it calls a model, is the environment's OpenAI key, shared too)
            secrets = [s for s in statements if "secretsmanager:GetSecretValue" in _actions(s)]
            assert all("openai-api-key-??????" in json.dumps(s["Resource"]) for s in secrets), logical_id
            # and only the stages of capabilities that read repositories may read the snapshot bucket
            reads_snapshots = any(k.startswith("StorageSnapshots") for k in named)
            assert not reads_snapshots or registry.load(capability).repository != "none", logical_id


def test_only_llm_stages_and_stages_that_remember_may_read_the_openai_key(assembly: Assembly):
    # (a stage that remembers has what it writes embedded for search by the model's embeddings)
    policies = assembly.resources("dev", "AWS::IAM::Policy")
    assert _stages_by_capability(assembly, "dev"), "no stage function"
    for function in assembly.resources("dev", "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        if not variables.get("MISSIONS_CAPABILITY"):
            continue
        capability = registry.load(variables["MISSIONS_CAPABILITY"])
        stage = function["Properties"]["Description"].split(": ")[1].removesuffix(" stage")
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        reads_key = any(
            "secretsmanager:GetSecretValue" in json.dumps(s["Action"])
            for p in policies.values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        )
        agent = capability.pipeline.agent(stage)
        assert reads_key == (agent.has_llm or agent.remembers), (capability.name, stage)


def test_no_secret_is_put_in_an_environment_variable(assembly: Assembly):
    assert all(assembly.resources(env, "AWS::Lambda::Function") for env in ENVIRONMENTS), "no function to check"
    for env in ENVIRONMENTS:
        for function in assembly.resources(env, "AWS::Lambda::Function").values():
            variables = function["Properties"]["Environment"]["Variables"]
            assert "OPENAI_API_KEY" not in variables and "MISSIONS_OPENAI_API_KEY" not in variables
            assert variables["MISSIONS_OPENAI_SECRET"] == f"missions-{env}/openai-api-key"  # a name, not a value


# --------------------------------------------------------------------------- triggers


def test_rules_and_schedules_come_from_the_capabilities_triggers_with_dead_letter_queues(assembly: Assembly):
    capabilities = [registry.load(name) for name in registry.installed()]
    every_rule = [r["Properties"] for r in assembly.resources("dev", "AWS::Events::Rule").values()]
    rules = {props["Name"]: props for props in every_rule if "Name" in props}
    for spec in webhook_rules(capabilities, "missions-dev") + memory_rules(capabilities, "missions-dev"):
        assert spec.name in rules, spec.name
        assert rules[spec.name]["EventPattern"] == spec.event_pattern
    schedules = {
        s["Properties"]["Name"]: s["Properties"] for s in assembly.resources("dev", "AWS::Scheduler::Schedule").values()
    }
    for spec in schedule_specs(capabilities, "missions-dev"):
        schedule = schedules[spec.name]
        assert schedule["ScheduleExpression"] == spec.expression and spec.expression.startswith("cron(")
        assert schedule["ScheduleExpressionTimezone"] == spec.timezone
        assert json.loads(schedule["Target"]["Input"]) == spec.input
        assert "DeadLetterConfig" in schedule["Target"]
    for props in every_rule:
        for target in props["Targets"]:
            assert "DeadLetterConfig" in target and target["RetryPolicy"]["MaximumRetryAttempts"] >= 1
    (ended,) = [p for p in every_rule if p.get("EventPattern", {}).get("source") == ["aws.states"]]
    assert ended["EventPattern"]["detail"]["status"] == ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]


def test_users_schedules_have_their_group_a_role_that_only_invokes_the_schedule_function_and_exact_api_grants(
    assembly: Assembly,
):
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    by_service = {_function_service(f): (k, f) for k, f in functions.items()}
    schedule_id, _ = by_service["missions-schedule"]
    # The users' group
    (group,) = assembly.resources("dev", "AWS::Scheduler::ScheduleGroup").values()
    assert group["Properties"]["Name"] == "missions-dev-user-schedules"
    # The scheduler's role: assumed by this account's Scheduler for that group only; it invokes the schedule
    # function (no version wildcard) and sends to its dead-letter queue, nothing else
    roles = assembly.resources("dev", "AWS::IAM::Role")
    (role_id,) = [
        k
        for k, r in roles.items()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
        == "scheduler.amazonaws.com"
        and "UserSchedules" in k
    ]
    trust = roles[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Condition"]
    assert "aws:SourceAccount" in trust["StringEquals"] and "aws:SourceArn" in trust["ArnLike"]
    statements = [
        st
        for policy in assembly.resources("dev", "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert sorted(st["Action"] for st in statements) == ["lambda:InvokeFunction", "sqs:SendMessage"]
    (invoke,) = [st for st in statements if st["Action"] == "lambda:InvokeFunction"]
    assert invoke["Resource"] == {"Fn::GetAtt": [schedule_id, "Arn"]}
    # The API: create, update and delete schedules of that group only; pass that role only to the Scheduler
    _, api = by_service["missions-api"]
    api_statements = _statements_of(assembly, "dev", api)
    (manage,) = [st for st in api_statements if "scheduler:CreateSchedule" in st["Action"]]
    assert manage["Action"] == ["scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"]
    assert json.dumps(manage["Resource"]).endswith(':schedule/missions-dev-user-schedules/*"]]}')
    (passing,) = [st for st in api_statements if st["Action"] == "iam:PassRole"]
    assert passing["Resource"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}
    assert not any(
        "scheduler:" in json.dumps(st["Action"]) for st in _statements_of(assembly, "dev", functions[schedule_id])
    )
    # And the API knows them all by its settings
    variables = api["Properties"]["Environment"]["Variables"]
    assert variables["MISSIONS_SCHEDULE_GROUP"] == "missions-dev-user-schedules"
    for name in ("SCHEDULER_ROLE_ARN", "SCHEDULE_TARGET_ARN", "SCHEDULE_DEAD_LETTER_ARN", "SCHEDULES_TABLE"):
        assert f"MISSIONS_{name}" in variables, name


def test_asynchronous_functions_and_the_stream_have_dead_letter_queues(assembly: Assembly):
    functions = assembly.resources("dev", "AWS::Lambda::Function")
    for function in functions.values():
        if _function_service(function) in ASYNCHRONOUS:
            assert "DeadLetterConfig" in function["Properties"], _function_service(function)
    (mapping,) = assembly.resources("dev", "AWS::Lambda::EventSourceMapping").values()
    props = mapping["Properties"]
    assert props["DestinationConfig"]["OnFailure"]["Destination"]
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"] and props["BisectBatchOnFunctionError"]
    assert "StorageMemory" in json.dumps(props["EventSourceArn"])


# --------------------------------------------------------------------------- API


def test_the_api_serves_every_handler_route_behind_jwt_and_webhooks_and_health_without(assembly: Assembly):
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in assembly.resources("dev", "AWS::ApiGatewayV2::Route").values()
    }
    assert set(routes) == {f"{m} {p}" for m, p in api_routes()} | {f"POST {WEBHOOK_ROUTE}"}
    public = {f"{m} {p}" for m, p in api_routes(public=True)}
    assert public == {"GET /health", "GET /ready", "GET /openapi.json"}  # uptime checks hold no token
    for key, props in routes.items():
        expected = "NONE" if key == f"POST {WEBHOOK_ROUTE}" or key in public else "JWT"
        assert props.get("AuthorizationType", "NONE") == expected, key
    (authorizer,) = assembly.resources("dev", "AWS::ApiGatewayV2::Authorizer").values()
    assert authorizer["Properties"]["AuthorizerType"] == "JWT"
    assert "cognito-idp" in json.dumps(authorizer["Properties"]["JwtConfiguration"])  # the pool made here
    (stage,) = assembly.resources("dev", "AWS::ApiGatewayV2::Stage").values()
    assert stage["Properties"]["DefaultRouteSettings"]["ThrottlingRateLimit"] == 10
    assert "DestinationArn" in stage["Properties"]["AccessLogSettings"]
    (pool,) = assembly.resources("dev", "AWS::Cognito::UserPool").values()
    assert pool["Properties"]["MfaConfiguration"] == "ON"


OPS_EMAIL = "oncall@team.test"
BEDROCK_PROFILE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
OPS_CALLBACKS = ["https://console.team.test/callback", "http://localhost:8787/callback"]


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """Environments configured otherwise than cdk.json's, synthesized once for every test below that reads them."""
    context = {
        "environments": {
            "iamonly": {"auth": {"type": "iam"}, "alarms": False, "llm": {"provider": "scripted"}},
            "sso": {
                "auth": {"issuer": "https://login.example.com", "audience": ["missions"]},
                "alarms": False,
                "capabilities": ["home_assistant", "shopping"],
                "connections": {
                    "home_assistant": {
                        "environment": {"HA_URL": "https://ha.home.example"},
                        "secrets": {"HA_TOKEN_SECRET": "missions-sso/home-assistant-token"},
                    }
                },
                "account": "111122223333",  # a concrete environment renders ARNs (and nag findings) with values
                "region": "eu-west-1",
            },
            "bedrock": {
                "alarms": False,
                "capabilities": ["shopping"],
                "llm": {"provider": "bedrock", "fallback_model": BEDROCK_PROFILE},
                "account": "111122223333",
                "region": "us-east-1",
            },
            "claude": {"alarms": False, "capabilities": ["shopping"], "llm": {"provider": "anthropic"}},
            "ops": {
                "alarms": True,
                "alarm_email": OPS_EMAIL,
                "auth": {"domain_prefix": "team-missions", "callback_urls": OPS_CALLBACKS},
                "capabilities": ["shopping"],
            },
        }
    }
    return synthesize(tmp_path_factory.mktemp("variants"), context=context)


def test_iam_auth_and_an_external_issuer_are_configurable(variants: Assembly):
    synthesized = variants
    iam_routes = [r["Properties"] for r in synthesized.resources("iamonly", "AWS::ApiGatewayV2::Route").values()]
    public = {f"POST {WEBHOOK_ROUTE}", *(f"{m} {p}" for m, p in api_routes(public=True))}
    assert {r["AuthorizationType"] for r in iam_routes if r["RouteKey"] not in public} == {"AWS_IAM"}
    assert not synthesized.resources("iamonly", "AWS::Cognito::UserPool")
    (authorizer,) = synthesized.resources("sso", "AWS::ApiGatewayV2::Authorizer").values()
    assert authorizer["Properties"]["JwtConfiguration"] == {
        "Issuer": "https://login.example.com",
        "Audience": ["missions"],
    }
    assert not synthesized.resources("sso", "AWS::Cognito::UserPool")


def _one(assembly: Assembly, env: str, type_: str, prefix: str = "") -> tuple[str, dict]:
    (found,) = [(k, r) for k, r in assembly.resources(env, type_).items() if k.startswith(prefix)]
    return found


def _output(assembly: Assembly, env: str, name: str) -> dict:
    (value,) = [o["Value"] for key, o in assembly.templates[env]["Outputs"].items() if key.startswith(f"Api{name}")]
    return value


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_user_pool_has_hosted_sign_in_for_people_and_client_credentials_for_machines(assembly: Assembly, env):
    # Given the pool made for an environment of cdk.json (no auth.issuer)
    pool_id, _ = _one(assembly, env, "AWS::Cognito::UserPool")
    # Then it has a domain named after the stack and the account (prefixes are unique per region)
    _, domain = _one(assembly, env, "AWS::Cognito::UserPoolDomain")
    assert domain["Properties"]["Domain"] == {"Fn::Join": ["", [f"missions-{env}-", {"Ref": "AWS::AccountId"}]]}
    assert domain["Properties"]["UserPoolId"] == {"Ref": pool_id}
    # and a resource server whose scope is missions/api
    server_id, server = _one(assembly, env, "AWS::Cognito::UserPoolResourceServer")
    assert server["Properties"]["Identifier"] == "missions"
    assert server["Properties"]["Scopes"] == [{"ScopeName": "api", "ScopeDescription": "use the missions API"}]
    api_scope = {"Fn::Join": ["", [{"Ref": server_id}, "/api"]]}
    # and a public client for people: authorization code (with PKCE: no secret) to the local callback
    user_id, user = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersClient")
    props = user["Properties"]
    assert props["AllowedOAuthFlows"] == ["code"] and props["AllowedOAuthFlowsUserPoolClient"] is True
    assert props["GenerateSecret"] is False
    assert props["CallbackURLs"] == ["http://localhost:8787/callback", SITE_PAGE]  # and the dashboard
    assert props["AllowedOAuthScopes"] == ["openid", "email", "profile", api_scope]
    assert props["SupportedIdentityProviders"] == ["COGNITO"]
    # and a confidential client for machines: client credentials for the API scope only, no user sign-in
    machine_id, machine = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersMachine")
    props = machine["Properties"]
    assert props["AllowedOAuthFlows"] == ["client_credentials"] and props["GenerateSecret"] is True
    assert props["AllowedOAuthScopes"] == [api_scope]
    assert props["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]
    # and the API's JWT authorizer accepts tokens of both clients from this pool
    _, authorizer = _one(assembly, env, "AWS::ApiGatewayV2::Authorizer")
    jwt = authorizer["Properties"]["JwtConfiguration"]
    assert jwt["Audience"] == [{"Ref": user_id}, {"Ref": machine_id}]
    assert {"Ref": pool_id} in jwt["Issuer"]["Fn::Join"][1]
    # and nothing of CDK's placeholder redirect is left anywhere
    assert "example.com" not in json.dumps(assembly.templates[env])


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_stack_outputs_what_a_client_needs_to_sign_in_and_call_the_api(assembly: Assembly, env):
    # Given the outputs of a stack with its own user pool
    pool_id, _ = _one(assembly, env, "AWS::Cognito::UserPool")
    domain_id, _ = _one(assembly, env, "AWS::Cognito::UserPoolDomain")
    user_id, _ = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersClient")
    machine_id, _ = _one(assembly, env, "AWS::Cognito::UserPoolClient", "ApiUsersMachine")
    # Then the API URL, the pool, both clients, the hosted UI, its token endpoint and sign-in page are there
    assert _output(assembly, env, "Url")["Fn::Join"][1][0] == "https://"
    assert _output(assembly, env, "UserPoolId") == {"Ref": pool_id}
    assert _output(assembly, env, "UserClientId") == {"Ref": user_id}
    assert _output(assembly, env, "MachineClientId") == {"Ref": machine_id}
    assert _output(assembly, env, "ApiScope") == "missions/api"
    hosted = _output(assembly, env, "HostedUiDomain")["Fn::Join"][1]
    assert hosted == ["https://", {"Ref": domain_id}, ".auth.", {"Ref": "AWS::Region"}, ".amazoncognito.com"]
    assert _output(assembly, env, "TokenUrl")["Fn::Join"][1] == [*hosted[:-1], ".amazoncognito.com/oauth2/token"]
    sign_in = _output(assembly, env, "SignInUrl")["Fn::Join"][1]
    assert {"Ref": user_id} in sign_in
    assert sign_in[-1] == "&response_type=code&redirect_uri=http%3A%2F%2Flocalhost%3A8787%2Fcallback"


def test_the_sign_in_domain_and_callbacks_come_from_the_environment(variants: Assembly):
    # Given an environment that names its domain prefix and callback URLs
    _, domain = _one(variants, "ops", "AWS::Cognito::UserPoolDomain")
    _, user = _one(variants, "ops", "AWS::Cognito::UserPoolClient", "ApiUsersClient")
    # Then the pool's domain and the people's client use them
    assert domain["Properties"]["Domain"] == "team-missions"
    assert user["Properties"]["CallbackURLs"] == [*OPS_CALLBACKS, SITE_PAGE]


# --------------------------------------------------------------------------- the stream function


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
    # and it neither stops executions, fails tasks, publishes on the bus nor touches repositories' snapshots
    assert not actions & {"states:StopExecution", "states:SendTaskFailure", "events:PutEvents", "s3:DeleteObject"}
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

    # Then it records the pause on the mission (an update, no put or delete) and appends `mission.paused`
    assert granted("missions") == {"dynamodb:GetItem", "dynamodb:UpdateItem"}
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


# --------------------------------------------------------------------------- environments


@pytest.mark.parametrize(
    ("env", "days", "policy", "alarmed"),
    [("dev", 7, "Delete", False), ("staging", 30, "Retain", True), ("prod", 365, "Retain", True)],
)
def test_environments_differ_in_retention_removal_and_alarms(assembly: Assembly, env, days, policy, alarmed):
    groups = assembly.resources(env, "AWS::Logs::LogGroup")
    assert {g["Properties"]["RetentionInDays"] for g in groups.values()} == {days}
    for table in assembly.resources(env, "AWS::DynamoDB::Table").values():
        assert table["DeletionPolicy"] == policy and table["UpdateReplacePolicy"] == policy
    alarms = assembly.resources(env, "AWS::CloudWatch::Alarm")
    assert bool(alarms) == alarmed
    assert assembly.resources(env, "AWS::CloudWatch::Dashboard")


def test_alarms_cover_executions_functions_queues_and_overdue_questions(assembly: Assembly):
    alarms = [a["Properties"] for a in assembly.resources("prod", "AWS::CloudWatch::Alarm").values()]
    metrics = {(a.get("Namespace"), a.get("MetricName")) for a in alarms}
    assert {
        ("AWS/States", "ExecutionsFailed"),
        ("AWS/States", "ExecutionsTimedOut"),
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("Missions", "InterruptsOverdue"),
        ("Missions", "SafetyViolations"),  # the nightly trace scorers found a tool used without approval
    } <= metrics
    functions = assembly.resources("prod", "AWS::Lambda::Function")
    (safety,) = [a for a in alarms if a.get("MetricName") == "SafetyViolations"]
    (evaluate,) = [f for f in functions.values() if _function_service(f) == "missions-evaluate"]
    assert safety["Dimensions"] == [{"Name": "service", "Value": "missions-evaluate"}]  # what that function emits
    assert safety["Threshold"] == 1 and evaluate["Properties"]["Timeout"] == 300
    errors = [a for a in alarms if a.get("MetricName") == "Errors"]
    assert len(errors) == len(functions)  # every function, stages included
    assert all(a["AlarmActions"] for a in alarms)  # each notifies the alarm topic


def _warnings(assembly: Assembly, env: str) -> list[str]:
    """The synth warnings of a stack, as the CDK CLI prints them."""
    manifest = json.loads((assembly.directory / "manifest.json").read_text())
    artifact = manifest["artifacts"][f"missions-{env}"]
    metadata = artifact.get("metadata") or json.loads(
        (assembly.directory / artifact["additionalMetadataFile"]).read_text()
    )
    return [entry["data"] for entries in metadata.values() for entry in entries if entry["type"] == "aws:cdk:warning"]


@pytest.mark.parametrize("env", ["staging", "prod"])
def test_every_alarm_notifies_the_alarm_topic_whose_arn_is_an_output(assembly: Assembly, env):
    # Given an environment with alarms
    topic_id, _ = _one(assembly, env, "AWS::SNS::Topic", "Alarms")
    alarms = assembly.resources(env, "AWS::CloudWatch::Alarm")
    assert alarms
    # Then every alarm's action is that topic, and operators find the topic in the stack's outputs
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}], logical_id
    (output,) = [o for k, o in assembly.templates[env]["Outputs"].items() if k.startswith("AlarmsAlarmTopicArn")]
    assert output["Value"] == {"Ref": topic_id}


@pytest.mark.parametrize("env", ["staging", "prod"])
def test_alarms_without_an_email_warn_at_synth_that_nobody_is_notified(assembly: Assembly, env):
    # Given cdk.json's environment with alarms on and no alarm_email
    # Then its topic has no subscription, and the synth says so (the CDK CLI prints it; --strict fails on it)
    assert not assembly.resources(env, "AWS::SNS::Subscription")
    (warning,) = [w for w in _warnings(assembly, env) if NO_SUBSCRIBER in w]
    assert f"environments.{env}.alarm_email is not set" in warning and "AlarmTopicArn" in warning
    # while an environment without alarms has neither alarm topic nor warning (only the users' notices topic)
    assert [k for k in assembly.resources("dev", "AWS::SNS::Topic") if "Alarms" in k] == []
    assert not [w for w in _warnings(assembly, "dev") if NO_SUBSCRIBER in w]


def test_an_alarm_email_is_subscribed_to_the_alarm_topic(variants: Assembly):
    # Given an environment with alarms and an alarm_email
    topic_id, _ = _one(variants, "ops", "AWS::SNS::Topic", "Alarms")
    # Then the address is subscribed to the topic every alarm notifies, and nothing warns
    (subscription,) = variants.resources("ops", "AWS::SNS::Subscription").values()
    assert subscription["Properties"] == {"Protocol": "email", "Endpoint": OPS_EMAIL, "TopicArn": {"Ref": topic_id}}
    alarms = variants.resources("ops", "AWS::CloudWatch::Alarm").values()
    assert alarms and all(a["Properties"]["AlarmActions"] == [{"Ref": topic_id}] for a in alarms)
    assert not [w for w in _warnings(variants, "ops") if NO_SUBSCRIBER in w]


@pytest.mark.parametrize("env", ["staging", "prod"])
def test_every_dead_letter_queue_is_alarmed_on_as_its_nag_acknowledgement_says(assembly: Assembly, env):
    # Given every queue of the stack (each one is a dead-letter queue: AwsSolutions-SQS3 is acknowledged so)
    queues = assembly.resources(env, "AWS::SQS::Queue")
    alarmed = {
        dimension["Value"]["Fn::GetAtt"][0]
        for alarm in assembly.resources(env, "AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"
        for dimension in alarm["Properties"]["Dimensions"]
        if dimension["Name"] == "QueueName"
    }
    # Then a message in any of them raises an alarm
    assert queues and set(queues) == alarmed


def test_a_capability_reaches_its_users_service_by_settings_and_a_secret_it_alone_may_read(variants: Assembly):
    # Given home_assistant connected to an HA by URL, its token in a named secret (cdk.json's connections)
    stages = _stages_by_capability(variants, "sso")
    assert "home_assistant" in stages and len(stages) > 1, stages
    for capability, functions in stages.items():
        for function in functions.values():
            variables = function["Properties"]["Environment"]["Variables"]
            statements = _role_statements(variants, "sso", function["Properties"]["Role"]["Fn::GetAtt"][0])
            reads = json.dumps([s["Resource"] for s in statements if "secretsmanager:GetSecretValue" in _actions(s)])
            if capability == "home_assistant":
                # Then its stages know the URL and the secret's name, never a token
                assert variables["HA_URL"] == "https://ha.home.example"
                assert variables["HA_TOKEN_SECRET"] == "missions-sso/home-assistant-token"
                assert "HA_TOKEN" not in variables
                # and those with tools may read that secret
                stage = function["Properties"]["Description"].removesuffix(" stage").split(": ")[-1]
                has_tools = registry.load(capability).pipeline.agent(stage).has_tools
                assert ("secret:missions-sso/home-assistant-token-??????" in reads) == has_tools, stage
            else:  # and no other capability's stage knows of it or may read it
                assert "HA_URL" not in variables and "home-assistant-token" not in reads


def test_a_credential_in_a_plain_setting_is_refused():
    with pytest.raises(ConfigError, match=r"\['HA_TOKEN'\] look like credentials"):
        load_environments({"qa": {"connections": {"home_assistant": {"environment": {"HA_TOKEN": "abc"}}}}})


def test_a_bad_environment_fails_with_its_name_and_field():
    with pytest.raises(ConfigError, match=r"environments.qa: log_retention_days"):
        load_environments({"qa": {"log_retention_days": 8}})
    with pytest.raises(ConfigError, match=r"environments.qa: removal_policy"):
        load_environments({"qa": {"removal_policy": "sometimes"}})
    with pytest.raises(ConfigError, match=r"environments.qa: alarm_email"):
        load_environments({"qa": {"alarm_email": "oncall"}})
    with pytest.raises(ConfigError, match=r"environments.qa: auth.callback_urls"):
        load_environments({"qa": {"auth": {"callback_urls": ["http://console.team.test/callback"]}}})
    with pytest.raises(ConfigError, match=r"environments.qa: auth.domain_prefix"):
        load_environments({"qa": {"auth": {"domain_prefix": "my-cognito-login"}}})


def test_an_environment_without_a_price_for_its_model_fails_the_synth():
    # Given an environment routing a role to a model nobody priced / Then it is refused, with the fix
    with pytest.raises(ConfigError, match=r"environments.qa: llm.*no price for model\(s\) \['llama-3-70b'\]"):
        load_environments({"qa": {"llm": {"provider": "openai", "models": {"planner": "llama-3-70b"}}}})
    # And priced in cdk.json, it is taken
    qa = load_environments({"qa": {"llm": {"models": {"planner": "llama-3-70b"}, "prices": {"llama-3-70b": [1, 2]}}}})[
        "qa"
    ]
    assert qa.llm.prices == {"llama-3-70b": (1.0, 2.0)}


def test_every_function_gets_its_environments_llm_settings(assembly: Assembly):
    # Given prod's cdk.json: the OpenAI provider, a default, a planner and a fallback model
    from missions.core.settings import RuntimeSettings

    assert assembly.resources("prod", "AWS::Lambda::Function"), "no function in prod"
    for function in assembly.resources("prod", "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        # Then each function's environment names them as the runtime reads them
        assert variables["MISSIONS_LLM_PROVIDER"] == "openai"
        assert variables["MISSIONS_OPENAI_DEFAULT_MODEL"] == "gpt-4o-mini"
        assert variables["MISSIONS_OPENAI_FALLBACK_MODEL"] == "gpt-4.1-mini"
        assert json.loads(variables["MISSIONS_OPENAI_MODELS"]) == {"planner": "gpt-4.1"}
        names = {name[len("MISSIONS_") :].lower() for name in variables if name.startswith("MISSIONS_")}
        assert names <= set(RuntimeSettings.model_fields)


# --------------------------------------------------------------------------- checks at synth


def test_cdk_nag_fails_the_synth_on_an_unacknowledged_finding(tmp_path):
    # Given the app with one extra bucket that breaks AwsSolutions-S10 (no TLS-only policy)
    from aws_cdk import aws_s3 as s3

    from infra.app import build_app
    from layers.build import build

    app = build_app(
        environments=["dev"], layer_dir=build(tmp_path / "layer", sources_only=True), outdir=str(tmp_path / "out")
    )
    s3.Bucket(app.node.find_child("missions-dev"), "Careless")
    # When it is synthesized, Then the synth fails naming the rule
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    report = (tmp_path / "out" / "validation-report.json").read_text()
    assert "AwsSolutions-S10" in report and "Careless" in report


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_cfn_lint_passes(assembly: Assembly, env):
    paths = [str(path) for path in assembly.files[env]]  # the stack's template and each capability's
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "--", *paths], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_each_stack_fits_cloudformation_limits(assembly: Assembly, env):
    # 500 resources, 200 parameters and outputs, and 1 MB per template (deployed from S3). Each capability
    # is a nested stack of its own (its stages, state machine and their alarms), so the runtime's stack
    # does not grow with the number of capabilities, and one capability's stays far below the limits.
    stack, *capabilities = [json.loads(path.read_text()) for path in assembly.files[env]]
    assert len(capabilities) == len(_machines(assembly, env))
    for template in (stack, *capabilities):
        assert len(template["Resources"]) <= 500
        assert len(template.get("Parameters", {})) <= 200 and len(template.get("Outputs", {})) <= 200
        assert len(json.dumps(template)) < 1_000_000
    # what the runtime itself takes (about 350 in staging now: each API route is a resource; agents as data added
    # 13 routes, 2 tables and the deploy-time function, users' schedules 6 routes, a table, a schedule group and
    # the scheduler's role), leaving room to grow: past 400, move a concern (the API's routes) into a nested
    # stack of its own before CloudFormation's 500 stops a deploy
    assert len(stack["Resources"]) < 400
    assert all(len(template["Resources"]) < 150 for template in capabilities)


def test_the_cdk_runs_on_the_node_lts_the_tools_pin() -> None:
    # Given the Node tools make installs (package.json pins Node itself)
    root = Path(__file__).resolve().parents[2]
    pinned = json.loads((root / "package.json").read_text())["devDependencies"]["node"]
    # Then the node the CDK library runs on (first on PATH, as in every make target) is that LTS
    node = shutil.which("node")  # the conftest put node_modules/.bin first, as make does
    assert node is not None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == f"v{pinned}" and int(pinned.split(".")[0]) % 2 == 0  # even majors are the LTS lines


def test_email_notices_go_through_one_encrypted_topic_only_the_right_functions_touch(assembly: Assembly):
    # Given the users' notices topic: encrypted, TLS only, named to every function
    topic_id, topic = _one(assembly, "dev", "AWS::SNS::Topic", "Notices")
    assert "alias/aws/sns" in json.dumps(topic["Properties"]["KmsMasterKeyId"])
    policies = assembly.resources("dev", "AWS::SNS::TopicPolicy").values()
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if p["Properties"]["Topics"] == [{"Ref": topic_id}]
    )
    # Then the interrupt and status functions may publish to it, the api may manage subscriptions, nobody else
    grants: dict[str, set[str]] = {}
    for logical_id, policy in assembly.resources("dev", "AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if {"Ref": topic_id} in resources:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                grants.setdefault(logical_id.split("Role")[0], set()).update(actions)
    assert grants == {
        "interrupt": {"sns:Publish"},
        "Apiapi": {"sns:GetSubscriptionAttributes", "sns:Subscribe", "sns:Unsubscribe"},
        "Triggersstatus": {"sns:Publish"},
    }, grants


def test_only_the_api_and_the_deploy_write_agent_versions_and_only_stages_write_usage(assembly: Assembly):
    # Given every function's grants on the agents and usage tables (moto enforces no IAM: the template does)
    policies = assembly.resources("dev", "AWS::IAM::Policy")
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    on: dict[str, dict[str, set[str]]] = {"agents": {}, "usage": {}}
    for function in assembly.resources("dev", "AWS::Lambda::Function").values():
        service = _function_service(function).removeprefix("missions-")
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        for policy in policies.values():
            if {"Ref": role} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                for table in _tables_referenced(statement) & set(on):
                    on[table].setdefault(service, set()).update(_actions(statement))
    # Then a stage reads only the version its mission pinned, and a starting mission only queries the states
    assert on["agents"]["stage"] == {"dynamodb:GetItem"}
    # operators over the API, and the deploy-time step storing what capability.toml ships
    assert {service for service, actions in on["agents"].items() if actions & writes} == {"api", "deploy"}
    assert on["agents"]["interrupt"] == {"dynamodb:Query"}  # drains start queued missions: they pin
    # and only stages record model calls; the api reads them and erases a user's (DELETE /me), nobody scans
    assert on["usage"] == {
        "stage": {"dynamodb:PutItem", "dynamodb:UpdateItem"},
        "api": {"dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:DescribeTable"},  # + GET /ready
    }
    assert not any("dynamodb:Scan" in a for table in on.values() for a in table.values())


def test_only_the_api_erases_users_and_only_their_prefixes(assembly: Assembly):
    # Given the synthesized dev stack
    listings: dict[str, list[dict[str, Any]]] = {}
    for function in assembly.resources("dev", "AWS::Lambda::Function").values():
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        for policy in assembly.resources("dev", "AWS::IAM::Policy").values():
            if {"Ref": role} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if {"s3:ListBucketVersions", "s3:DeleteObjectVersion"} & set(actions) or (
                    "s3:ListBucket" in actions and "blobs/*" in json.dumps(statement.get("Condition"))
                ):
                    listings.setdefault(_function_service(function), []).append(statement)
    # Then only the API (DELETE /me) may list blobs and snapshot versions or delete versions
    assert set(listings) == {"missions-api"}
    for statement in listings["missions-api"]:
        if "Condition" in statement:  # listing: only under the prefixes a user's data lives in
            prefixes = statement["Condition"]["StringLike"]["s3:prefix"]
            assert set(prefixes) <= {"blobs/*", "repositories/*", "uploads/*"}, statement


def _arn(rest: str) -> dict:
    """An ARN in the partition the template resolves at deploy time."""
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, rest]]}


def _statements_of(assembly: Assembly, env: str, function: dict) -> list[dict]:
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in assembly.resources(env, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_on_bedrock_llm_stages_invoke_exactly_the_named_models_and_read_no_key(variants: Assembly):
    # Given an environment on Bedrock: the runtime's default model, an inference profile as its fallback
    template = Template.from_json(variants.templates["bedrock"])
    invoke = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
    nova = _arn(":bedrock:us-east-1::foundation-model/amazon.nova-lite-v1:0")
    models = [
        nova,
        _arn(f":bedrock:us-east-1:111122223333:inference-profile/{BEDROCK_PROFILE}"),
        _arn(":bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0"),
    ]
    # Then a role may invoke those models, and only those (no wildcard model), with and without streaming
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with([{"Action": invoke, "Effect": "Allow", "Resource": models}])
            }
        },
    )
    for function in variants.resources("bedrock", "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["MISSIONS_LLM_PROVIDER"] == "bedrock"
        assert variables["MISSIONS_BEDROCK_FALLBACK_MODEL"] == BEDROCK_PROFILE
        statements = _statements_of(variants, "bedrock", function)
        invokes = [s for s in statements if "bedrock:InvokeModel" in json.dumps(s["Action"])]
        assert all(s["Resource"] == models for s in invokes)
        # and no function reads a model key: Bedrock authorizes the role itself
        assert not any("secretsmanager:GetSecretValue" in json.dumps(s["Action"]) for s in statements) or (
            "webhooks" in json.dumps(statements)
        )
        stage = function["Properties"]["Description"].split(": ")[-1].removesuffix(" stage")
        if variables.get("MISSIONS_CAPABILITY") == "shopping":  # its LLM stages only
            agent = registry.load("shopping").pipeline.agent(stage)
            assert bool(invokes) == (agent.has_llm or agent.remembers), stage
    # and the API's readiness may read the foundation models' details in its region, nothing more
    (api,) = [
        f
        for f in variants.resources("bedrock", "AWS::Lambda::Function").values()
        if _function_service(f) == "missions-api"
    ]
    described = [s for s in _statements_of(variants, "bedrock", api) if s["Action"] == "bedrock:GetFoundationModel"]
    haiku_here = _arn(":bedrock:us-east-1::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0")
    assert [s["Resource"] for s in described] == [[nova, haiku_here]]  # the fallback profile's model, here


def test_on_anthropic_the_key_is_a_secret_only_model_callers_read(variants: Assembly):
    # Given an environment on Anthropic
    template = Template.from_json(variants.templates["claude"])
    template.has_resource_properties("AWS::SecretsManager::Secret", {"Name": "missions-claude/anthropic-api-key"})
    assert variants.resources("claude", "AWS::Lambda::Function"), "no function on claude"
    for function in variants.resources("claude", "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        # Then every function names the provider, its default model and the key's secret (never the key)
        assert variables["MISSIONS_LLM_PROVIDER"] == "anthropic"
        assert variables["MISSIONS_ANTHROPIC_DEFAULT_MODEL"] == "claude-haiku-4-5"
        assert variables["MISSIONS_ANTHROPIC_SECRET"] == "missions-claude/anthropic-api-key"
        assert not any("ANTHROPIC_API_KEY" in name for name in variables)
        # and the roles that read a model key read Anthropic's
        keys = [
            s["Resource"]
            for s in _statements_of(variants, "claude", function)
            if s["Action"] == "secretsmanager:GetSecretValue" and "webhooks" not in json.dumps(s["Resource"])
        ]
        assert all("anthropic-api-key" in json.dumps(key) for key in keys), keys
