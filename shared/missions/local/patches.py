"""Every patch of moto the local emulation needs, in one place (moto is pinned exactly).

1. Lambda: moto runs functions only in Docker. `LambdaFunction._invoke_lambda` is replaced
   so a function registered here is called in-process. This one patch serves Step
   Functions Lambda tasks, waitForTaskToken, boto3 `invoke` and event source mappings.
2. EventBridge: stock moto raises NotImplementedError for Lambda and Step Functions
   targets; `Rule.send_to_targets` delivers those itself and leaves the rest to moto.
3. DynamoDB Streams -> Lambda: moto fails to JSON-encode records holding Binary
   attributes; `LambdaBackend.send_dynamodb_items` encodes them base64, as Lambda does.
4. CloudFormation: `Ref` of an AWS::Events::EventBus must be its name; moto's EventBus has no
   `physical_resource_id`, so a rule on a custom bus fails to deploy. It gets one. And an
   AWS::StepFunctions::StateMachine gets its DefinitionSubstitutions applied (moto drops
   them) and is created in the backend that executes (moto used the non-executing one).

5. Step Functions: moto never reports an execution that ended. As AWS does, each one that ends
   now puts a "Step Functions Execution Status Change" event on its account's default bus, where
   the rule the stack also deploys hands it to the status function (which frees the user's slot
   and starts what was queued). Delivered from moto's worker thread when the execution ends.

tests/integration/test_patches.py fails loudly if a moto upgrade breaks any of them.

Every in-process invocation is observable (`observe`, `invoking`) so a meter can count
Lambda requests and durations, and tell a function's AWS calls from the harness's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

Handler = Callable[[dict[str, Any], Any], Any]
Observer = Callable[[str, float, int], None]  # (function_name, duration_ms, memory_mb)

_FUNCTIONS: dict[str, Handler] = {}
_OBSERVERS: list[Observer] = []
_INVOKING: ContextVar[str | None] = ContextVar("missions_local_invoking", default=None)
_LOCK = threading.Lock()
_INSTALLED = False
_ORIGINAL: dict[str, Any] = {}
_log = logging.getLogger(__name__)
_REPORTED: set[str] = set()  # executions whose end was reported (patch 5)
_REPORTED_CHANGED = threading.Condition()


@dataclass
class LocalContext:
    """The parts of the Lambda context object handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int = 256
    function_version: str = "$LATEST"
    aws_request_id: str = ""
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


class FunctionError(TypedDict):
    """A function error's payload, as Lambda returns it."""

    errorType: str
    errorMessage: str
    stackTrace: NotRequired[list[str]]


def register(function_name: str, handler: Handler) -> None:
    with _LOCK:
        _FUNCTIONS[function_name] = handler


def unregister(function_name: str) -> None:
    with _LOCK:
        _FUNCTIONS.pop(function_name, None)


def registered(function_name: str) -> bool:
    return function_name in _FUNCTIONS


def observe(observer: Observer) -> Callable[[], None]:
    """Call `observer` after every in-process invocation, failed ones too (Lambda bills both).
    Returns the function that stops observing."""
    with _LOCK:
        _OBSERVERS.append(observer)

    def stop() -> None:
        with _LOCK:
            if observer in _OBSERVERS:
                _OBSERVERS.remove(observer)

    return stop


def invoking() -> str | None:
    """The function whose handler runs in this thread right now, or None (the harness)."""
    return _INVOKING.get()


def _call(handler: Handler, payload: Any, context: LocalContext) -> Any:
    token = _INVOKING.set(context.function_name)
    started = time.perf_counter()
    try:
        return handler(payload, context)
    finally:
        duration_ms = (time.perf_counter() - started) * 1000
        _INVOKING.reset(token)
        for observer in list(_OBSERVERS):
            observer(context.function_name, duration_ms, context.memory_limit_in_mb)


