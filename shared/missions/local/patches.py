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
   them) and is created in the backend that executes (moto used the non-executing one), of the
   type it declares (an Express segment machine was created Standard).

5. Step Functions: moto never reports an execution that ended. As AWS does, each one that ends
   now puts a "Step Functions Execution Status Change" event on its account's default bus, where
   the rule the stack also deploys hands it to the status function (which frees the user's slot
   and starts what was queued). Delivered from moto's worker thread when the execution ends.

What moto keeps that AWS would not keep in a process, bounded (a dev server runs for days):
6. Step Functions executions: moto keeps every execution (its worker, its whole history) on its
   state machine forever, and scans them all on each describe and each task token. Each state
   machine now keeps its running executions and the `KEEP_ENDED_EXECUTIONS` that ended last (in
   the order they ended): a finished mission's history stays readable right after it ends (the CLI,
   tests); an older one answers ExecutionDoesNotExist. Lookups iterate a snapshot of the list, so
   one that runs while another thread drops an old execution never skips a live one. And moto's
   parser appends every worker thread it starts (with what its target holds: the execution's
   environment) to a module list it never reads or empties (`TMP_THREADS`); ended ones leave it.
7. moto's instance tracker: every object of a moto model (each DynamoDB item, and each copy of a
   whole table that a TransactWriteItems takes for its rollback; each state machine copy an
   execution takes) is appended to its class's `instances_tracked` for moto's dashboard, and so
   never freed. The list holds them weakly now: what a table, bucket or execution still holds is
   tracked as before, and what nothing holds any more is freed.

