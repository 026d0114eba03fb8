"""The moto patches of shared/missions/local/patches.py, tested against moto itself.

moto is pinned exactly because the local emulation replaces two of its internals
(`LambdaFunction._invoke_lambda` and `Rule.send_to_targets`). If a moto upgrade renames,
re-signs or bypasses either, these tests fail loudly instead of the emulation silently
running nothing.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from missions.local import patches

REGION = "us-east-1"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


def _code_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "handler.py", "def lambda_handler(event, context):\n    raise RuntimeError('in-process only')\n"
        )
    return buffer.getvalue()


def _eventually(check: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} not reached within {timeout}s")


@dataclass
class Aws:
    """moto clients plus helpers to create functions whose handlers run in-process."""

    lambda_: Any
    sfn: Any
    events: Any
    sqs: Any
    role: str
    registered: list[str] = field(default_factory=list)

    def function(self, handler: Callable[[dict[str, Any], Any], Any] | None) -> tuple[str, str]:
        """Create a Lambda function (registering `handler` unless None); return (name, arn)."""
        name = f"fn-{uuid.uuid4().hex[:10]}"
        arn = self.lambda_.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=self.role,
            Handler="handler.lambda_handler",
            Code={"ZipFile": _code_zip()},
        )["FunctionArn"]
        if handler is not None:
            patches.register(name, handler)
            self.registered.append(name)
        return name, arn

    def state_machine(self, definition: dict[str, Any], kind: str = "STANDARD") -> str:
        return self.sfn.create_state_machine(
            name=f"sm-{uuid.uuid4().hex[:10]}",
            definition=json.dumps(definition),
            roleArn=self.role,
            type=kind,
        )["stateMachineArn"]

    def finished(self, execution_arn: str, timeout: float = 10.0) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            described = self.sfn.describe_execution(executionArn=execution_arn)
            return described if described["status"] != "RUNNING" else None

        return _eventually(done, timeout, f"end of {execution_arn}")


def _patched() -> bool:
    from moto.awslambda.models import LambdaFunction
    from moto.events.models import Rule

    return LambdaFunction._invoke_lambda is patches._invoke_lambda and Rule.send_to_targets is patches._send_to_targets


@pytest.fixture
def keep_patch_state() -> Iterator[None]:
    """Whatever a test does to the patches, leave them as they were (another module may use them)."""
    was_installed = _patched()
    yield
    if was_installed:
        patches.install()
    else:
        patches.uninstall()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, keep_patch_state: None) -> Iterator[Aws]:
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    import boto3
    from moto import mock_aws

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        patches.install()
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="patches-test", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        clients = Aws(
            lambda_=boto3.client("lambda", region_name=REGION),
            sfn=boto3.client("stepfunctions", region_name=REGION),
            events=boto3.client("events", region_name=REGION),
            sqs=boto3.client("sqs", region_name=REGION),
            role=role,
        )
        try:
            yield clients
        finally:
            for name in clients.registered:
                patches.unregister(name)


def _payload(response: dict[str, Any]) -> Any:
    return json.loads(response["Payload"].read())


# --------------------------------------------------------------------------- the patch points


def test_the_patched_moto_internals_still_exist() -> None:
    # Given the pinned moto
    from moto.awslambda.models import LambdaFunction
    from moto.events.models import Rule

    # Then the two internals the emulation replaces are still there, with the arguments it passes
    assert callable(getattr(LambdaFunction, "_invoke_lambda", None)), "moto renamed LambdaFunction._invoke_lambda"
    assert callable(getattr(Rule, "send_to_targets", None)), "moto renamed Rule.send_to_targets"
    import inspect

    assert "event" in inspect.signature(LambdaFunction._invoke_lambda).parameters
    assert list(inspect.signature(Rule.send_to_targets).parameters)[:3] == ["self", "original_event", "transform_input"]
    # and what patch 8 caches: the parser's static parse, the JSONPath module's parse, the task client
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.utils import json_path

    assert isinstance(AmazonStateLanguageParser.__dict__["parse"], staticmethod)
    assert callable(json_path.parse) and callable(lambda_eval_utils.boto_client_for)
    # and where patch 10 filters what moto searches for a task token
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    assert "execution_status" in inspect.signature(StepFunctionsParserBackend._get_executions).parameters


# --------------------------------------------------------------------------- Lambda


def test_boto3_invoke_calls_the_registered_handler_and_round_trips_the_payload(aws: Aws) -> None:
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
    assert _payload(response) == {"got": payload, "function": name}
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
    error = _payload(response)
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
    error = _payload(response)
    assert error["errorType"] == "FunctionNotRegistered"
    assert name in error["errorMessage"]


# --------------------------------------------------------------------------- Step Functions


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


def test_executions_of_one_definition_share_one_parse_and_keep_their_own_retries(aws: Aws) -> None:
    # Given a definition whose Task fails twice per execution before it succeeds, with a Retry
    attempts: dict[str, int] = {}

    def flaky(event: dict[str, Any], context: Any) -> dict[str, Any]:
        attempts[event["run"]] = attempts.get(event["run"], 0) + 1
        if attempts[event["run"]] < 3:
            raise RuntimeError("not yet")
        return {"run": event["run"], "attempts": attempts[event["run"]]}

    _, arn = aws.function(flaky)
    retry = [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 2, "BackoffRate": 1}]
    machine = aws.state_machine(
        {"StartAt": "Flaky", "States": {"Flaky": {"Type": "Task", "Resource": arn, "Retry": retry, "End": True}}}
    )
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    before = AmazonStateLanguageParser.parse.cache_info()  # type: ignore[attr-defined]

    # When four executions run at once
    runs = [
        aws.sfn.start_execution(stateMachineArn=machine, name=f"r{i}", input=json.dumps({"run": f"r{i}"}))[
            "executionArn"
        ]
        for i in range(4)
    ]
    outputs = [json.loads(aws.finished(run)["output"]) for run in runs]

    # Then each succeeded on its own third attempt (each kept its own retry count), and the
    # definition was parsed at most once for all of them
    assert outputs == [{"run": f"r{i}", "attempts": 3} for i in range(4)]
    after = AmazonStateLanguageParser.parse.cache_info()  # type: ignore[attr-defined]
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 3


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
    [event] = _eventually(lambda: received, what="the waitForTaskToken handler call")
    assert event["question"] == "which?" and event["token"]
    time.sleep(0.1)
    assert aws.sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"

    # And the token is answered
    aws.sfn.send_task_success(taskToken=event["token"], output=json.dumps({"answer": "the blue one"}))

    # Then the execution resumes and ends with the answer
    described = aws.finished(execution)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"answer": "the blue one"}


def test_a_task_token_is_answered_while_another_execution_is_still_starting(aws: Aws) -> None:
    # Given two executions waiting for a task token each
    received: list[dict[str, Any]] = []
    _, arn = aws.function(lambda event, context: received.append(event) or {"stored": True})
    wait = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": arn, "Payload": {"token.$": "$$.Task.Token", "execution.$": "$$.Execution.Id"}},
        "TimeoutSeconds": 60,
        "End": True,
    }
    machine = aws.state_machine({"StartAt": "Wait", "States": {"Wait": wait}})
    starting, waiting = (aws.sfn.start_execution(stateMachineArn=machine, name=n)["executionArn"] for n in "ab")
    asked = _eventually(lambda: received if len(received) == 2 else None, what="both tokens")
    token = {event["execution"]: event["token"] for event in asked}
    # and the one started first put back to where it was right after its start: its worker thread has
    # not built its environment yet (with many executions starting at once, that takes a while)
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.stepfunctions.responses import get_backend  # the backend that executes

    worker = get_backend(DEFAULT_ACCOUNT_ID, REGION).describe_execution(starting).exec_worker
    environment, worker.env = worker.env, None
    try:
        # When the other one's token is answered, and an unknown token failed
        aws.sfn.send_task_success(taskToken=token[waiting], output=json.dumps({"answer": "the blue one"}))
        with pytest.raises(aws.sfn.exceptions.InvalidToken):
            aws.sfn.send_task_failure(taskToken="no-such-token", error="Refused", cause="unknown token")
    finally:
        worker.env = environment

    # Then the answered one resumed with its answer, and the starting one still takes its own token
    assert json.loads(aws.finished(waiting)["output"]) == {"answer": "the blue one"}
    aws.sfn.send_task_success(taskToken=token[starting], output=json.dumps({"answer": "the red one"}))
    assert json.loads(aws.finished(starting)["output"]) == {"answer": "the red one"}


# --------------------------------------------------------------------------- DynamoDB


def test_a_cancelled_transaction_undoes_no_other_threads_write(aws: Aws) -> None:
    import sys
    import threading

    import boto3
    from botocore.exceptions import ClientError

    # Given a table, and a thread whose transactions are cancelled over and over (a condition fails)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    key = [{"AttributeName": "pk", "KeyType": "HASH"}]
    attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
    dynamodb.create_table(TableName="t", KeySchema=key, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST")
    for n in range(200):  # a table worth copying: moto copies it for each transaction
        dynamodb.put_item(TableName="t", Item={"pk": {"S": f"old-{n}"}})
    done, errors = threading.Event(), []
    refused = {"Put": {"TableName": "t", "Item": {"pk": {"S": "x"}}, "ConditionExpression": "attribute_exists(pk)"}}

    def cancelled_transactions() -> None:
        while not done.is_set():
            try:
                dynamodb.transact_write_items(TransactItems=[refused])
            except ClientError:
                pass  # cancelled, as it should be
            except Exception as exc:
                errors.append(exc)

    # When another thread writes and reads meanwhile, threads switching as often as they can
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    other = threading.Thread(target=cancelled_transactions)
    other.start()
    try:
        for n in range(200):
            dynamodb.put_item(TableName="t", Item={"pk": {"S": f"new-{n}"}})
            dynamodb.get_item(TableName="t", Key={"pk": {"S": f"old-{n}"}})
    finally:
        done.set()
        other.join()
        sys.setswitchinterval(interval)

    # Then every write it was told had happened is there, and no request failed
    kept = dynamodb.scan(TableName="t", Select="COUNT")["Count"]
    assert (kept, errors) == (400, [])


# --------------------------------------------------------------------------- EventBridge


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
    [event] = _eventually(lambda: delivered, what="delivery to the Lambda target")
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
    [execution] = _eventually(
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


# --------------------------------------------------------------------------- install / uninstall


def test_install_is_idempotent_and_uninstall_restores_the_originals(keep_patch_state: None) -> None:
    from moto.awslambda.models import LambdaFunction
    from moto.events.models import Rule

    # Given moto without the patches
    patches.uninstall()
    original_invoke, original_send = LambdaFunction._invoke_lambda, Rule.send_to_targets
    assert not _patched()

    # When the patches are installed twice
    patches.install()
    patches.install()

    # Then they are in place, and the second install did not record the patch as "the original"
    assert _patched()
    assert patches._ORIGINAL["invoke"] is original_invoke
    assert patches._ORIGINAL["send_to_targets"] is original_send

    # When they are uninstalled (twice: also idempotent)
    patches.uninstall()
    patches.uninstall()

    # Then moto's own methods are back, the caches of patch 8 included
    assert LambdaFunction._invoke_lambda is original_invoke
    assert Rule.send_to_targets is original_send
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    assert not hasattr(AmazonStateLanguageParser.parse, "cache_info")
    # and those of patches 10 and 11
    from moto.dynamodb.responses import DynamoHandler
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    assert StepFunctionsParserBackend._get_executions is not patches._executions_with_environment
    assert DynamoHandler.call_action is not patches._one_dynamodb_request_at_a_time


def test_registration_is_by_function_name() -> None:
    # Given a handler registered under a name
    name = f"fn-{uuid.uuid4().hex[:10]}"
    patches.register(name, lambda event, context: None)
    try:
        # Then it is known until unregistered (unregistering twice is harmless)
        assert patches.registered(name)
    finally:
        patches.unregister(name)
        patches.unregister(name)
    assert not patches.registered(name)


def test_dynamodb_transactions_and_writes_from_many_threads_do_not_collide(aws: Aws) -> None:
    # Given a table that transactions and plain writes hit at once, from several threads (patch 11)
    import boto3

    client = boto3.client("dynamodb", region_name=REGION)
    client.create_table(
        TableName="race",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for batch in range(40):  # a table big enough that copying it takes a while
        items = [{"PutRequest": {"Item": {"pk": {"S": f"old-{batch}-{n}"}}}} for n in range(25)]
        client.batch_write_item(RequestItems={"race": items})
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for n in range(80):
                key = {"pk": {"S": f"{worker}-{n}"}}
                if n % 2:
                    client.put_item(TableName="race", Item=key)
                else:
                    client.transact_write_items(TransactItems=[{"Put": {"TableName": "race", "Item": key}}])
        except BaseException as exc:  # reported below
            failures.append(exc)

    # When four threads write 320 more, half of them in transactions (each copies the whole table)
    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then every write landed and none failed
    assert failures == []
    assert client.scan(TableName="race", Select="COUNT")["Count"] == 1320


# --------------------------------------------------------------------------- CloudFormation

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
    # If a moto upgrade answers Outputs.X itself, patch 12 steps aside (it only fills a missing method)
    from moto.cloudformation.models import Stack

    patches.uninstall()
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

    patches.uninstall()
    assert "AWS::Lambda::Url" not in get_model_map(), "moto deploys function URLs now: patch 13 can go"
    with pytest.raises(Exception, match="has_cfn_attr|Url"):
        _function_url_stack(aws)


# --------------------------------------------------------------------------- patch 14: Express children


def _parent_of(child: str) -> dict[str, Any]:
    """A Standard machine that runs `child` with startExecution.sync:2 and keeps its output."""
    return {
        "StartAt": "Child",
        "States": {
            "Child": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync:2",
                "Parameters": {
                    "StateMachineArn": child,
                    "Name.$": "States.Format('{}-child', $$.Execution.Name)",
                    "Input": {"n.$": "$.n"},
                },
                "ResultSelector": {"output.$": "$.Output", "status.$": "$.Status"},
                "End": True,
            }
        },
    }


def test_a_standard_machine_runs_an_express_child_and_reads_its_output(aws: Aws) -> None:
    # Given an Express machine whose Task doubles its input, and a Standard parent that runs it (.sync:2)
    _, arn = aws.function(lambda event, context: {"doubled": event["n"] * 2})
    child = aws.state_machine(
        {"StartAt": "Double", "States": {"Double": {"Type": "Task", "Resource": arn, "End": True}}}, "EXPRESS"
    )
    parent = aws.state_machine(_parent_of(child))

    # When the parent runs
    started = time.monotonic()
    execution = aws.sfn.start_execution(stateMachineArn=parent, name="p1", input=json.dumps({"n": 21}))["executionArn"]
    described = aws.finished(execution)

    # Then the child ran under the name the parent gave it, and its output came back under AWS's names
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"output": {"doubled": 42}, "status": "SUCCEEDED"}
    (run,) = aws.sfn.list_executions(stateMachineArn=child)["executions"]
    assert run["name"] == "p1-child"
    # and the parent learned of the child's end when it was reported, not at moto's next half-second poll
    assert time.monotonic() - started < 5


def test_a_failed_express_child_fails_the_parents_task(aws: Aws) -> None:
    # Given an Express child that fails
    child = aws.state_machine(
        {"StartAt": "No", "States": {"No": {"Type": "Fail", "Error": "Nope", "Cause": "x"}}}, "EXPRESS"
    )
    definition = _parent_of(child)
    definition["States"]["Child"]["Catch"] = [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "Caught"}
    ]
    definition["States"]["Caught"] = {"Type": "Pass", "End": True}
    parent = aws.state_machine(definition)

    # When the parent runs
    execution = aws.sfn.start_execution(stateMachineArn=parent, name="p2", input=json.dumps({"n": 1}))["executionArn"]
    described = aws.finished(execution)

    # Then its task failed with States.TaskFailed, the child's failure as the cause
    output = json.loads(described["output"])
    assert output["failure"]["Error"] == "States.TaskFailed"
    assert json.loads(output["failure"]["Cause"])["Error"] == "Nope"


def test_without_patch_14_moto_cannot_start_a_child_execution(aws: Aws, keep_patch_state: None) -> None:
    # If a moto upgrade passes the ASL's parameters to boto3 under boto3's names, patch 14 can go
    child = aws.state_machine({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}, "EXPRESS")
    parent = aws.state_machine(_parent_of(child))
    patches.uninstall()
    try:
        execution = aws.sfn.start_execution(stateMachineArn=parent, name="p3", input=json.dumps({"n": 1}))
        described = aws.finished(execution["executionArn"])
    finally:
        patches.install()
    assert described["status"] == "FAILED", "moto starts child executions now: patch 14 can go"


# --------------------------------------------------------------------------- patch 15: custom resources


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
        patches.CloudFormationReplies().send(event["ResponseURL"], reply)

    patches.resolve_with(lambda name, environment: handler if environment.get("ROLE") == "deployer" else None)
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
        _eventually(
            lambda: (
                cloudformation.describe_stacks(StackName="custom")["Stacks"][0]["StackStatus"] != "CREATE_IN_PROGRESS"
            ),
            what="the custom resource's reply",
        )
    finally:
        patches.resolve_with(None)
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