def install() -> None:
    """Apply the patches (idempotent)."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        from moto.awslambda.models import LambdaBackend, LambdaFunction
        from moto.events.models import EventBus, Rule
        from moto.stepfunctions.models import StateMachine

        _ORIGINAL["state_machine_from_cfn"] = StateMachine.__dict__["create_from_cloudformation_json"]
        StateMachine.create_from_cloudformation_json = classmethod(_state_machine_from_cfn)  # type: ignore[assignment]
        if not hasattr(EventBus, "physical_resource_id"):
            EventBus.physical_resource_id = property(lambda bus: bus.name)  # type: ignore[attr-defined]
            _ORIGINAL["bus_ref"] = True
        _ORIGINAL["invoke"] = LambdaFunction._invoke_lambda
        _ORIGINAL["send_to_targets"] = Rule.send_to_targets
        _ORIGINAL["send_dynamodb_items"] = LambdaBackend.send_dynamodb_items
        from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

        _ORIGINAL["terminated"] = BaseExecutionWorkerCommunication.terminated
        LambdaFunction._invoke_lambda = _invoke_lambda  # type: ignore[method-assign]
        Rule.send_to_targets = _send_to_targets  # type: ignore[method-assign]
        LambdaBackend.send_dynamodb_items = _send_dynamodb_items  # type: ignore[method-assign]
        BaseExecutionWorkerCommunication.terminated = _terminated  # type: ignore[method-assign]
        _INSTALLED = True


def uninstall() -> None:
    global _INSTALLED
    with _LOCK:
        if not _INSTALLED:
            return
        from moto.awslambda.models import LambdaBackend, LambdaFunction
        from moto.events.models import EventBus, Rule
        from moto.stepfunctions.models import StateMachine

        StateMachine.create_from_cloudformation_json = _ORIGINAL["state_machine_from_cfn"]  # type: ignore[method-assign]
        if _ORIGINAL.pop("bus_ref", False):
            del EventBus.physical_resource_id  # type: ignore[attr-defined]
        from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

        LambdaFunction._invoke_lambda = _ORIGINAL["invoke"]  # type: ignore[method-assign]
        Rule.send_to_targets = _ORIGINAL["send_to_targets"]  # type: ignore[method-assign]
        LambdaBackend.send_dynamodb_items = _ORIGINAL["send_dynamodb_items"]  # type: ignore[method-assign]
        BaseExecutionWorkerCommunication.terminated = _ORIGINAL["terminated"]  # type: ignore[method-assign]
        _INSTALLED = False


def _state_machine_from_cfn(
    cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
) -> Any:
    """As CloudFormation does: substitute ${key} in the definition, in the backend the API serves."""
    from moto.stepfunctions.responses import get_backend
    from moto.stepfunctions.utils import cfn_to_api_tags

    properties = cloudformation_json["Properties"]
    definition = properties.get("DefinitionString", "")
    for key, value in (properties.get("DefinitionSubstitutions") or {}).items():
        definition = definition.replace("${" + key + "}", str(value))
    return get_backend(account_id, region_name).create_state_machine(
        properties.get("StateMachineName", resource_name),
        definition,
        properties.get("RoleArn", ""),
        tags=cfn_to_api_tags(properties.get("Tags", [])),
    )


def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
    """moto's contract: return (payload json, errored, logs)."""
    handler = _FUNCTIONS.get(self.function_name)
    if handler is None:
        error: FunctionError = {
            "errorType": "FunctionNotRegistered",
            "errorMessage": f"no in-process handler registered for '{self.function_name}'",
        }
        return json.dumps(error), True, ""
    payload = json.loads(event) if isinstance(event, (str, bytes)) else (event or {})
    context = LocalContext(
        function_name=self.function_name,
        memory_limit_in_mb=int(getattr(self, "memory_size", 256) or 256),
        aws_request_id=str(uuid.uuid4()),
        invoked_function_arn=getattr(self, "function_arn", ""),
    )
    try:
        result = _call(handler, payload, context)
    except Exception as exc:  # a function error, as Lambda reports it
        error = {
            "errorType": type(exc).__name__,
            "errorMessage": str(exc),
            "stackTrace": traceback.format_exception(exc)[-5:],
        }
        return json.dumps(error), True, ""
    return json.dumps(result), False, ""


