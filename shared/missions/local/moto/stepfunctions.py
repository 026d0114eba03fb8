"""moto's Step Functions, patched: what a mission's machines need of it, and what it must not keep or redo.

4. (its Step Functions half) an AWS::StepFunctions::StateMachine gets its DefinitionSubstitutions
   applied (moto drops them) and is created in the backend that executes (moto used the non-executing
   one), of the type it declares (an Express segment machine was created Standard).
5. moto never reports an execution that ended. As AWS does, each one that ends now puts a "Step
   Functions Execution Status Change" event on its account's default bus, where the rule the stack also
   deploys hands it to the status function (which frees the user's slot and starts what was queued).
   Delivered from moto's worker thread when the execution ends.
6. moto keeps every execution (its worker, its whole history) on its state machine forever, and scans
   them all on each describe and each task token. Each state machine now keeps its running executions
   and the `KEEP_ENDED_EXECUTIONS` that ended last (in the order they ended): a finished mission's
   history stays readable right after it ends (the CLI, tests); an older one answers
   ExecutionDoesNotExist. Lookups iterate a snapshot of the list, so one that runs while another thread
   drops an old execution never skips a live one. And moto's parser appends every worker thread it
   starts (with what its target holds: the execution's environment) to a module list it never reads or
   empties (`TMP_THREADS`); ended ones leave it.
8. moto parses the whole definition (an ANTLR parse, about a fifth of the CPU a mission costs here) at
   each execution's start, builds a boto3 client for each Lambda task and each nested execution's
   call (a segment's start, its polls), and builds a JSONPath parser (its yacc tables) for each path it
   evaluates. The parsed program holds no execution state (that lives in each execution's Environment,
   keyed by component), so one parse per definition serves every execution; the clients and the paths
   are kept the same way (`PARSED_DEFINITIONS` definitions, `JSON_PATHS` paths, the least recently used
   dropped). The kept clients are lean as the emulation's own (missions.local.moto.clients). Parsed
   programs are also kept on disk for the next process (missions.local.moto.parse_cache).
10. Task tokens: moto answers SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat by asking each
   execution's environment whether the token is its own, and an execution that has just started has
   none yet (its worker thread builds it): the call failed with AttributeError (the dev server's answer
   route a 500) whenever another mission was starting at that moment. An execution without an
   environment has issued no token, so it is passed over.
14. `arn:aws:states:::states:startExecution.sync:2` (a mission's Express segments,
   missions.core.pipeline.compiler): moto hands the state's parameters to boto3 as the ASL writes them
   (`StateMachineArn`, where boto3's member is `stateMachineArn`: every call failed with KeyError) and
   hands boto3's response back as is (`executionArn`, where the integration reads `ExecutionArn`, and
   the ASL the result's `Output`). Parameters are renamed to boto3's members and responses to the
   integration's names, as Step Functions does. And it polls the child every half second: a mission
   pays that at each segment's end, so the poll also wakes as soon as the child's end is reported
   (patch 5).
24. `arn:aws:states:::aws-sdk:<service>:<action>` (a segment's heartbeat and report on its mission's task
   token): the ASL names an action's parameters in PascalCase whatever the API's own members are, and
   Step Functions maps them (sfn's are camelCase: `TaskToken` is `taskToken`); moto handed them to boto3
   as written, so every call failed. Each is renamed to the member of the action's input it names.
25. A task that waits on its token with a heartbeat (`HeartbeatSeconds`) sets its heartbeat up only after
   its call returned, so a heartbeat sent before (a segment heartbeats as it starts) was refused as an
   invalid token, and an answer sent before was not heard until the heartbeat ran out (then as a
   timeout). Step Functions takes both at any time: each is kept, and heard when the task waits.
19. moto's interpreter copies a state's data (its input, its result, the context, the value stack) with
   `copy.deepcopy` several times per state, which keeps a memo of every node it copies: about a
   fifth of the CPU a mission costs here. That data is JSON (dicts, lists, strings, numbers, booleans,
   None), which these modules now copy through pickle (a round trip in C keeps every type; a dict or
   list holding something pickle refuses is walked by a plain recursive copy); anything else is deepcopy's.
27. moto's interpreter imports its AWS Batch integration, which imports `moto.batch.utils` for one enum,
   and so `moto.batch`, whose `__init__` imports Batch's models and with them EC2's and ECS's: about
   0.45 s of each process that starts the emulation, for an integration no mission uses. `moto.batch`'s
   `__init__` runs when the package is asked for something of its own (`LazyInit`), as Batch's backend is.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import pickle
import threading
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from missions.local.moto._mechanism import LazyInit, Patch
from missions.local.moto.clients import lean
from missions.local.moto.parse_cache import ParseCache

_log = logging.getLogger(__name__)
KEEP_ENDED_EXECUTIONS = 50  # per state machine (patch 6)
PARSED_DEFINITIONS = 64  # state machine definitions parsed once (patch 8)
PARSE_CACHE = ParseCache()  # and kept on disk between processes (parse_cache)
JSON_PATHS = 4096  # JSONPath expressions compiled once (patch 8)
SEGMENT_POLL_SECONDS = 0.5  # moto's own poll interval, kept as the longest wait between two looks (patch 14)

_MODELS = "moto.stepfunctions.models:StateMachine"
_TASK = "moto.stepfunctions.parser.asl.component.state.exec.state_task"
_SFN_SERVICE = f"{_TASK}.service.state_task_service_sfn:StateTaskServiceSfn"

# -- patch 4: a state machine as CloudFormation creates it -------------------------------------------


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


# -- patch 5: an execution's end, reported ------------------------------------------------------------

_REPORTED: set[str] = set()  # executions whose end was reported
_REPORTED_CHANGED = threading.Condition()


def _terminated(self: Any) -> None:
    """moto's own, then the status-change event AWS would put on the default bus."""
    REPORT_END.original(self)
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


