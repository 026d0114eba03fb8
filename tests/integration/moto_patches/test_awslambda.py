"""Patches 1 and 3 (missions.local.moto.awslambda), tested against moto itself: a function's
registered handler runs in-process, through the Lambda API and Step Functions tasks alike."""

from __future__ import annotations

import json
import time
from typing import Any

from missions.local import moto as moto_patches
from tests.integration.moto_patches.conftest import Aws, eventually, payload_of


def test_boto3_invoke_calls_the_registered_handler_and_round_trips_thepayload_of(aws: Aws) -> None:
    # Given a function whose handler echoes what it got
    calls: list[tuple[dict[str, Any], Any]] = []

    def echo(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append((event, context))
        return {"got": event, "function": context.function_name}

    name, arn = aws.function(echo)
    payload = {"text": "héllo", "numbers": [1, 2.5, -3], "nested": {"none": None, "flag": True}}

    # When it is invoked through the Lambda API
    response = aws.lambda_.invoke(FunctionName=name, Payload=json.dumps(payload))

    # Then the handler ran in-process once, with the payload and a Lambda-like context
    assert "FunctionError" not in response
    assert payload_of(response) == {"got": payload, "function": name}
    [(event, context)] = calls
    assert event == payload
    assert context.function_name == name and context.aws_request_id
    assert context.get_remaining_time_in_millis() > 0


def test_a_raising_handler_is_a_function_error_named_after_the_exception(aws: Aws) -> None:
    # Given a handler that raises an exception of its own class
    class LedgerUnbalanced(Exception):
        pass

    def broken(event: dict[str, Any], context: Any) -> None:
        raise LedgerUnbalanced("off by one")

    name, _ = aws.function(broken)

    # When it is invoked
    response = aws.lambda_.invoke(FunctionName=name, Payload=b"{}")

    # Then Lambda reports a function error whose type is the exception's class name
    assert response.get("FunctionError"), response
    error = payload_of(response)
    assert error["errorType"] == "LedgerUnbalanced"
    assert error["errorMessage"] == "off by one"
    assert error["stackTrace"]


def test_an_unregistered_function_errors_with_function_not_registered(aws: Aws) -> None:
    # Given a function that exists in moto but has no in-process handler
    name, _ = aws.function(None)

    # When it is invoked
    response = aws.lambda_.invoke(FunctionName=name, Payload=b"{}")

    # Then the error says so, instead of moto trying Docker
    assert response.get("FunctionError"), response
    error = payload_of(response)
    assert error["errorType"] == "FunctionNotRegistered"
    assert name in error["errorMessage"]


def test_a_step_functions_task_with_a_function_arn_calls_the_handler(aws: Aws) -> None:
    # Given a state machine whose only Task is the function's ARN
    _, arn = aws.function(lambda event, context: {"doubled": event["n"] * 2, "seen": event})
    machine = aws.state_machine(
        {"StartAt": "Double", "States": {"Double": {"Type": "Task", "Resource": arn, "End": True}}}
    )

    # When an execution runs
    execution = aws.sfn.start_execution(stateMachineArn=machine, input=json.dumps({"n": 21}))["executionArn"]
    described = aws.finished(execution)

    # Then the handler's result is the execution's output
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"doubled": 42, "seen": {"n": 21}}


def test_wait_for_task_token_calls_the_handler_and_resumes_on_send_task_success(aws: Aws) -> None:
    # Given a waitForTaskToken Task whose handler keeps the token
    received: list[dict[str, Any]] = []
    _, arn = aws.function(lambda event, context: received.append(event) or {"stored": True})
    machine = aws.state_machine(
        {
            "StartAt": "Wait",
            "States": {
                "Wait": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                    "Parameters": {
                        "FunctionName": arn,
                        "Payload": {"token.$": "$$.Task.Token", "question.$": "$.question"},
                    },
                    "TimeoutSeconds": 60,
                    "End": True,
                }
            },
        }
    )

    # When an execution starts, the handler gets the token and the execution waits
    execution = aws.sfn.start_execution(stateMachineArn=machine, input=json.dumps({"question": "which?"}))[
        "executionArn"
    ]
    [event] = eventually(lambda: received, what="the waitForTaskToken handler call")
    assert event["question"] == "which?" and event["token"]
    time.sleep(0.1)
    assert aws.sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"

    # And the token is answered
    aws.sfn.send_task_success(taskToken=event["token"], output=json.dumps({"answer": "the blue one"}))

    # Then the execution resumes and ends with the answer
    described = aws.finished(execution)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"answer": "the blue one"}


def test_a_deferred_handler_is_built_once_at_the_first_invocation_outside_its_observed_time(aws: Aws) -> None:
    # Given a function whose handler is built when first invoked, and an observer of invocations
    built: list[str | None] = []

    def build() -> moto_patches.Handler:
        built.append(moto_patches.invoking())  # which invocation's time this is counted in
        return lambda event, context: {"echo": event["n"]}

    name, _ = aws.function(moto_patches.Deferred(build))
    observed: list[str] = []
    stop = moto_patches.observe(lambda function, duration_ms, memory_mb: observed.append(function))
    try:
        # When nothing invoked it yet, nothing was built
        assert built == []

        # When it is invoked twice
        answers = [payload_of(aws.lambda_.invoke(FunctionName=name, Payload=json.dumps({"n": n}))) for n in (1, 2)]
    finally:
        stop()

    # Then it answered both, was built once, before the first invocation's observed time began
    assert answers == [{"echo": 1}, {"echo": 2}]
    assert built == [None] and observed == [name, name]
