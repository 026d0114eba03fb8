"""AWS on a laptop: moto with Step Functions execution, the real handlers called in-process.

Resources come from the same specs the CDK stack deploys (missions.core.specs) and the state
machines from the same compiler output, so what runs here is what runs in AWS.
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import os
import shutil
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from missions.adapters.dynamodb.tables import table_definition, time_to_live
from missions.app.runtime import Runtime
from missions.core.capability import registry as capability_registry
from missions.core.llm.provider import LLMProvider
from missions.core.mission.envelope import Envelope, InterruptResponse
from missions.core.mission.events import Event
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import TERMINAL as ENDED
from missions.core.pipeline.compiler import MissionMachines, compile_mission, compile_pipeline, placeholders
from missions.core.settings import RuntimeSettings
from missions.core.specs import (
    INTERRUPT_FUNCTION,
    REPOSITORY_IMPORT_PATTERN,
    SERVICE_FUNCTIONS,
    STAGE_FUNCTION,
    TABLES,
    FunctionSpec,
    execution_ended_pattern,
    segment_machine_name,
    stage_function_name,
    state_machine_name,
)
from missions.local import moto as moto_patches
from missions.local.moto.clients import lean
from missions.ports.missions import MissionRecord
from missions.service.checkpoints import with_earlier_outputs
from missions.service.interrupts import waiting_question

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions.type_defs import HistoryEventTypeDef

REGION = "us-east-1"
ACCOUNT = "123456789012"
FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",  # DynamoDB Streams reads with current botocore
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",  # EMF goes to stdout in Lambda; here that is the CLI's output
}
_RUNNING: set[str] = set()  # prefixes of the emulations running in this process
REPORT_WAIT_SECONDS = 10.0  # at close, for ended executions whose end is still being delivered
_RUNNING_LOCK = threading.Lock()
TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}


@dataclass
class MissionOutcome:
    mission_id: str
    status: str  # the execution's status
    envelope: Envelope | None
    error: str | None = None
    cause: str | None = None


class LocalCloud:
    """Use as a context manager; everything lives in memory and vanishes on exit."""

    def __init__(
        self,
        capabilities: list[str] | None = None,
        *,
        llm: LLMProvider | None = None,
        prefix: str = "missions-local",
        offload_threshold: int | None = None,
        settings: dict[str, Any] | None = None,
        on_timings: Any = None,
        registry: capability_registry.Registry | None = None,
        single_level: bool = False,
        clients: dict[str, Any] | None = None,
    ):
        """`registry`: where the capabilities are found (default: the installed ones; tests add theirs).
        `clients`: model clients the runtime uses instead of making its own, by the name the composition
        root looks them up by ("bedrock-runtime", "bedrock", "anthropic-http"): tests serve recorded answers.
        `single_level`: every mission on one Standard machine, as a pipeline whose stages do not fit a
        segment deploys (the bench compares the two layouts with it)."""
        self.registry = registry or capability_registry.default_registry()
        self.single_level = single_level
        # and the capabilities theirs delegate to: a sub-mission needs its own state machine
        self.capabilities = self.registry.with_delegates(capabilities) if capabilities else self.registry.available()
        self.prefix = prefix
        self._llm = llm
        self._on_timings = on_timings
        self._model_clients = dict(clients or {})
        self._settings_overrides = dict(settings or {})
        if offload_threshold:
            self._settings_overrides["offload_threshold"] = offload_threshold
        self._mock: Any = None
        self._saved_env: dict[str, str | None] = {}
        self.functions: dict[str, str] = {}  # function name -> arn
        self.state_machines: dict[str, str] = {}  # capability -> arn
        self.segment_machines: dict[str, str] = {}  # capability -> arn of its Express segment machine
        self._executions: dict[str, str] = {}  # mission id -> execution arn
        self._workspace: str | None = None
        self._entered = False

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> LocalCloud:
        """Start moto and provision; a start that fails part-way is undone (its mock stopped), so the next
        emulation in this process starts clean. Two emulations at once share moto's one account: they need
        different prefixes, and the second is refused with that reason rather than failing on a name."""
        with _RUNNING_LOCK:
            if self.prefix in _RUNNING:
                raise RuntimeError(
                    f"an emulation with prefix '{self.prefix}' already runs in this process: give this one another "
                    "prefix (LocalCloud(prefix=...)) or use the running one"
                )
            _RUNNING.add(self.prefix)
        self._entered = True
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> LocalCloud:
        for key, value in FAKE_ENV.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        from moto import mock_aws

        moto_patches.install()  # before moto starts (and imports its backends): see patch 9
        self._mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
        self._mock.start()
        import boto3

        self.dynamodb = lean(boto3.client("dynamodb", region_name=REGION))
        self.s3 = boto3.client("s3", region_name=REGION)
        self.sfn = lean(boto3.client("stepfunctions", region_name=REGION))
        self.lambda_ = lean(boto3.client("lambda", region_name=REGION))
        self.iam = boto3.client("iam", region_name=REGION)
        self.events_client = boto3.client("events", region_name=REGION)
        self.sns = boto3.client("sns", region_name=REGION)
        self.scheduler = boto3.client("scheduler", region_name=REGION)
        # as `missions dev` defaults: the directory it started in is a root, and git imports may come from it
        overrides = {
            "repo_roots": [os.getcwd()],
            "local_git_sources": True,
            "mcp_stdio": True,  # capabilities' MCP servers run as child processes here, as on the dev server
            **self._settings_overrides,
        }
        if "workspace_dir" not in overrides:  # snapshots unpacked by this emulation's stages, removed with it
            self._workspace = tempfile.mkdtemp(prefix="missions-workspace-")
            overrides["workspace_dir"] = self._workspace
        # by setting name: mypy would hold a dict[str, str] against every field's type
        tables: dict[str, Any] = {f"{spec.id}_table": f"{self.prefix}-{spec.id}" for spec in TABLES}
        self.settings = RuntimeSettings(
            **tables,
            blob_bucket=f"{self.prefix}-blobs",
            snapshot_bucket=f"{self.prefix}-snapshots",
            event_bus=f"{self.prefix}-bus",
            notifications_topic=f"arn:aws:sns:{REGION}:{ACCOUNT}:{self.prefix}-notifications",
            # users' schedules: the group, the schedule function's ARN and the role, as _provision makes them
            schedule_group=f"{self.prefix}-user-schedules",
            schedule_target_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.prefix}-schedule",
            scheduler_role_arn=f"arn:aws:iam::{ACCOUNT}:role/{self.prefix}-scheduler",
            state_machine_arns={
                name: f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{state_machine_name(self.prefix, name)}"
                for name in self.capabilities
            },
            **overrides,
        )
        self.runtime = Runtime(
            self.settings,
            clients={
                "dynamodb": self.dynamodb,
                "s3": self.s3,
                "stepfunctions": self.sfn,
                "events": self.events_client,
                "sns": self.sns,
                "scheduler": self.scheduler,
                **self._model_clients,
            },
            llm=self._llm,
            on_timings=self._on_timings,
            capabilities=self.registry,
        )
        self._provision()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._mock is not None:
            self.settle()
        if self._entered:
            with _RUNNING_LOCK:
                _RUNNING.discard(self.prefix)
            self._entered = False
        if self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)
            self._workspace = None
        runtime = getattr(self, "runtime", None)
        if runtime is not None and "mcp_tools" in vars(runtime):  # opened by a stage: its servers end with us
            runtime.mcp_tools.close()
        for name in self.functions:
            moto_patches.unregister(name)
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def settle(self, timeout: float = REPORT_WAIT_SECONDS) -> None:
        """Wait until each execution that ended has been reported (patch 5 hands its end to the status
        function, in moto's thread, which frees the user's slot and sends the notice). Stopping moto under
        that delivery failed it, with a traceback on the CLI's stderr, and left the slot taken; a reader
        who compares stores needs them quiet. Executions still running are not waited for."""
        deadline = time.monotonic() + timeout
        for machine in self.state_machines.values():
            try:
                listed = self.sfn.list_executions(stateMachineArn=machine)["executions"]
            except Exception:  # the emulation is being torn down anyway: nothing more to wait for
                return
            for execution in listed:
                if execution["status"] in ("SUCCEEDED", "FAILED", "TIMED_OUT"):  # a stopped one reports no end
                    moto_patches.wait_reported(execution["executionArn"], max(0.0, deadline - time.monotonic()))

    # -- provisioning from the shared specs ------------------------------------------------

    def _provision(self) -> None:
        for spec in TABLES:
            name = getattr(self.settings, f"{spec.id}_table")
            self.dynamodb.create_table(**table_definition(spec, name))
            ttl = time_to_live(spec, name)
            if ttl:
                self.dynamodb.update_time_to_live(**ttl)
        self.s3.create_bucket(Bucket=self.settings.blob_bucket)
        self.sns.create_topic(Name=f"{self.prefix}-notifications")  # email notices (none leave the emulation)
        # users' schedules: moto keeps them (it never fires them: the dev server's clock does, see DevServer)
        assert self.settings.schedule_group
        self.scheduler.create_schedule_group(Name=self.settings.schedule_group)
        self.iam.create_role(
            RoleName=f"{self.prefix}-scheduler",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "scheduler.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )
        assert self.settings.snapshot_bucket
        self.s3.create_bucket(Bucket=self.settings.snapshot_bucket)
        role = self.iam.create_role(
            RoleName=f"{self.prefix}-role",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        self._role = role
        interrupt_arn = self._function(f"{self.prefix}-interrupt", INTERRUPT_FUNCTION, 128)
        for name in self.capabilities:
            capability = self.registry.load(name)
            substitutions = {"fn_interrupt": interrupt_arn}
            for agent in capability.pipeline.agents:
                function = stage_function_name(self.prefix, name, agent.name)
                substitutions[f"fn_{agent.name}"] = self._function(function, STAGE_FUNCTION, agent.memory_mb)
            missing = set(placeholders(capability.pipeline)) - set(substitutions) - {"segment"}
            assert not missing, missing  # the segment machine's ARN is known once it is created, below
            machines = compile_mission(capability.pipeline)
            if self.single_level:
                machines = MissionMachines(mission=compile_pipeline(capability.pipeline), segment=None)
            if machines.segment is not None:  # the Express machine first: the mission's names it
                substitutions["segment"] = self.segment_machines[name] = self.sfn.create_state_machine(
                    name=segment_machine_name(self.prefix, name),
                    definition=_substituted(machines.segment, substitutions),
                    roleArn=role,
                    type="EXPRESS",
                )["stateMachineArn"]
            self.state_machines[name] = self.sfn.create_state_machine(
                name=state_machine_name(self.prefix, name),
                definition=_substituted(machines.mission, substitutions),
                roleArn=role,
            )["stateMachineArn"]
        self._provision_triggers()

    def _provision_triggers(self) -> None:
        """The event bus, a rule per webhook and memory trigger, and the memory table's stream."""
        from missions.core.triggers.specs import memory_rules, webhook_rules

        bus, memory_table = self.settings.event_bus, self.settings.memory_table
        assert bus and memory_table, "__enter__ names the bus and every table"
        functions = {spec.id: self._function(f"{self.prefix}-{spec.id}", spec, 256) for spec in SERVICE_FUNCTIONS}
        self.events_client.create_event_bus(Name=bus)
        capabilities = [self.registry.load(name) for name in self.capabilities]
        for rule in webhook_rules(capabilities) + memory_rules(capabilities):
            self.events_client.put_rule(Name=rule.name, EventBusName=bus, EventPattern=json.dumps(rule.event_pattern))
            self.events_client.put_targets(
                Rule=rule.name,
                EventBusName=bus,
                Targets=[{"Id": "trigger", "Arn": functions["trigger"]}],
            )
        self.events_client.put_rule(
            Name=f"{self.prefix}-repository-import",
            EventBusName=bus,
            EventPattern=json.dumps(REPOSITORY_IMPORT_PATTERN),
        )
        self.events_client.put_targets(
            Rule=f"{self.prefix}-repository-import",
            EventBusName=bus,
            Targets=[{"Id": "import", "Arn": functions["repository-import"]}],
        )
        self.events_client.put_rule(  # on the default bus, where Step Functions reports ended executions
            Name=f"{self.prefix}-execution-ended",
            EventPattern=json.dumps(execution_ended_pattern(list(self.state_machines.values()))),
        )
        self.events_client.put_targets(
            Rule=f"{self.prefix}-execution-ended", Targets=[{"Id": "status", "Arn": functions["status"]}]
        )
        stream = self.dynamodb.describe_table(TableName=memory_table)["Table"]["LatestStreamArn"]
        self.lambda_.create_event_source_mapping(
            EventSourceArn=stream, FunctionName=functions["memory-stream"], StartingPosition="LATEST", BatchSize=10
        )

    def _function(self, name: str, spec: FunctionSpec, memory: int) -> str:
        arn = self.lambda_.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=self._role,
            Handler=spec.handler,
            Code={"ZipFile": _placeholder_zip()},
            MemorySize=memory,
            Timeout=300,
        )["FunctionArn"]
        self.functions[name] = arn

        def build() -> moto_patches.Handler:
            handler = getattr(importlib.import_module(spec.module), spec.attribute)
            return functools.partial(handler, runtime=self.runtime)

        # imported when first invoked: the API's handler alone costs ~0.2 s, and a `missions run` never calls it
        moto_patches.register(name, moto_patches.Deferred(build))
        return arn

    # -- missions ----------------------------------------------------------------------

    def start(
        self,
        capability: str,
        goal: str,
        *,
        context: dict[str, Any] | None = None,
        user_id: str = "local",
        bounds: dict[str, Any] | None = None,
        mission_id: str | None = None,
        priority: str = "medium",
    ) -> str:
        """Submit a mission through the launcher, as every trigger does: it starts now, or queues
        behind the user's running missions (see `wait`). MissionRequestError when it cannot run."""
        request = MissionRequest.parse(
            capability=capability,
            goal=goal,
            user_id=user_id,
            context=context or {},
            bounds=bounds or {},
            mission_id=mission_id,
            priority=priority,
            trigger="cli",
        )
        return self.runtime.launcher.submit(request).mission_id

    def execution_arn(self, mission_id: str) -> str:
        """The mission's execution; a queued mission has none yet (`wait` waits for it to start)."""
        # cached: polling the mission's item while its stages update it races inside moto,
        # whose DynamoDB is not thread-safe (a read can see the item's dict change size)
        arn = self._executions.get(mission_id)
        if arn is None:
            arn = self.runtime.missions.get(mission_id).execution_arn
            if not arn:
                raise LookupError(f"mission {mission_id} has not started")
            self._executions[mission_id] = arn
        return arn

    def status(self, mission_id: str) -> str:
        """The execution's status, or QUEUED while the mission waits for a slot (or ENDED when it was
        cancelled or failed before it ever started)."""
        try:
            arn = self.execution_arn(mission_id)
        except LookupError:
            record = self._read(mission_id)
            if record is not None and record.status in ENDED and not record.execution_arn:
                return "NEVER_STARTED"
            return "QUEUED"
        return str(self.sfn.describe_execution(executionArn=arn)["status"])

    def wait(self, mission_id: str, timeout: float = 120.0, until_interrupt: bool = False) -> str:
        """Poll until the execution ends (or, optionally, until it waits for a human); a queued mission
        is waited for through its start."""
        deadline = time.monotonic() + timeout
        status = "QUEUED"
        while time.monotonic() < deadline:
            status = self.status(mission_id)
            if status in TERMINAL:  # and once Step Functions reported it, as the status function hears it
                if not moto_patches.wait_reported(
                    self.execution_arn(mission_id), max(0.0, deadline - time.monotonic())
                ):
                    break
                return status
            if status == "NEVER_STARTED":
                return status
            if until_interrupt and self._shows_interrupt(mission_id):
                return "INTERRUPTED"
            time.sleep(0.02)
        raise TimeoutError(f"mission {mission_id} still {status} after {timeout}s")

    def _read(self, mission_id: str) -> MissionRecord | None:
        try:
            return self.runtime.missions.get(mission_id)
        except RuntimeError:  # moto's item changed while it was read: look again on the next poll
            return None

    def _shows_interrupt(self, mission_id: str) -> bool:
        """A question for its user, as the API shows it: the interrupt handler records the question, then
        marks the mission (wait for both); a mission waiting on a sub-mission waits on no one."""
        record = self._read(mission_id)
        return record is not None and waiting_question(self.runtime.interrupts, record) is not None

    def outcome(self, mission_id: str) -> MissionOutcome:
        try:
            arn = self.execution_arn(mission_id)
        except LookupError:  # cancelled or refused before it ever started
            record = self.runtime.missions.get(mission_id)
            return MissionOutcome(mission_id, "NEVER_STARTED", None, record.status, record.terminal_reason)
        described = self.sfn.describe_execution(executionArn=arn)
        if described["status"] == "RUNNING":
            recorded = self._read(mission_id)
            if recorded is not None and recorded.status in ENDED:
                # the final stage recorded the end; the execution ends a moment later (its segment hands back)
                self.wait(mission_id, timeout=30)
                described = self.sfn.describe_execution(executionArn=arn)
        envelope = None
        if described.get("output"):
            envelope = self.runtime.codec.decode(json.loads(described["output"])["envelope"])
        return MissionOutcome(mission_id, described["status"], envelope, described.get("error"), described.get("cause"))

    def outputs(self, mission_id: str) -> dict[str, Any]:
        """Every stage's output as it was last written, from the mission's checkpoints: the envelope drops
        an output once no later stage reads it (missions.core.capability.liveness)."""
        latest = self.runtime.checkpoints.latest(mission_id)
        if latest is None:
            return {}
        state = with_earlier_outputs(self.runtime.checkpoints, mission_id, latest.checkpoint_id)
        return self.runtime.codec.decode(state).outputs

    def run(self, capability: str, goal: str, timeout: float = 120.0, **kwargs: Any) -> MissionOutcome:
        mission_id = self.start(capability, goal, **kwargs)
        self.wait(mission_id, timeout)
        return self.outcome(mission_id)

    def answer(self, mission_id: str, interrupt_id: str, response: InterruptResponse | dict[str, Any]) -> None:
        """Answer as a user would: the mission resumes when its user has a running slot for it."""
        self.runtime.interrupt_service.answer(mission_id, interrupt_id, response)

    def events(self, mission_id: str, after: str | None = None) -> tuple[list[Event], str | None]:
        return self.runtime.events.read(mission_id, after=after, limit=500)

    def history(self, mission_id: str, *, segments: bool = True) -> list[HistoryEventTypeDef]:
        """The mission's execution history; with `segments`, each Express segment's history follows the
        event that started it (the mission's timeline as the two levels ran it)."""
        events = self.execution_history(self.execution_arn(mission_id))
        if not segments:
            return events
        started = iter(self.segments(mission_id))
        timeline: list[HistoryEventTypeDef] = []
        for event in events:
            timeline.append(event)
            if (
                event["type"] == "TaskStateEntered"
                and event.get("stateEnteredEventDetails", {}).get("name") == "segment"
            ):
                segment = next(started, None)
                if segment is not None:
                    timeline += self.execution_history(segment["executionArn"])
        return timeline

    def segments(self, mission_id: str) -> list[dict[str, Any]]:
        """The mission's Express segments (DescribeExecution of each), in the order they started."""
        arn = self.execution_arn(mission_id)
        machine = arn.split(":")[-2]
        capability = next((c for c, m in self.state_machines.items() if m.rsplit(":", 1)[-1] == machine), None)
        segment_machine = self.segment_machines.get(capability or "")
        if segment_machine is None:
            return []
        found: list[dict[str, Any]] = []
        pages = self.sfn.get_paginator("list_executions").paginate(stateMachineArn=segment_machine)
        for page in pages:
            for execution in page["executions"]:
                if execution["name"].startswith(f"{mission_id}-"):
                    found.append(dict(self.sfn.describe_execution(executionArn=execution["executionArn"])))
        return sorted(found, key=lambda e: e["startDate"])

    def execution_history(self, arn: str) -> list[HistoryEventTypeDef]:
        pages: list[HistoryEventTypeDef] = []
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            pages += page["events"]
            if not page.get("nextToken"):
                return pages
            kwargs["nextToken"] = page["nextToken"]

    def largest_state_bytes(self, mission_id: str) -> int:
        """The biggest state any Step Functions state entered or left with in this execution."""
        largest = 0
        for event in self.history(mission_id):
            for details in event.values():
                if isinstance(details, dict):
                    for key in ("input", "output"):
                        if isinstance(details.get(key), str):
                            largest = max(largest, len(details[key].encode()))
        return largest

    def iter_states(self, mission_id: str) -> Iterator[str]:
        for event in self.history(mission_id):
            if event["type"].endswith("StateEntered"):
                yield next(v for v in event.values() if isinstance(v, dict))["name"]


def _substituted(definition: dict[str, Any], substitutions: dict[str, str]) -> str:
    text = json.dumps(definition)
    for key, value in substitutions.items():
        text = text.replace("${" + key + "}", value)
    return text


@functools.lru_cache(maxsize=1)
def _placeholder_zip() -> bytes:
    """moto wants a code package; the handler really runs in-process from functions/."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "handler.py", "def lambda_handler(event, context):\n    raise RuntimeError('runs in-process')\n"
        )
    return buffer.getvalue()