# -- patch 8: what moto redoes for every execution, done once ---------------------------------------


def _parse_once(original: Callable[[str], Any]) -> staticmethod[[str], Any]:
    """moto's static parse, once per definition (the least recently used dropped)."""

    @functools.lru_cache(maxsize=PARSED_DEFINITIONS)
    def parse(definition: str) -> Any:
        program = PARSE_CACHE.load(definition)
        if program is not None:  # moto's callers use the program; the parse tree went unused
            return program, None
        parsed = original(definition)
        _fix_heap_keys(parsed[0])
        PARSE_CACHE.store(definition, parsed[0])
        return parsed

    return staticmethod(parse)


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


class _SharedClients:
    """moto's client for a task, made once per region and service (botocore clients are thread-safe;
    moto's are all alike: fixed fake credentials, no retries, no parameter validation), lean."""

    def __init__(self, made: Callable[..., Any]) -> None:
        self._made = made
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def __call__(self, region: str, service: str, state_credentials: Any = None) -> Any:
        key = (region, service)
        client = self._clients.get(key)
        if client is None:
            with self._lock:
                client = self._clients.get(key)
                if client is None:
                    client = self._clients[key] = lean(self._made(region, service, state_credentials))
        return client


# -- patch 10: task tokens while executions start ----------------------------------------------------


def _executions_with_environment(self: Any, execution_status: Any = None) -> list[Any]:
    """moto's list of executions (which it searches for a task token or a map run), without those still
    starting: one made but not started has no status yet (moto's own filter would read it, and fail the
    task that sent a token), and one whose worker has not built its environment holds no token."""
    found = []
    for machine in self.state_machines:
        for execution in machine.executions:
            if execution.exec_status is None or execution.exec_worker is None or execution.exec_worker.env is None:
                continue
            if execution_status is None or execution_status == execution.status:
                found.append(execution)
    return found


# -- patch 14: the Step Functions startExecution integration ------------------------------------------------


def _sfn_parameters(
    self: Any, parameters: dict[str, Any], boto_service_name: str | None = None, service_action_name: str | None = None
) -> None:
    """moto's normalisation (the input as a JSON string), then the ASL's names as boto3's members."""
    SFN_PARAMETERS.original(self, parameters, boto_service_name, service_action_name)
    for key in list(parameters):
        parameters[key[:1].lower() + key[1:]] = parameters.pop(key)


def _pascal(response: dict[str, Any]) -> None:
    for key in list(response):
        response[key[:1].upper() + key[1:]] = response.pop(key)


def _sfn_response(
    self: Any, response: Any, boto_service_name: str | None = None, service_action_name: str | None = None
) -> None:
    SFN_RESPONSE.original(self, response, boto_service_name, service_action_name)
    if isinstance(response, dict):
        _pascal(response)


