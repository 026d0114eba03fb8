"""Patches 8, 10, 14, 24 and 25 (missions.local.moto.stepfunctions), tested against moto itself."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from missions.local import moto as moto_patches
from tests.integration.moto_patches.conftest import REGION, Aws, eventually


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
    asked = eventually(lambda: received if len(received) == 2 else None, what="both tokens")
    token = {event["execution"]: event["token"] for event in asked}
    # and the one started first put back to where it was right after its start: its worker thread has
    # not built its environment yet (with many executions starting at once, that takes a while)
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.stepfunctions.responses import get_backend  # the backend that executes

    execution = get_backend(DEFAULT_ACCOUNT_ID, REGION).describe_execution(starting)
    worker = execution.exec_worker
    environment, worker.env = worker.env, None
    try:
        # When the other one's token is answered, and an unknown token failed
        aws.sfn.send_task_success(taskToken=token[waiting], output=json.dumps({"answer": "the blue one"}))
        with pytest.raises(aws.sfn.exceptions.InvalidToken):
            aws.sfn.send_task_failure(taskToken="no-such-token", error="Refused", cause="unknown token")
    finally:
        worker.env = environment
    # and while it is made but not started yet (no status: moto's own filter read it and failed the task
    # that sent a token), a token is still looked up: an unknown one is refused as such
    status, execution.exec_status = execution.exec_status, None
    try:
        with pytest.raises(aws.sfn.exceptions.InvalidToken):
            aws.sfn.send_task_success(taskToken="no-such-token", output="{}")
    finally:
        execution.exec_status = status

    # Then the answered one resumed with its answer, and the starting one still takes its own token
    assert json.loads(aws.finished(waiting)["output"]) == {"answer": "the blue one"}
    aws.sfn.send_task_success(taskToken=token[starting], output=json.dumps({"answer": "the red one"}))
    assert json.loads(aws.finished(starting)["output"]) == {"answer": "the red one"}


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
    moto_patches.uninstall()
    try:
        execution = aws.sfn.start_execution(stateMachineArn=parent, name="p3", input=json.dumps({"n": 1}))
        described = aws.finished(execution["executionArn"])
    finally:
        moto_patches.install()
    assert described["status"] == "FAILED", "moto starts child executions now: patch 14 can go"


def test_a_states_json_data_is_copied_plainly_and_the_execution_answers_as_before(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patch 19: the interpreter's modules copy JSON without deepcopy; the output is Step Functions' own."""
    import copy
    import sys

    from missions.local.moto.stepfunctions import PLAIN_JSON_COPIES

    # Given a machine whose states read, shape and place JSON (Parameters, a Task's ResultPath, a Choice)
    _, double = aws.function(lambda event, context: {"doubled": [n * 2 for n in event["numbers"]]})
    definition = {
        "StartAt": "Shape",
        "States": {
            "Shape": {"Type": "Pass", "Parameters": {"numbers.$": "$.input.numbers", "tag": "x"}, "Next": "Double"},
            "Double": {"Type": "Task", "Resource": double, "ResultPath": "$.result", "Next": "Big?"},
            "Big?": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.result.doubled[0]", "NumericGreaterThan": 1, "Next": "Done"}],
                "Default": "Done",
            },
            "Done": {"Type": "Pass", "End": True},
        },
    }
    machine = aws.state_machine(definition)
    patched = {patch.owner for patch in PLAIN_JSON_COPIES}
    deep_copied: list[str] = []
    real = copy.deepcopy

    def counting(value: Any, memo: Any = None, _nil: Any = []) -> Any:  # noqa: B006 (deepcopy's own signature)
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller in patched and type(value) in (dict, list):
            deep_copied.append(caller)
        return real(value, memo)

    # When it runs, each deepcopy of JSON by one of the interpreter's modules counted
    monkeypatch.setattr(copy, "deepcopy", counting)
    document = {"input": {"numbers": [1, 2.5, 3]}, "note": None}
    run = aws.sfn.start_execution(stateMachineArn=machine, input=json.dumps(document))["executionArn"]
    output = json.loads(aws.finished(run)["output"])

    # Then the output is Step Functions' own, and none of them used deepcopy for it
    assert output == {"numbers": [1, 2.5, 3], "tag": "x", "result": {"doubled": [2, 5.0, 6]}}
    assert deep_copied == []


