"""Patch 2 (missions.local.moto.events), tested against moto itself: rules deliver to Lambda and
Step Functions targets, and leave the others to moto."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.integration.moto_patches.conftest import Aws, eventually


def test_an_eventbridge_rule_with_a_lambda_target_delivers_to_the_handler(aws: Aws) -> None:
    # Given a rule matching one source with a Lambda target
    delivered: list[dict[str, Any]] = []
    _, arn = aws.function(lambda event, context: delivered.append(event))
    aws.events.put_rule(Name="to-lambda", EventPattern=json.dumps({"source": ["tests.app"]}))
    aws.events.put_targets(Rule="to-lambda", Targets=[{"Id": "fn", "Arn": arn}])

    # When a matching and a non-matching event are put
    result = aws.events.put_events(
        Entries=[
            {"Source": "tests.app", "DetailType": "mission.finished", "Detail": json.dumps({"mission": "m_1"})},
            {"Source": "tests.other", "DetailType": "mission.finished", "Detail": json.dumps({"mission": "m_2"})},
        ]
    )

    # Then only the matching event reached the handler, as an EventBridge event
    assert result["FailedEntryCount"] == 0
    [event] = eventually(lambda: delivered, what="delivery to the Lambda target")
    assert event["source"] == "tests.app"
    assert event["detail-type"] == "mission.finished"
    assert event["detail"] == {"mission": "m_1"}


def test_an_eventbridge_rule_with_a_step_functions_target_starts_an_execution(aws: Aws) -> None:
    # Given a state machine and a rule targeting it
    _, arn = aws.function(lambda event, context: {"source": event["source"], "detail": event["detail"]})
    machine = aws.state_machine({"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": arn, "End": True}}})
    aws.events.put_rule(Name="to-sfn", EventPattern=json.dumps({"source": ["tests.sfn"]}))
    aws.events.put_targets(Rule="to-sfn", Targets=[{"Id": "sm", "Arn": machine, "RoleArn": aws.role}])

    # When a matching event is put
    aws.events.put_events(Entries=[{"Source": "tests.sfn", "DetailType": "go", "Detail": json.dumps({"n": 1})}])

    # Then one execution started, with the event as its input
    [execution] = eventually(
        lambda: aws.sfn.list_executions(stateMachineArn=machine)["executions"],
        what="an execution started by EventBridge",
    )
    described = aws.finished(execution["executionArn"])
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"source": "tests.sfn", "detail": {"n": 1}}


def test_a_schedule_only_rule_is_skipped_without_error(aws: Aws) -> None:
    # Given a schedule-only rule (no event pattern, so moto would match every event) with a Lambda target
    ticks: list[dict[str, Any]] = []
    _, arn = aws.function(lambda event, context: ticks.append(event))
    aws.events.put_rule(Name="every-five-minutes", ScheduleExpression="rate(5 minutes)")
    aws.events.put_targets(Rule="every-five-minutes", Targets=[{"Id": "tick", "Arn": arn}])

    # When any event is put
    result = aws.events.put_events(Entries=[{"Source": "tests.app", "DetailType": "x", "Detail": "{}"}])

    # Then nothing fails and the schedule's target was not called
    assert result["FailedEntryCount"] == 0
    time.sleep(0.1)
    assert ticks == []


def test_targets_the_patch_does_not_handle_are_left_to_moto(aws: Aws) -> None:
    # Given a rule with a Lambda target and an SQS target
    delivered: list[dict[str, Any]] = []
    _, arn = aws.function(lambda event, context: delivered.append(event))
    queue_url = aws.sqs.create_queue(QueueName="mission-events")["QueueUrl"]
    queue_arn = aws.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws.events.put_rule(Name="mixed", EventPattern=json.dumps({"source": ["tests.mixed"]}))
    aws.events.put_targets(Rule="mixed", Targets=[{"Id": "fn", "Arn": arn}, {"Id": "q", "Arn": queue_arn}])

    # When a matching event is put
    aws.events.put_events(Entries=[{"Source": "tests.mixed", "DetailType": "x", "Detail": json.dumps({"k": 1})}])

    # Then the handler got it and moto still delivered to SQS
    assert len(delivered) == 1
    messages = aws.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["detail"] for m in messages] == [{"k": 1}]