def _send_dynamodb_items(self: Any, function_arn: str, items: Any, source: str) -> Any:
    """moto's own, with Binary attributes base64-encoded as Lambda delivers them."""
    import base64
    from datetime import datetime

    from moto.core.utils import unix_time

    records = []
    for item in items:
        record = item.to_json()
        dynamodb = dict(record["dynamodb"])
        if isinstance(dynamodb.get("ApproximateCreationDateTime"), datetime):
            dynamodb["ApproximateCreationDateTime"] = unix_time(dynamodb["ApproximateCreationDateTime"])
        records.append(
            {
                "eventID": record["eventID"],
                "eventName": record["eventName"],
                "eventVersion": record["eventVersion"],
                "eventSource": record["eventSource"],
                "awsRegion": self.region_name,
                "dynamodb": dynamodb,
                "eventSourceARN": source,
            }
        )

    def encode(value: Any) -> str:
        if isinstance(value, bytes | bytearray):
            return base64.b64encode(value).decode()
        raise TypeError(f"{type(value).__name__} is not JSON serializable")

    return self._lambdas.get_arn(function_arn).invoke(json.dumps({"Records": records}, default=encode), {}, {})


def _send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
    if self.scheduled_expression and not self.event_pattern.get_pattern():
        return  # schedules never fire in moto; the dev server's clock drives them
    if not self.event_pattern.matches_event(original_event):
        return
    others = []
    for target in self.targets:
        arn = target["Arn"]
        if ":lambda:" in arn:
            _deliver_lambda(arn, target, original_event)
        elif ":states:" in arn:
            _deliver_state_machine(arn, target, original_event)
        else:
            others.append(target)
    if others:
        saved = self.targets
        self.targets = others
        try:
            _ORIGINAL["send_to_targets"](self, original_event, transform_input)
        finally:
            self.targets = saved


def _target_input(target: dict[str, Any], event: Any) -> Any:
    if "Input" in target:
        return json.loads(target["Input"])
    return event


def _deliver_lambda(arn: str, target: dict[str, Any], event: Any) -> None:
    name = arn.split(":function:")[-1].split(":")[0]
    handler = _FUNCTIONS.get(name)
    if handler is None:
        raise LookupError(f"EventBridge target {arn} has no in-process handler")
    _call(handler, _target_input(target, event), LocalContext(function_name=name, aws_request_id=str(uuid.uuid4())))


def _deliver_state_machine(arn: str, target: dict[str, Any], event: Any) -> None:
    import boto3

    region = arn.split(":")[3]
    boto3.client("stepfunctions", region_name=region).start_execution(
        stateMachineArn=arn, name=str(uuid.uuid4()), input=json.dumps(_target_input(target, event))
    )


def _terminated(self: Any) -> None:
    """moto's own, then the status-change event AWS would put on the default bus."""
    _ORIGINAL["terminated"](self)
    execution = self.execution
    from moto.events.models import events_backends

    from missions.core.specs import EXECUTION_STATUS_DETAIL_TYPE, EXECUTION_STATUS_SOURCE

    detail = {
        "executionArn": execution.exec_arn,
        "stateMachineArn": execution.state_machine_arn,
        "name": execution.name,
        "status": execution.exec_status.value,
    }
    event = {
        "Source": EXECUTION_STATUS_SOURCE,
        "DetailType": EXECUTION_STATUS_DETAIL_TYPE,
        "Detail": json.dumps(detail),
        "Resources": [execution.exec_arn],
    }
    try:
        events_backends[execution.account_id][execution.region_name].put_events([event])
    except Exception:  # in AWS a failed delivery is retried, then dead-lettered: never the execution's problem
        _log.exception("status change of %s was not delivered", execution.exec_arn)
    finally:
        with _REPORTED_CHANGED:
            _REPORTED.add(execution.exec_arn)
            _REPORTED_CHANGED.notify_all()


def wait_reported(execution_arn: str, timeout: float) -> bool:
    """Wait until the end of the execution was reported (and the rules it matched ran); False on timeout."""
    with _REPORTED_CHANGED:
        return _REPORTED_CHANGED.wait_for(lambda: execution_arn in _REPORTED, timeout)