def _sfn_submitted(self: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
    """The call, with its response under the integration's names (what the .sync resolvers read)."""
    result = SFN_SUBMITTED.original(self, env, *args, **kwargs)
    if env.stack and isinstance(env.stack[-1], dict):
        _pascal(env.stack[-1])
    return result


def _sfn_sync2_resolver(self: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
    """moto's resolver, which looks once; when the child still runs, it waits for the child's end to be
    reported (at most SEGMENT_POLL_SECONDS) and looks again, instead of moto's fixed half-second sleep."""
    child = env.stack[-1].get("ExecutionArn") if env.stack and isinstance(env.stack[-1], dict) else None
    resolve = SFN_SYNC2_RESOLVER.original(self, env, *args, **kwargs)

    def resolve_when_ended() -> Any:
        result = resolve()
        if result is None and child:
            wait_reported(child, SEGMENT_POLL_SECONDS)
            result = resolve()
        return result

    return resolve_when_ended


STATE_MACHINE_FROM_CFN = Patch(
    _MODELS,
    "create_from_cloudformation_json",
    classmethod(_state_machine_from_cfn),
    "4: moto drops DefinitionSubstitutions, makes every machine Standard, in the backend that never runs it",
)
REPORT_END = Patch(
    "moto.stepfunctions.parser.backend.execution:BaseExecutionWorkerCommunication",
    "terminated",
    _terminated,
    "5: moto never reports an execution's end; AWS puts a status-change event on the default bus",
)
BOUNDED_EXECUTIONS = Patch(
    _MODELS,
    "executions",
    property(_executions, _set_executions),
    "6: moto keeps every execution of a state machine forever; the running and the last ended are kept",
    adds=True,
)
PARSE_ONCE = Patch(
    "moto.stepfunctions.parser.asl.parse.asl_parser:AmazonStateLanguageParser",
    "parse",
    _parse_once,
    "8: moto parses the whole definition at each execution's start; once per definition",
    wraps=True,
)
JSON_PATHS_ONCE = Patch(
    "moto.stepfunctions.parser.asl.utils.json_path",
    "parse",
    functools.lru_cache(maxsize=JSON_PATHS),
    "8: moto builds a JSONPath parser for each path it evaluates; once per path",
    wraps=True,
)
CLIENTS_ONCE = Patch(
    f"{_TASK}.lambda_eval_utils",
    "boto_client_for",
    _SharedClients,
    "8: moto builds a boto3 client for each Lambda task; once per region and service",
    wraps=True,
)
SFN_CLIENTS_ONCE = Patch(
    f"{_TASK}.service.state_task_service_sfn",
    "boto_client_for",
    _SharedClients,
    "8: moto builds a boto3 client for each nested execution's call; once per region and service",
    wraps=True,
)
AWS_SDK_CLIENTS_ONCE = Patch(
    f"{_TASK}.service.state_task_service_aws_sdk",
    "boto_client_for",
    _SharedClients,
    "8: moto builds a boto3 client for each aws-sdk call (a segment's heartbeat, its report); once per region "
    "and service",
    wraps=True,
)
WITH_ENVIRONMENT = Patch(
    "moto.stepfunctions.parser.models:StepFunctionsParserBackend",
    "_get_executions",
    _executions_with_environment,
    "10: moto reads the status and the environment of an execution still starting (it has neither) for each task token",
)
SFN_PARAMETERS = Patch(
    _SFN_SERVICE,
    "_normalise_parameters",
    _sfn_parameters,
    "14: moto hands startExecution's parameters to boto3 under the ASL's names, not boto3's",
)
SFN_RESPONSE = Patch(
    _SFN_SERVICE,
    "_normalise_response",
    _sfn_response,
    "14: moto hands boto3's response back under boto3's names, not the integration's",
)
SFN_SUBMITTED = Patch(
    _SFN_SERVICE,
    "_eval_service_task",
    _sfn_submitted,
    "14: what the .sync resolvers read of the call's response is under the integration's names",
)
SFN_SYNC2_RESOLVER = Patch(
    _SFN_SERVICE,
    "_build_sync2_resolver",
    _sfn_sync2_resolver,
    "14: moto polls a child execution every half second; the poll wakes when the child's end is reported",
)
# -- patch 24: the aws-sdk integration's parameter names ---------------------------------------------


def _aws_sdk_parameters(
    self: Any, parameters: dict[str, Any], boto_service_name: str | None = None, service_action_name: str | None = None
) -> None:
    """moto's normalisation, then each parameter under the name its action's input gives it."""
    AWS_SDK_PARAMETERS.original(self, parameters, boto_service_name, service_action_name)
    members = _input_members(
        boto_service_name or self._get_boto_service_name(), service_action_name or self._get_boto_service_action()
    )
    for key in list(parameters):
        member = members.get(key.lower(), key)
        if member != key:
            parameters[member] = parameters.pop(key)


@functools.lru_cache(maxsize=64)
def _input_members(service: str, action: str) -> dict[str, str]:
    """The members of an action's input by their lower-case names (botocore's model, loaded once: loading
    it lists and reads the service definitions, too slow to do at each call)."""
    import botocore.session
    from botocore import xform_name

    model = botocore.session.get_session().get_service_model(service)
    operation = next(name for name in model.operation_names if xform_name(name) == action)
    shape = model.operation_model(operation).input_shape
    return {name.lower(): name for name in (shape.members if shape is not None else {})}


AWS_SDK_PARAMETERS = Patch(
    f"{_TASK}.service.state_task_service_aws_sdk:StateTaskServiceAwsSdk",
    "_normalise_parameters",
    _aws_sdk_parameters,
    "24: moto hands an aws-sdk action's parameters to boto3 as the ASL writes them (PascalCase)",
)
# -- patch 25: a heartbeat or an answer before the task waits -------------------------------------------

_EARLY = threading.Lock()


def _notify_heartbeat(self: Any) -> bool:
    """A heartbeat for the token: heard now, or kept until the task sets its heartbeat up (a task without
    one takes it, as Step Functions does, and ignores it)."""
    with _EARLY:
        if self._heartbeat_endpoint is None:
            self._heard_early = True
            return True
    self._heartbeat_endpoint.notify()
    return True


def _setup_heartbeat_endpoint(self: Any, heartbeat_seconds: int) -> Any:
    """moto's heartbeat, already notified when a heartbeat or the answer came before it."""
    with _EARLY:
        endpoint = SETUP_HEARTBEAT.original(self, heartbeat_seconds=heartbeat_seconds)
        if getattr(self, "_heard_early", False) or self._outcome is not None:
            endpoint.notify()
    return endpoint


_CALLBACK = "moto.stepfunctions.parser.asl.eval.callback.callback:CallbackEndpoint"
EARLY_HEARTBEAT = Patch(
    _CALLBACK,
    "notify_heartbeat",
    _notify_heartbeat,
    "25: moto refuses a heartbeat that comes before the task has set its heartbeat up",
)
SETUP_HEARTBEAT = Patch(
    _CALLBACK,
    "setup_heartbeat_endpoint",
    _setup_heartbeat_endpoint,
    "25: moto does not hear a heartbeat or an answer that came before the task set its heartbeat up",
)
_JSON_ATOMS = frozenset({str, int, float, bool, type(None)})


def _copy_json(value: Any, memo: Any = None) -> Any:
    """A deep copy of JSON data: a state's whole dict or list through pickle (in C, about 2.5 times as fast
    as walking it in Python; the types are kept exactly), else by plain recursion (no memo: JSON has no
    cycles, and a value met twice is copied twice, equal); whatever is not JSON is copied by `copy.deepcopy`."""
    kind = type(value)
    if kind is dict or kind is list:
        try:
            return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # something in it pickle cannot copy: walked, as before
            return _walked_copy(value, memo)
    if kind in _JSON_ATOMS:
        return value
    return copy.deepcopy(value, memo)


def _walked_copy(value: Any, memo: Any = None) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _walked_copy(item) for key, item in value.items()}
    if kind is list:
        return [_walked_copy(item) for item in value]
    if kind in _JSON_ATOMS:
        return value
    return copy.deepcopy(value, memo)


def _copy_module() -> types.ModuleType:
    """What the interpreter's modules see as `copy`: the standard module, with JSON copied plainly."""
    module = types.ModuleType("copy", "copy, with JSON data copied plainly (missions.local.moto patch 19)")
    module.__dict__.update({name: getattr(copy, name) for name in ("copy", "Error")})
    module.deepcopy = _copy_json  # type: ignore[attr-defined]
    return module


_PLAIN_COPY = _copy_module()
_ASL = "moto.stepfunctions.parser.asl"
PLAIN_JSON_COPIES = tuple(
    Patch(f"{_ASL}.{module}", "copy", _PLAIN_COPY, "19: moto deep-copies a state's JSON data with deepcopy's memo")
    for module in (
        "eval.states",
        "eval.environment",
        "component.common.path.result_path",
        "component.common.string.string_expression",
        "component.state.exec.execute_state",
        "component.state.exec.state_task.service.state_task_service",
    )
)
PATCHES = (
    STATE_MACHINE_FROM_CFN,
    REPORT_END,
    BOUNDED_EXECUTIONS,
    PARSE_ONCE,
    JSON_PATHS_ONCE,
    CLIENTS_ONCE,
    SFN_CLIENTS_ONCE,
    AWS_SDK_CLIENTS_ONCE,
    WITH_ENVIRONMENT,
    SFN_PARAMETERS,
    SFN_RESPONSE,
    SFN_SUBMITTED,
    SFN_SYNC2_RESOLVER,
    AWS_SDK_PARAMETERS,
    EARLY_HEARTBEAT,
    SETUP_HEARTBEAT,
    *PLAIN_JSON_COPIES,
)
BATCH_UNLOADED = LazyInit(
    "moto.batch",
    "27: moto's Batch integration imports moto.batch for an enum; its __init__ loads EC2's and ECS's models",
)
LAZY = (BATCH_UNLOADED,)
