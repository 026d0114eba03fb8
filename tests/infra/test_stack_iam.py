"""The synthesized stacks' least privilege: what each role may do, and nothing more.

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.components.access import ACCESS
from missions.core.capability import registry as registry
from missions.core.specs import TABLES, state_machine_name
from tests.infra.conftest import BEDROCK_PROFILE, Assembly, deploy_time
from tests.support.stack import (
    ENVIRONMENTS,
    SUITE_PYTHON,
    _actions,
    _function_service,
    _one,
    _resources,
    _role_statements,
    _stages_by_capability,
    _statements_of,
    _tables_referenced,
)

NO_RESOURCE = {"dynamodb:ListStreams"}  # lists stream ARNs of the account; IAM offers no narrower resource

# Lambda attaching the sandbox functions to their VPC (infra/components/sandbox.py)
NO_RESOURCE |= {"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"}


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


def test_only_the_api_and_the_deploy_write_agent_versions_and_only_who_ends_a_mission_writes_usage(
    assembly: Assembly,
):
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
    # and only stages record model calls and their users' daily spend (and read their mission's back: the final
    # stage counts what a failed stage spent; a budget seen reached is read afresh); whoever ends a mission adds
    # its calls to the totals (the final stage, a cancel over the api, the status function); the api reads them,
    # sets users' daily budgets (operators) and erases a user's (DELETE /me); every other function that starts
    # missions reads the user's budget and today's spend, never more; nobody scans
    starts = {"dynamodb:GetItem"}
    assert on["usage"] == {
        "stage": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"},
        "api": {
            *("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
            *("dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:DescribeTable"),  # + GET /ready
        },
        "status": {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"},
        **{service: starts for service in ("interrupt", "stream", "trigger", "schedule", "reconcile")},
    }
    assert not any("dynamodb:Scan" in a for table in on.values() for a in table.values())


def test_whoever_shows_or_ends_a_running_mission_may_read_its_newest_checkpoint(assembly: Assembly):
    # Given every function's grants on the checkpoints table
    policies = assembly.resources("dev", "AWS::IAM::Policy")
    queries: set[str] = set()
    for function in assembly.resources("dev", "AWS::Lambda::Function").values():
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        for policy in policies.values():
            if {"Ref": role} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if "checkpoints" in _tables_referenced(statement) and "dynamodb:Query" in _actions(statement):
                    queries.add(_function_service(function).removeprefix("missions-"))
    # Then the stages (a retry, a join), the API (a running mission's status, a cancel), the interrupt function
    # (a wait, a pause) and the status function (an end from outside) query it: a running mission's progress
    # is there (missions.service.progress); besides them only retention (deleting a mission's) and the
    # stream function (a mission's history) do
    assert queries == {"stage", "api", "interrupt", "status", "retention", "stream"}, queries


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


def _starts(resource: object, capability: str) -> bool:
    """Whether a statement's resource is the capability's mission machine: a reference to its stack's machine,
    or its ARN built from its name (the interrupt function's: it was made before the machines)."""
    text = json.dumps(resource)
    named = f':stateMachine:{state_machine_name("missions-dev", capability)}"'
    return named in text or f"Capability{capability}".replace("_", "") in text


def test_every_function_that_starts_missions_may_start_every_deployed_capabilitys_machine(assembly: Assembly):
    # Given dev, which deploys every installed capability
    capabilities = set(registry.available())
    checked = set()
    for function in assembly.resources("dev", "AWS::Lambda::Function").values():
        service = _function_service(function)
        if not ACCESS[service.removeprefix("missions-")].start_missions:
            continue
        # Then each function whose access starts missions (the interrupt function's sub-missions too) may
        # start the machine of every capability: a start it may not make would fail in AWS, not in moto
        statements = _role_statements(assembly, "dev", function["Properties"]["Role"]["Fn::GetAtt"][0])
        starting = [r for s in statements if "states:StartExecution" in _actions(s) for r in _resources(s)]
        assert {c for c in capabilities if any(_starts(r, c) for r in starting)} == capabilities, (service, starting)
        checked.add(service)
    assert {"missions-api", "missions-interrupt", "missions-status"} <= checked
