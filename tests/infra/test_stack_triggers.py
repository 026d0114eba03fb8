"""The synthesized stacks' triggers: rules, schedules and their dead letter queues.

The synth itself runs cdk-nag's AwsSolutions pack and fails on any unacknowledged finding, so
every test here also stands on a nag-clean template.
"""

from __future__ import annotations

import json

from missions.core.capability import registry as registry
from missions.core.triggers.specs import memory_rules, schedule_specs, webhook_rules
from tests.infra.conftest import Assembly
from tests.support.stack import _function_service, _statements_of

ASYNCHRONOUS = {
    "missions-trigger",
    "missions-schedule",
    "missions-status",
    "missions-sla",
    "missions-retention",
    "missions-repository-import",
}


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
    # and the trigger and schedule functions the same, for flow control's debounce timers (which invoke the
    # schedule function: its settings name it by an ARN built from its name)
    for timers in (by_service["missions-trigger"][1], functions[schedule_id]):
        statements = _statements_of(assembly, "dev", timers)
        assert any(st["Action"] == manage["Action"] and st["Resource"] == manage["Resource"] for st in statements)
        assert any(st["Action"] == "iam:PassRole" and st["Resource"] == passing["Resource"] for st in statements)
    target = functions[schedule_id]["Properties"]["Environment"]["Variables"]["MISSIONS_SCHEDULE_TARGET_ARN"]
    assert json.dumps(target).endswith(':function:missions-dev-schedule"]]}'), target
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