def test_express_segments_chain_themselves_and_answer_the_token_their_parent_waits_on(aws: Aws) -> None:
    # Given an Express machine that heartbeats on its token, adds one, starts itself again until it reached
    # 3 (aws-sdk and startExecution calls, their parameters in the ASL's PascalCase), then answers the token
    _, arn = aws.function(lambda event, context: {"n": event["n"] + 1})
    retry = {"IntervalSeconds": 1, "MaxAttempts": 1}
    child = aws.state_machine(
        {
            "StartAt": "Beat",
            "States": {
                "Beat": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskHeartbeat",
                    "Parameters": {"TaskToken.$": "$.token"},
                    "ResultPath": None,
                    "Next": "Add",
                },
                "Add": {
                    "Type": "Task",
                    "Resource": arn,
                    "ResultSelector": {"n.$": "$.n"},
                    "ResultPath": "$.r",
                    "Next": "Keep",
                },
                "Keep": {"Type": "Pass", "Parameters": {"n.$": "$.r.n", "token.$": "$.token"}, "Next": "More"},
                "More": {
                    "Type": "Choice",
                    "Choices": [{"Variable": "$.n", "NumericLessThan": 3, "Next": "Next"}],
                    "Default": "Answer",
                },
                "Next": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::states:startExecution",
                    "Parameters": {
                        "StateMachineArn.$": "$$.StateMachine.Id",
                        "Name.$": "States.Format('p1-{}', $.n)",
                        "Input.$": "$",
                    },
                    "ResultPath": None,
                    "End": True,
                },
                "Answer": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskSuccess",
                    "Parameters": {"TaskToken.$": "$.token", "Output.$": "States.JsonToString($)"},
                    "Retry": [{"ErrorEquals": ["States.ALL"], **retry}],
                    "ResultPath": None,
                    "End": True,
                },
            },
        },
        "EXPRESS",
    )
    # and a Standard parent that starts it and waits on its token
    parent = aws.state_machine(
        {
            "StartAt": "Chain",
            "States": {
                "Chain": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::states:startExecution.waitForTaskToken",
                    "HeartbeatSeconds": 30,
                    "Parameters": {
                        "StateMachineArn": child,
                        "Name.$": "States.Format('{}-0', $$.Execution.Name)",
                        "Input": {"n.$": "$.n", "token.$": "$$.Task.Token"},
                    },
                    "ResultSelector": {"n.$": "$.n"},
                    "End": True,
                }
            },
        }
    )

    # When the parent runs
    execution = aws.sfn.start_execution(stateMachineArn=parent, name="p1", input=json.dumps({"n": 0}))["executionArn"]
    described = aws.finished(execution)

    # Then the chain of three children answered it with the last one's state, and the parent ran one Task
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"n": 3}
    assert sorted(run["name"] for run in aws.sfn.list_executions(stateMachineArn=child)["executions"]) == [
        "p1-0",
        "p1-1",
        "p1-2",
    ]
    entered = [
        e for e in aws.sfn.get_execution_history(executionArn=execution)["events"] if e["type"].endswith("Entered")
    ]
    assert len(entered) == 1


def test_a_child_that_fails_its_token_or_goes_quiet_fails_the_parents_task(aws: Aws) -> None:
    # Given a child that fails its parent's token, and one that never answers it
    failing = aws.state_machine(
        {
            "StartAt": "Fail",
            "States": {
                "Fail": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskFailure",
                    "Parameters": {
                        "TaskToken.$": "$.token",
                        "Error": "MissionFailed",
                        "Cause": "the final stage failed",
                    },
                    "ResultPath": None,
                    "End": True,
                }
            },
        },
        "EXPRESS",
    )
    quiet = aws.state_machine({"StartAt": "Pass", "States": {"Pass": {"Type": "Pass", "End": True}}}, "EXPRESS")

    def waiting_on(child: str, heartbeat_seconds: int) -> str:
        return aws.state_machine(
            {
                "StartAt": "Child",
                "States": {
                    "Child": {
                        "Type": "Task",
                        "Resource": "arn:aws:states:::states:startExecution.waitForTaskToken",
                        "HeartbeatSeconds": heartbeat_seconds,
                        "Parameters": {
                            "StateMachineArn": child,
                            "Name.$": "States.Format('{}-0', $$.Execution.Name)",
                            "Input": {"token.$": "$$.Task.Token"},
                        },
                        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "Caught"}],
                        "End": True,
                    },
                    "Caught": {"Type": "Pass", "End": True},
                },
            }
        )

    # When a parent waits on each
    outputs = []
    for child, heartbeat_seconds in ((failing, 60), (quiet, 1)):
        parent = waiting_on(child, heartbeat_seconds)
        run = aws.sfn.start_execution(stateMachineArn=parent, name="p", input="{}")["executionArn"]
        outputs.append(json.loads(aws.finished(run)["output"])["failure"]["Error"])

    # Then the first parent's task failed with the child's error, the second's when its heartbeat ran out
    assert outputs[0] == "MissionFailed"
    assert outputs[1] in ("States.HeartbeatTimeout", "States.Timeout")  # moto names it the latter


