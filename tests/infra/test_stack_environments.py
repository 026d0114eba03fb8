"""The synthesized stacks per environment: retention, alarms, connections and LLM settings.

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import json

import pytest

from infra.components.monitoring import NO_SUBSCRIBER
from infra.config import ConfigError, load_environments
from missions.core.capability import registry as registry
from tests.infra.conftest import OPS_EMAIL, Assembly
from tests.support.stack import _actions, _function_service, _one, _role_statements, _stages_by_capability


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


def test_every_function_starts_under_the_libraries_switches_the_bench_measures(assembly: Assembly):
    # Given the libraries' switches the bench's cold imports run under
    from importlib.metadata import entry_points

    from missions.core.settings import LIBRARY_ENVIRONMENT

    # (skipping the plugin scan loses nothing: nothing installed here, the layer's packages among it, has one)
    assert LIBRARY_ENVIRONMENT["PYDANTIC_DISABLE_PLUGINS"] == "__all__" and not entry_points(group="pydantic")
    for env in ("dev", "prod"):
        for function in assembly.resources(env, "AWS::Lambda::Function").values():
            variables = function["Properties"]["Environment"]["Variables"]
            # Then every function has them, as set there
            assert {name: variables.get(name) for name in LIBRARY_ENVIRONMENT} == LIBRARY_ENVIRONMENT


@pytest.mark.parametrize(("env", "usd"), [("dev", 1.0), ("staging", 5.0), ("prod", 20.0)])
def test_each_environments_daily_budget_reaches_every_function_as_the_runtime_reads_it(assembly: Assembly, env, usd):
    # Given cdk.json's default daily budget per user for the environment
    functions = [
        f["Properties"]["Environment"]["Variables"] for f in assembly.resources(env, "AWS::Lambda::Function").values()
    ]
    readers = [variables for variables in functions if "MISSIONS_MISSIONS_TABLE" in variables]
    assert readers, f"no function of {env} reads the runtime's settings"
    # Then every function that reads settings gets it, named as the runtime's settings model reads it
    assert {float(variables["MISSIONS_DAILY_BUDGET_USD"]) for variables in readers} == {usd}


def test_an_environments_generation_bounds_reach_its_functions_as_the_runtime_reads_them():
    # Given an environment that lowers the output ceiling and the throughput floor in cdk.json
    from missions.core.settings import RuntimeSettings, environment_of

    llm = {"provider": "scripted", "max_output_tokens": 1024, "tokens_per_second": 4, "first_token_seconds": 20}
    qa = load_environments({"qa": {"llm": llm}})["qa"]
    # When its functions' environment is made from it / Then the runtime reads the same bounds back
    settings = RuntimeSettings.from_env(
        {**environment_of(**qa.llm.settings()), **environment_of(missions_table="mmm", checkpoints_table="ccc",
                                                                   events_table="eee", interrupts_table="iii",
                                                                   blob_bucket="bbb")}
    )  # fmt: skip
    assert (settings.llm_max_output_tokens, settings.llm_tokens_per_second, settings.llm_first_token_seconds) == (
        1024,
        4.0,
        20.0,
    )