What moto does again for every execution or task, done once (a dev server starts many):
8. Step Functions: moto parses the whole definition (an ANTLR parse, about a fifth of the CPU a
   mission costs here) at each execution's start, builds a boto3 client for each Lambda task, and
   builds a JSONPath parser (its yacc tables) for each path it evaluates; and every request to any
   moto service lists its handler class's methods (by `inspect.getmembers`). The parsed program
   holds no execution state (that lives in each execution's Environment, keyed by component), so
   one parse per definition serves every execution; the clients and the paths are kept the same
   way (`PARSED_DEFINITIONS` definitions, `JSON_PATHS` paths, the least recently used dropped),
   and a class's methods are listed once.

And what moto loads that the emulation never uses:
9. moto's CloudFormation imports every service's models, EC2's among them, which load EC2's
   catalog of instance types and their offerings per region at import: about 56 MB of a dev
   server's memory. The stack has no EC2 resource, so while the patches are installed that
   catalog loads empty (if EC2's models were imported before, they keep what they loaded).

What moto gets wrong when many threads use it (each execution runs in a thread of its own, and so
does each request to the dev server):
10. Step Functions task tokens: moto answers SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat by
   asking each execution's environment whether the token is its own, and an execution that has just
   started has none yet (its worker thread builds it): the call failed with AttributeError (the dev
   server's answer route a 500) whenever another mission was starting at that moment. An execution
   without an environment has issued no token, so it is passed over.
11. DynamoDB: moto serves requests from many threads at once on plain dicts. A read racing a write
   could fail (RuntimeError: dictionary changed size), and a TransactWriteItems copies each table it
   touches and, when cancelled (a condition failed: the dispatcher's claim on a full running set),
   puts the copies back, undoing every write other threads made meanwhile: a queue entry, a released
   slot, a claim, so a queued mission could wait forever. As in DynamoDB, each request is now atomic:
   moto serves them one at a time (re-entrant: a write's stream record may invoke a function that
   writes again, in the same thread).

tests/integration/test_patches.py fails loudly if a moto upgrade breaks any of them.

Every in-process invocation is observable (`observe`, `invoking`) so a meter can count
Lambda requests and durations, and tell a function's AWS calls from the harness's.

And what moto's CloudFormation lacks for the stack as deployed:
12. Nested stacks (each capability is one): moto creates an AWS::CloudFormation::Stack from its
   TemplateURL, but a parent's `Fn::GetAtt [Nested, Outputs.X]` fails (its Stack model has no
   `get_cfn_attribute`). It answers from the nested stack's outputs, as CloudFormation does.
13. Function URLs (the stream function's): moto's Lambda has the API (CreateFunctionUrlConfig) but its
   CloudFormation has no AWS::Lambda::Url, and a stack output naming one's `FunctionUrl` fails the
   whole deploy. It is created through that API, and answers `FunctionUrl` and `FunctionArn`.

And what moto's Step Functions lacks for a mission's Express segments (missions.core.compiler):
14. `arn:aws:states:::states:startExecution.sync:2`: moto hands the state's parameters to boto3 as
   the ASL writes them (`StateMachineArn`, where boto3's member is `stateMachineArn`: every call
   failed with KeyError) and hands boto3's response back as is (`executionArn`, where the
   integration reads `ExecutionArn`, and the ASL the result's `Output`). Parameters are renamed to
   boto3's members and responses to the integration's names, as Step Functions does. And it polls
   the child every half second: a mission pays that at each segment's end, so the poll also wakes
   as soon as the child's end is reported (patch 5).

And what moto's CloudFormation leaves to a Docker host:
15. Custom resources: moto invokes the function a `Custom::` resource names (in a thread) with a
   ResponseURL on the Docker host where a moto server would listen, and the stack stays
   CREATE_IN_PROGRESS until a reply arrives there. `CloudFormationReplies` is the DeploymentReplies
   port that hands an in-process function's reply to moto's CloudFormation backend, as its server
   would; a FAILED reply fails the stack with the function's reason, as CloudFormation does. And a
   function CloudFormation invokes while it creates the stack exists before the harness could
   register its handler: `resolve_with` names who builds handlers for functions not registered yet.
16. Schedule groups (users' schedules live in one): moto's CloudFormation has no
   AWS::Scheduler::ScheduleGroup, so the group was never made (CreateSchedule in it failed) and the
   scheduler role's trust condition, which reads the group's Arn, failed the whole deploy. It is created
   through moto's Scheduler API, and answers `Arn`.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import traceback
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

Handler = Callable[[dict[str, Any], Any], Any]
Observer = Callable[[str, float, int], None]  # (function_name, duration_ms, memory_mb)

_FUNCTIONS: dict[str, Handler] = {}
Resolver = Callable[[str, dict[str, str]], Handler | None]  # (function name, environment) -> its handler
_RESOLVERS: list[Resolver] = []
_OBSERVERS: list[Observer] = []
_INVOKING: ContextVar[str | None] = ContextVar("missions_local_invoking", default=None)
_LOCK = threading.Lock()
_INSTALLED = False
_ORIGINAL: dict[str, Any] = {}
_log = logging.getLogger(__name__)
_REPORTED: set[str] = set()  # executions whose end was reported (patch 5)
_REPORTED_CHANGED = threading.Condition()
KEEP_ENDED_EXECUTIONS = 50  # per state machine (patch 6)
PARSED_DEFINITIONS = 64  # state machine definitions parsed once (patch 8)
JSON_PATHS = 4096  # JSONPath expressions compiled once (patch 8)


DEFAULT_TIMEOUT_SECONDS = 300  # a context built by hand (tests, the dev server's fallback): the emulation's Timeout


@dataclass
class LocalContext:
    """The parts of the Lambda context object handlers and Powertools read.

    As in Lambda, the remaining time counts down from the function's configured Timeout, from the
    moment the invocation started (the context's creation), and stops at 0."""

    function_name: str
    memory_limit_in_mb: int = 256
    function_version: str = "$LATEST"
    aws_request_id: str = ""
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    started_at: float = field(default_factory=time.monotonic)  # time.monotonic() when the invocation began

    def get_remaining_time_in_millis(self) -> int:
        left = self.started_at + self.timeout_seconds - time.monotonic()
        return max(0, int(left * 1000))


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


def resolve_with(resolver: Resolver | None) -> None:
    """Build the handler of a function invoked before anyone registered it (patch 15); None: stop."""
    with _LOCK:
        _RESOLVERS.clear()
        if resolver is not None:
            _RESOLVERS.append(resolver)


class CloudFormationReplies:
    """The DeploymentReplies port for a stack moto's CloudFormation creates (patch 15)."""

    def send(self, url: str, reply: dict[str, Any]) -> None:
        from moto.cloudformation.models import cloudformation_backends

        assert "/cfnresponse?stack=" in url, f"not a ResponseURL moto made: {url}"
        _, _, _, region, account, _ = str(reply["StackId"]).split(":", 5)
        stack = cloudformation_backends[account][region].get_stack(reply["StackId"])
        logical_id = reply["LogicalResourceId"]
        # moto asks the function from inside the resource's creation, and keeps the resource only once that
        # returns: a reply before then would make moto's readiness check create (and ask for) it again
        deadline = time.monotonic() + 30
        while logical_id not in stack.resource_map._parsed_resources and time.monotonic() < deadline:
            time.sleep(0.01)
        if reply["Status"] == "SUCCESS":
            stack.get_custom_resource(logical_id).set_data(reply.get("Data") or {})
            stack.verify_readiness()
        else:
            stack.status = "CREATE_FAILED"
            stack._add_stack_event("CREATE_FAILED", resource_status_reason=reply.get("Reason", ""))


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
        _install_lean_resources()  # first: the imports below may import EC2's models
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
        _ORIGINAL["executions"] = StateMachine.__dict__.get("executions")
        StateMachine.executions = property(_executions, _set_executions)  # type: ignore[assignment]
        from moto.core.common_models import BaseModel

        _ORIGINAL["model_new"] = BaseModel.__dict__["__new__"]
        BaseModel.__new__ = staticmethod(_weakly_tracked_new)  # type: ignore[method-assign]
        from moto.dynamodb.responses import DynamoHandler

        _ORIGINAL["dynamodb_call_action"] = DynamoHandler.__dict__["call_action"]
        DynamoHandler.call_action = _one_dynamodb_request_at_a_time  # type: ignore[method-assign]
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        _ORIGINAL["get_executions"] = StepFunctionsParserBackend._get_executions
        StepFunctionsParserBackend._get_executions = _executions_with_environment  # type: ignore[method-assign]
        from moto.cloudformation.models import Stack as CloudFormationStack

        if not hasattr(CloudFormationStack, "get_cfn_attribute"):
            CloudFormationStack.get_cfn_attribute = _nested_stack_output  # type: ignore[attr-defined]
            _ORIGINAL["nested_outputs"] = True
        from moto.cloudformation import parsing

        _ORIGINAL["resource_class_from_type"] = parsing.resource_class_from_type
        parsing.resource_class_from_type = _resource_class_from_type
        _install_caches()
        _install_sfn_integration()
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
        from moto.core.common_models import BaseModel

        BaseModel.__new__ = _ORIGINAL.pop("model_new")  # type: ignore[method-assign]
        from moto.dynamodb.responses import DynamoHandler

        DynamoHandler.call_action = _ORIGINAL.pop("dynamodb_call_action")  # type: ignore[method-assign]
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        StepFunctionsParserBackend._get_executions = _ORIGINAL.pop("get_executions")  # type: ignore[method-assign]
        if _ORIGINAL.pop("nested_outputs", False):
            from moto.cloudformation.models import Stack as CloudFormationStack

            del CloudFormationStack.get_cfn_attribute  # type: ignore[attr-defined]
        from moto.cloudformation import parsing

        parsing.resource_class_from_type = _ORIGINAL.pop("resource_class_from_type")
        _uninstall_caches()
        _uninstall_sfn_integration()
        _uninstall_lean_resources()
        if _ORIGINAL.get("executions") is None:
            delattr(StateMachine, "executions")
        else:
            StateMachine.executions = _ORIGINAL["executions"]
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
        sm_type=properties.get("StateMachineType", "STANDARD"),  # moto made every one Standard
    )


def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
    """moto's contract: return (payload json, errored, logs)."""
    handler = _FUNCTIONS.get(self.function_name)
    if handler is None and _RESOLVERS:
        handler = _RESOLVERS[0](self.function_name, dict(getattr(self, "environment_vars", None) or {}))
        if handler is not None:
            register(self.function_name, handler)
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
        timeout_seconds=_timeout_of(self),
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
    context = LocalContext(
        function_name=name, aws_request_id=str(uuid.uuid4()), timeout_seconds=_configured_timeout(arn)
    )
    _call(handler, _target_input(target, event), context)


def _timeout_of(function: Any) -> float:
    """A moto LambdaFunction's configured Timeout (Lambda's own default is 3 seconds)."""
    return float(getattr(function, "timeout", None) or 3)


def _configured_timeout(arn: str) -> float:
    """The Timeout moto holds for the function an ARN names (the default when moto has none)."""
    from moto.awslambda.models import lambda_backends

    try:
        _, _, _, region, account = arn.split(":")[:5]
        return _timeout_of(lambda_backends[account][region].get_function(arn))
    except Exception:  # a target moto does not know: a hand-built context's default
        return DEFAULT_TIMEOUT_SECONDS


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
        try:
            _forget_old_executions(execution)
        except Exception:  # the emulation's bookkeeping: never the execution's problem either
            _log.exception("old executions of %s were not forgotten", execution.state_machine_arn)


def wait_reported(execution_arn: str, timeout: float) -> bool:
    """Wait until the end of the execution was reported (and the rules it matched ran); False on timeout."""
    with _REPORTED_CHANGED:
        return _REPORTED_CHANGED.wait_for(lambda: execution_arn in _REPORTED, timeout)


# -- patch 6: a state machine's executions, bounded --------------------------------------------------


class _Executions(list[Any]):
    """A state machine's executions (moto appends each one it starts), dropping the oldest ended.

    Iteration reads a snapshot (`list.copy` runs in C, whole, under the GIL): moto finds an execution
    by scanning the list, and a scan must not skip one because an older one was dropped meanwhile."""

    def __init__(self, executions: Iterable[Any] = ()):
        super().__init__(executions)
        self.ended: deque[Any] = deque()  # in the order they ended
        self.lock = threading.Lock()

    def __iter__(self) -> Iterator[Any]:
        return iter(list.copy(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return []  # as moto's copy of a state machine for an execution: without the executions

    def forget_beyond(self, keep: int, execution: Any) -> list[Any]:
        """Note that `execution` ended; drop the ended ones beyond the last `keep`. Returns the dropped."""
        with self.lock:
            self.ended.append(execution)
            dropped = []
            while len(self.ended) > keep:
                dropped.append(self.ended.popleft())
            for old in dropped:
                # only this method removes, under the lock; moto only appends (at the end), so an
                # index found here is still the execution's when it is deleted
                index = next((i for i, e in enumerate(list.copy(self)) if e is old), None)
                if index is not None:
                    del self[index]
            return dropped


def _executions(machine: Any) -> _Executions:
    executions = machine.__dict__.get("executions")
    if not isinstance(executions, _Executions):  # a copy moto made of a state machine, or one made before install
        executions = machine.__dict__["executions"] = _Executions(executions or ())
    return executions


def _set_executions(machine: Any, executions: Iterable[Any]) -> None:
    machine.__dict__["executions"] = executions if isinstance(executions, _Executions) else _Executions(executions)


def _forget_old_executions(execution: Any) -> None:
    from moto.stepfunctions.parser.utils import TMP_THREADS
    from moto.stepfunctions.responses import get_backend

    # in place (every module imported the list itself); one appended meanwhile may be lost from it,
    # which nothing notices: moto only ever appends to it
    TMP_THREADS[:] = [thread for thread in list(TMP_THREADS) if thread.is_alive()]
    try:
        machine = get_backend(execution.account_id, execution.region_name).describe_state_machine(
            execution.state_machine_arn
        )
    except Exception:  # the state machine was deleted: its executions went with it
        return
    dropped = _executions(machine).forget_beyond(KEEP_ENDED_EXECUTIONS, execution)
    if dropped:
        with _REPORTED_CHANGED:
            _REPORTED.difference_update(old.exec_arn for old in dropped)


# -- patch 7: moto's instance tracker, weak ------------------------------------------------------------


class _WeakInstances:
    """A moto model's `instances_tracked` (its dashboard lists them; S3's reset disposes its keys),
    holding each instance weakly. Iterating yields the ones still alive."""

    def __init__(self, instances: Iterable[Any] = ()):
        self._lock = threading.Lock()
        self._refs: list[Callable[[], Any]] = []
        self._compact_at = 64
        for instance in instances:
            self.append(instance)

    def append(self, instance: Any) -> None:
        try:
            ref: Callable[[], Any] = weakref.ref(instance)
        except TypeError:  # a class without weak references: held as moto held it

            def ref(instance: Any = instance) -> Any:
                return instance

        with self._lock:
            self._refs.append(ref)
            if len(self._refs) >= self._compact_at:
                self._refs = [r for r in self._refs if r() is not None]
                self._compact_at = max(64, 2 * len(self._refs))

    def __iter__(self) -> Iterator[Any]:
        with self._lock:
            refs = list(self._refs)
        return iter([instance for r in refs if (instance := r()) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _weakly_tracked_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """moto's BaseModel.__new__, with the class's tracker made weak first (moto resets it to a list)."""
    tracked = cls.__dict__.get("instances_tracked")
    if tracked is not None and not isinstance(tracked, _WeakInstances):
        cls.instances_tracked = _WeakInstances(tracked)
    return _ORIGINAL["model_new"](cls, *args, **kwargs)


# -- patch 8: what moto redoes for every execution, done once ---------------------------------------


def _install_caches() -> None:
    from moto.core import responses
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.utils import json_path

    _ORIGINAL["parse"] = AmazonStateLanguageParser.__dict__["parse"]
    original_parse = _ORIGINAL["parse"].__func__

    @functools.lru_cache(maxsize=PARSED_DEFINITIONS)
    def parse_once(definition: str) -> Any:
        parsed = original_parse(definition)
        _fix_heap_keys(parsed[0])
        return parsed

    AmazonStateLanguageParser.parse = staticmethod(parse_once)  # type: ignore[method-assign]
    # module attributes the modules imported by name (so replaced where they are looked up)
    _swap(json_path, "parse", functools.lru_cache(maxsize=JSON_PATHS)(getattr(json_path, "parse")))  # noqa: B009
    _swap(lambda_eval_utils, "boto_client_for", _shared_client)
    _swap(responses, "method_names_from_class", functools.cache(getattr(responses, "method_names_from_class")))  # noqa: B009


def _uninstall_caches() -> None:
    from moto.core import responses
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.utils import json_path

    AmazonStateLanguageParser.parse = _ORIGINAL.pop("parse")  # type: ignore[method-assign]
    for module, name in (
        (json_path, "parse"),
        (lambda_eval_utils, "boto_client_for"),
        (responses, "method_names_from_class"),
    ):
        setattr(module, name, _ORIGINAL.pop(f"{module.__name__}.{name}"))
    _CLIENTS.clear()


def _swap(module: Any, name: str, replacement: Any) -> None:
    """Replace a module's attribute, keeping the original for `uninstall`."""
    _ORIGINAL[f"{module.__name__}.{name}"] = getattr(module, name)
    setattr(module, name, replacement)


def _fix_heap_keys(program: Any) -> None:
    """Give every component its heap key now: moto draws one at first use, and two executions
    sharing the program must not draw two (a retry counter would be kept under both)."""
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    seen: set[int] = set()
    pending: list[Any] = [program]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, EvalComponent):
            _ = item.heap_key
            pending.extend(vars(item).values())
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())


_CLIENT_MODULE = "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils"
_CLIENTS: dict[tuple[str, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _shared_client(region: str, service: str, state_credentials: Any = None) -> Any:
    """moto's client for a task, made once per region and service (botocore clients are thread-safe;
    moto's are all alike: fixed fake credentials, no retries, no parameter validation)."""
    key = (region, service)
    client = _CLIENTS.get(key)
    if client is None:
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                made = _ORIGINAL[f"{_CLIENT_MODULE}.boto_client_for"]
                client = _CLIENTS[key] = made(region, service, state_credentials)
    return client


# -- patch 9: EC2's instance catalog, not loaded -----------------------------------------------------

_UNUSED_RESOURCES = ("ec2/resources/instance_types.json", "ec2/resources/instance_type_offerings/")


def _install_lean_resources() -> None:
    from moto.utilities import utils

    original = _ORIGINAL["load_resource"] = utils.load_resource

    def load_resource(resource: str) -> Any:
        if resource.startswith(_UNUSED_RESOURCES):
            return [] if "offerings" in resource else {}
        return original(resource)

    utils.load_resource = load_resource


def _uninstall_lean_resources() -> None:
    from moto.utilities import utils

    utils.load_resource = _ORIGINAL.pop("load_resource")


# -- patch 10: task tokens while executions start ----------------------------------------------------


def _executions_with_environment(self: Any, execution_status: Any = None) -> list[Any]:
    """moto's own list of executions (which it searches for a task token or a map run), without those
    whose worker has not built its environment yet: they hold neither, and moto would read it."""
    return [
        execution
        for execution in _ORIGINAL["get_executions"](self, execution_status)
        if execution.exec_worker is not None and execution.exec_worker.env is not None
    ]


# -- patch 11: DynamoDB requests one at a time ---------------------------------------------------------

_DYNAMODB = threading.RLock()


def _one_dynamodb_request_at_a_time(self: Any) -> Any:
    """moto's own DynamoDB request handling, holding the one lock every DynamoDB request takes."""
    with _DYNAMODB:
        return _ORIGINAL["dynamodb_call_action"](self)


# -- patch 12: a nested stack's outputs --------------------------------------------------------------------


def _nested_stack_output(self: Any, attribute_name: str) -> Any:
    """`Fn::GetAtt [Nested, Outputs.X]`: the nested stack's output X."""
    from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

    name = attribute_name.removeprefix("Outputs.")
    output = self.output_map.get(name) if attribute_name.startswith("Outputs.") else None
    if output is None:
        raise UnformattedGetAttTemplateException()
    return output.value


# -- patch 13: AWS::Lambda::Url ----------------------------------------------------------------------------


def _resource_class_from_type(resource_type: str) -> Any:
    if resource_type == _FunctionUrl.cloudformation_type():
        return _FunctionUrl
    if resource_type == _ScheduleGroup.cloudformation_type():
        return _ScheduleGroup
    return _ORIGINAL["resource_class_from_type"](resource_type)


class _CfnModel:
    """What moto's CloudFormation asks of a resource the emulation makes itself (patches 13 and 16): its
    type, the attributes a template may read (`ATTRIBUTES`, answered from `attributes`), and creation done."""

    TYPE = ""
    NAME_PROPERTY = ""
    ATTRIBUTES: tuple[str, ...] = ()

    def __init__(self, physical_id: str, **attributes: str) -> None:
        self._physical_id, self.attributes = physical_id, attributes

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.TYPE

    @classmethod
    def cloudformation_name_type(cls) -> str:
        return cls.NAME_PROPERTY

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in cls.ATTRIBUTES

    @property
    def physical_resource_id(self) -> str:
        return self._physical_id

    def is_created(self) -> bool:
        return True

    def get_cfn_attribute(self, attribute_name: str) -> str:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name in self.ATTRIBUTES:
            return self.attributes[attribute_name]
        raise UnformattedGetAttTemplateException()


class _ScheduleGroup(_CfnModel):
    """An AWS::Scheduler::ScheduleGroup as CloudFormation makes it: CreateScheduleGroup (patch 16)."""

    TYPE, NAME_PROPERTY, ATTRIBUTES = "AWS::Scheduler::ScheduleGroup", "Name", ("Arn",)

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> _ScheduleGroup:
        from moto.scheduler.models import scheduler_backends

        properties = cloudformation_json.get("Properties") or {}
        name = properties.get("Name") or resource_name
        group = scheduler_backends[account_id][region_name].create_schedule_group(name, properties.get("Tags") or [])
        return cls(group.name, Arn=group.arn)


class _FunctionUrl(_CfnModel):
    """An AWS::Lambda::Url as CloudFormation makes it: CreateFunctionUrlConfig on its target function."""

    TYPE, ATTRIBUTES = "AWS::Lambda::Url", ("FunctionUrl", "FunctionArn")

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> _FunctionUrl:
        from moto.awslambda.models import lambda_backends

        properties = dict(cloudformation_json["Properties"])
        target = properties.pop("TargetFunctionArn")
        config = lambda_backends[account_id][region_name].create_function_url_config(target, properties)
        arn = config.function.function_arn
        return cls(arn, FunctionUrl=config.url, FunctionArn=arn)

    @property
    def function_arn(self) -> str:
        return self.attributes["FunctionArn"]

    def delete(self, account_id: str, region_name: str) -> None:
        from moto.awslambda.exceptions import UnknownFunctionException
        from moto.awslambda.models import lambda_backends

        try:
            lambda_backends[account_id][region_name].delete_function_url_config(self.function_arn)
        except UnknownFunctionException:  # the function went first (the stack deletes both): so did its URL
            _log.debug("no function left for the URL of %s", self.function_arn)


# -- patch 14: the Step Functions startExecution integration ------------------------------------------------

_SFN_SERVICE = "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn"
SEGMENT_POLL_SECONDS = 0.5  # moto's own poll interval, kept as the longest wait between two looks
_SFN_PATCHED = ("_normalise_parameters", "_normalise_response", "_eval_service_task", "_build_sync2_resolver")


def _install_sfn_integration() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
        StateTaskServiceSfn,
    )

    for name in _SFN_PATCHED:
        _ORIGINAL[f"{_SFN_SERVICE}.{name}"] = getattr(StateTaskServiceSfn, name)
        _ORIGINAL[f"{_SFN_SERVICE}.{name}.own"] = name in StateTaskServiceSfn.__dict__
    StateTaskServiceSfn._normalise_parameters = _sfn_parameters  # type: ignore[method-assign]
    StateTaskServiceSfn._normalise_response = _sfn_response  # type: ignore[method-assign]
    StateTaskServiceSfn._eval_service_task = _sfn_submitted  # type: ignore[method-assign]
    StateTaskServiceSfn._build_sync2_resolver = _sfn_sync2_resolver  # type: ignore[method-assign]


def _uninstall_sfn_integration() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
        StateTaskServiceSfn,
    )

    for name in _SFN_PATCHED:
        original = _ORIGINAL.pop(f"{_SFN_SERVICE}.{name}")
        if _ORIGINAL.pop(f"{_SFN_SERVICE}.{name}.own"):
            setattr(StateTaskServiceSfn, name, original)
        else:  # inherited: the base class's serves again
            delattr(StateTaskServiceSfn, name)


def _sfn_parameters(
    self: Any, parameters: dict[str, Any], boto_service_name: str | None = None, service_action_name: str | None = None
) -> None:
    """moto's normalisation (the input as a JSON string), then the ASL's names as boto3's members."""
    _ORIGINAL[f"{_SFN_SERVICE}._normalise_parameters"](self, parameters, boto_service_name, service_action_name)
    for key in list(parameters):
        parameters[key[:1].lower() + key[1:]] = parameters.pop(key)


def _pascal(response: dict[str, Any]) -> None:
    for key in list(response):
        response[key[:1].upper() + key[1:]] = response.pop(key)


def _sfn_response(
    self: Any, response: Any, boto_service_name: str | None = None, service_action_name: str | None = None
) -> None:
    _ORIGINAL[f"{_SFN_SERVICE}._normalise_response"](self, response, boto_service_name, service_action_name)
    if isinstance(response, dict):
        _pascal(response)


def _sfn_submitted(self: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
    """The call, with its response under the integration's names (what the .sync resolvers read)."""
    result = _ORIGINAL[f"{_SFN_SERVICE}._eval_service_task"](self, env, *args, **kwargs)
    if env.stack and isinstance(env.stack[-1], dict):
        _pascal(env.stack[-1])
    return result


def _sfn_sync2_resolver(self: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
    """moto's resolver, which looks once; when the child still runs, it waits for the child's end to be
    reported (at most SEGMENT_POLL_SECONDS) and looks again, instead of moto's fixed half-second sleep."""
    child = env.stack[-1].get("ExecutionArn") if env.stack and isinstance(env.stack[-1], dict) else None
    resolve = _ORIGINAL[f"{_SFN_SERVICE}._build_sync2_resolver"](self, env, *args, **kwargs)

    def resolve_when_ended() -> Any:
        result = resolve()
        if result is None and child:
            wait_reported(child, SEGMENT_POLL_SECONDS)
            result = resolve()
        return result

    return resolve_when_ended