def test_a_heartbeat_or_an_answer_before_the_task_waits_is_heard_when_it_does(aws: Aws) -> None:
    # Given a task's token, answered or heartbeaten before the task set its heartbeat up (a segment
    # heartbeats as it starts, while the task that started it is still returning from the call)
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint, CallbackOutcomeSuccess

    beaten, answered = CallbackEndpoint("beaten"), CallbackEndpoint("answered")
    assert beaten.notify_heartbeat()  # taken (moto refused it: an invalid token)
    answered.notify(CallbackOutcomeSuccess(callback_id="answered", output="{}"))
    # When each task sets its heartbeat up and waits
    started = time.monotonic()
    heard = [
        endpoint.setup_heartbeat_endpoint(heartbeat_seconds=30).clear_and_wait() for endpoint in (beaten, answered)
    ]
    # Then each hears at once what came before (moto waited out the heartbeat, then timed the task out)
    assert heard == [True, True] and time.monotonic() - started < 1
    assert answered.get_outcome() is not None


# -- patch 8's parsed definitions, kept on disk for the next process (missions.local.moto.parse_cache) ------


@pytest.fixture
def parse_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Patch 8's disk cache in a directory of this test's, and its process cache emptied around the test."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    from missions.local.moto import stepfunctions

    directory = tmp_path / "asl"
    monkeypatch.setattr(stepfunctions.PARSE_CACHE, "directory", directory)
    AmazonStateLanguageParser.parse.cache_clear()  # type: ignore[attr-defined]
    yield directory
    AmazonStateLanguageParser.parse.cache_clear()  # type: ignore[attr-defined]


def _pass_machine(aws: Aws) -> tuple[str, str]:
    definition = {"StartAt": "Add", "States": {"Add": {"Type": "Pass", "Result": {"added": 1}, "End": True}}}
    return aws.state_machine(definition), json.dumps(definition)


def test_a_definition_parsed_by_an_earlier_process_is_read_back_and_runs(aws: Aws, parse_cache: Path) -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    # Given a state machine made once (its definition parsed, and kept in the cache directory)
    machine, _ = _pass_machine(aws)
    (kept,) = parse_cache.glob("*.pickle")
    described = aws.sfn.describe_state_machine(stateMachineArn=machine)["definition"]
    # When a later process (here: this one, its own cache emptied) runs it
    AmazonStateLanguageParser.parse.cache_clear()  # type: ignore[attr-defined]
    run = aws.sfn.start_execution(stateMachineArn=machine)["executionArn"]
    # Then the program came from the file, not from ANTLR (no parse tree), and it runs as parsed
    assert AmazonStateLanguageParser.parse(described)[1] is None
    assert json.loads(aws.finished(run)["output"]) == {"added": 1}
    assert list(parse_cache.glob("*.pickle")) == [kept]


def test_a_kept_definition_that_does_not_read_back_is_parsed_again_and_replaced(aws: Aws, parse_cache: Path) -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    # Given a kept definition cut short
    machine, _ = _pass_machine(aws)
    (kept,) = parse_cache.glob("*.pickle")
    kept.write_bytes(kept.read_bytes()[:100])
    described = aws.sfn.describe_state_machine(stateMachineArn=machine)["definition"]
    AmazonStateLanguageParser.parse.cache_clear()  # type: ignore[attr-defined]
    # When it is needed again, Then it is parsed (a parse tree), runs, and is whole on disk again
    assert AmazonStateLanguageParser.parse(described)[1] is not None
    run = aws.sfn.start_execution(stateMachineArn=machine)["executionArn"]
    assert json.loads(aws.finished(run)["output"]) == {"added": 1}
    AmazonStateLanguageParser.parse.cache_clear()  # type: ignore[attr-defined]
    assert AmazonStateLanguageParser.parse(described)[1] is None


def test_a_cache_directory_others_may_write_to_is_not_used(aws: Aws, parse_cache: Path) -> None:
    # Given a cache directory anyone may write to (a pickle read from it could be anyone's code)
    parse_cache.mkdir()
    parse_cache.chmod(0o777)
    # When a state machine is made, Then nothing is kept there, and it runs all the same
    machine, _ = _pass_machine(aws)
    assert list(parse_cache.iterdir()) == []
    run = aws.sfn.start_execution(stateMachineArn=machine)["executionArn"]
    assert json.loads(aws.finished(run)["output"]) == {"added": 1}


def test_json_data_is_copied_whole_with_its_types_and_what_pickle_refuses_is_walked() -> None:
    """Patch 19: a state's data is copied through pickle, every type kept; what pickle refuses is walked."""
    from missions.local.moto.stepfunctions import _copy_json

    # Given JSON data with 1, 1.0 and True side by side, and data holding a function (pickle refuses it)
    data = {"values": [1, 1.0, True, None, "x", 10**30], "nested": {"deep": [{"k": 2}]}}
    step = lambda: 1  # noqa: E731
    odd = {"call": [step], "nested": {"k": [1]}}

    # When both are copied
    copied, odd_copied = _copy_json(data), _copy_json(odd)

    # Then each copy equals its source with the very same types, and shares no container with it
    assert copied == data
    assert [type(v) for v in copied["values"]] == [type(v) for v in data["values"]]
    assert copied["nested"]["deep"][0] is not data["nested"]["deep"][0]
    assert odd_copied == odd and odd_copied["call"][0] is step
    assert odd_copied["nested"]["k"] is not odd["nested"]["k"]
