"""Deploy a synthesized CDK template into moto's CloudFormation and run its functions in-process.

What `cdk deploy` would need from a bootstrapped account is emulated: the bootstrap version
parameter and the asset bucket holding every asset zipped as the CLI would. Each deployed
function then runs its real handler with a Runtime built from *its own deployed environment
variables* and its own boto3 session, whose calls are recorded, so a test can check them
against the role the template gave that function.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib
import io
import json
import re
import time
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from missions.app.runtime import Runtime
from missions.core.settings import RuntimeSettings
from missions.core.specs import (
    DEPLOY_FUNCTION,
    INTERRUPT_FUNCTION,
    SERVICE_FUNCTIONS,
    STAGE_FUNCTION,
    STREAM_FUNCTION,
    FunctionSpec,
)
from missions.local import moto as moto_patches

REGION = "us-east-1"
ACCOUNT = "123456789012"
BOOTSTRAP_BUCKET = f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}"
SPECS = {
    f"missions-{spec.id}": spec
    for spec in (STAGE_FUNCTION, INTERRUPT_FUNCTION, STREAM_FUNCTION, DEPLOY_FUNCTION, *SERVICE_FUNCTIONS)
}
CREATE_TIMEOUT_SECONDS = 120  # the deploy-time custom resource replies from a thread of its own


@dataclass(frozen=True)
class Call:
    function: str  # the deployed function's name
    service: str
    operation: str
    params: dict[str, Any]


@dataclass
class Deployment:
    stack_name: str
    outputs: dict[str, str]
    functions: dict[str, dict[str, Any]]  # name -> configuration
    state_machines: dict[str, str]  # name -> arn: a mission's (Standard) machine per capability
    segment_machines: dict[str, str] = field(default_factory=dict)  # name -> arn: where their stages run (Express)
    calls: list[Call] = field(default_factory=list)
    runtimes: dict[str, Runtime] = field(default_factory=dict)

    def function_named(self, service_name: str) -> str:
        """The one deployed function whose POWERTOOLS_SERVICE_NAME is `service_name`."""
        found = [n for n, c in self.functions.items() if _environment(c).get("POWERTOOLS_SERVICE_NAME") == service_name]
        assert len(found) == 1, f"{service_name}: {found}"
        return found[0]

    def calls_by_function(self) -> dict[str, list[Call]]:
        grouped: dict[str, list[Call]] = defaultdict(list)
        for call in self.calls:
            grouped[call.function].append(call)
        return grouped


def emulate_bootstrap(session: Any, assembly: Path, stack_name: str) -> None:
    """The SSM version parameter and the asset bucket with every file asset of the stack, and the public
    layers its functions name (see `emulate_public_layers`)."""
    session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    s3 = session.client("s3")
    s3.create_bucket(Bucket=BOOTSTRAP_BUCKET)
    manifest = json.loads((assembly / f"{stack_name}.assets.json").read_text())
    for asset in manifest["files"].values():
        source = assembly / asset["source"]["path"]
        key = next(iter(asset["destinations"].values()))["objectKey"]
        body = _zip(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
        s3.put_object(Bucket=BOOTSTRAP_BUCKET, Key=key, Body=body)
    emulate_public_layers(session, (assembly / f"{stack_name}.template.json").read_text())


# a layer version of another account, as the synthesized template writes its ARN (partition and region are
# CloudFormation references between the quoted parts)
_PUBLIC_LAYER = re.compile(r'":(\d{12}):layer:([A-Za-z0-9_-]+):(\d+)"')


def emulate_public_layers(session: Any, template: str) -> None:
    """Layers another account publishes (the Lambda Web Adapter's, AWS's), at the versions the template
    names. In AWS every account may attach them; moto finds a function's layer by name and version in the
    function's own account only, so each is published there until it has that version."""
    lambda_ = session.client("lambda")
    for account, name, version in sorted(set(_PUBLIC_LAYER.findall(template))):
        if account == ACCOUNT:
            continue
        published = 0
        while published < int(version):
            published = lambda_.publish_layer_version(
                LayerName=name, Description=f"stands in for {account}'s", Content={"ZipFile": _zip_bytes()}
            )["Version"]


def deploy(session: Any, assembly: Path, stack_name: str, session_factory: Any = None) -> Deployment:
    """create_stack with the synthesized template; fails with the stack's reason if it does not complete.

    A function CloudFormation invokes while it creates the stack (a custom resource's) runs its real
    handler on a session of `session_factory`, its calls recorded like every other function's."""
    calls: list[Call] = []
    runtimes: dict[str, Runtime] = {}
    if session_factory is not None:
        moto_patches.resolve_with(functools.partial(_resolve, calls, runtimes, session_factory))
    cloudformation = session.client("cloudformation")
    try:
        cloudformation.create_stack(
            StackName=stack_name,
            TemplateBody=(assembly / f"{stack_name}.template.json").read_text(),
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
        )
        stack = _created(cloudformation, stack_name)
    finally:
        moto_patches.resolve_with(None)
    lambda_ = session.client("lambda")
    functions = {}
    for page in lambda_.get_paginator("list_functions").paginate():
        functions.update({f["FunctionName"]: f for f in page["Functions"]})
    listed = session.client("stepfunctions").list_state_machines()["stateMachines"]
    machines = {m["name"]: m["stateMachineArn"] for m in listed if m.get("type", "STANDARD") == "STANDARD"}
    segments = {m["name"]: m["stateMachineArn"] for m in listed if m.get("type") == "EXPRESS"}
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    return Deployment(stack_name, outputs, functions, machines, segments, calls=calls, runtimes=runtimes)


def _created(cloudformation: Any, stack_name: str) -> dict[str, Any]:
    """The stack once CloudFormation is done creating it (its custom resources have replied)."""
    deadline = time.monotonic() + CREATE_TIMEOUT_SECONDS
    while True:
        stack: dict[str, Any] = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
        if stack["StackStatus"] != "CREATE_IN_PROGRESS" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if stack["StackStatus"] != "CREATE_COMPLETE":
        events = cloudformation.describe_stack_events(StackName=stack_name)["StackEvents"]
        reasons = [e.get("ResourceStatusReason") for e in events if "FAILED" in e.get("ResourceStatus", "")]
        raise AssertionError(f"{stack_name}: {stack['StackStatus']}: {reasons}")
    return stack


def _resolve(
    calls: list[Call], runtimes: dict[str, Runtime], session_factory: Any, name: str, environment: dict[str, str]
) -> Any:
    """The handler of a function invoked during the deploy, with a Runtime of its own environment."""
    spec = SPECS.get(environment.get("POWERTOOLS_SERVICE_NAME", ""))
    if spec is None:
        return None
    runtimes[name] = _runtime(name, environment, session_factory, calls, stage_llm=None)
    return functools.partial(_call, spec, runtime=runtimes[name])


def run_in_process(
    deployment: Deployment, session_factory: Any, clients: dict[str, Any] | None = None, stage_llm: Any = None
) -> None:
    """Register every deployed function's real handler, each with a Runtime of its own environment;
    `stage_llm`: the model the stage functions ask (a test's recording of the offline model)."""
    for name, configuration in deployment.functions.items():
        environment = _environment(configuration)
        spec = SPECS[environment["POWERTOOLS_SERVICE_NAME"]]
        runtime = _runtime(name, environment, session_factory, deployment.calls, stage_llm)
        deployment.runtimes[name] = runtime
        moto_patches.register(name, functools.partial(_call, spec, runtime=runtime))


def _runtime(
    name: str, environment: dict[str, str], session_factory: Any, calls: list[Call], stage_llm: Any
) -> Runtime:
    session = session_factory()
    session.events.register("before-parameter-build", functools.partial(_record, calls, name))
    return Runtime(
        RuntimeSettings.from_env(environment),
        clients={name: session.client(name) for name in ("dynamodb", "s3", "stepfunctions", "events", "scheduler")},
        secrets=_SessionSecrets(session),
        llm=stage_llm if environment.get("MISSIONS_CAPABILITY") else None,
        deployment_replies=moto_patches.CloudFormationReplies(),
    )


class _SessionSecrets:
    """The SecretReader port on the function's own session, so its role is checked like its other calls."""

    def __init__(self, session: Any):
        self._session = session

    def read(self, secret_id: str) -> str:
        return str(self._session.client("secretsmanager").get_secret_value(SecretId=secret_id)["SecretString"])


def stop(deployment: Deployment) -> None:
    for name in deployment.functions:
        moto_patches.unregister(name)


# --------------------------------------------------------------------------- IAM


@dataclass(frozen=True)
class Need:
    action: str
    resource: str | None  # None: the action is checked but not its resource (task tokens name none)


def needs(call: Call) -> list[Need]:
    """The IAM actions and resources an AWS call is authorized against."""
    p = call.params
    if call.service == "dynamodb":
        return _dynamodb_needs(call.operation, p)
    if call.service == "s3":
        if call.operation == "ListObjectsV2":
            return [Need("s3:ListBucket", f"arn:aws:s3:::{p['Bucket']}")]
        if call.operation == "DeleteObjects":
            return [Need("s3:DeleteObject", f"arn:aws:s3:::{p['Bucket']}/{o['Key']}") for o in p["Delete"]["Objects"]]
        action = {"HeadObject": "GetObject"}.get(call.operation, call.operation)
        return [Need(f"s3:{action}", f"arn:aws:s3:::{p['Bucket']}/{p['Key']}")]
    if call.service == "stepfunctions":
        if call.operation == "StartExecution":
            return [Need("states:StartExecution", p["stateMachineArn"])]
        if call.operation in ("StopExecution", "DescribeExecution"):
            return [Need(f"states:{call.operation}", p["executionArn"])]
        return [Need(f"states:{call.operation}", None)]
    if call.service == "events" and call.operation == "PutEvents":
        return [Need("events:PutEvents", _bus_arn(entry.get("EventBusName", "default"))) for entry in p["Entries"]]
    if call.service == "events" and call.operation == "DescribeEventBus":
        return [Need("events:DescribeEventBus", _bus_arn(p.get("Name", "default")))]
    if call.service == "scheduler" and "Name" in p:
        schedule = f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/{p.get('GroupName', 'default')}/{p['Name']}"
        found = [Need(f"scheduler:{call.operation}", schedule)]
        if "Target" in p:  # the Scheduler assumes the target's role: whoever names it must pass it
            found.append(Need("iam:PassRole", p["Target"]["RoleArn"]))
        return found
    if call.service == "secretsmanager":
        return [Need(f"secretsmanager:{call.operation}", None)]
    return [Need(f"{call.service}:{call.operation}", None)]


def allowed(need: Need, statements: list[dict[str, Any]]) -> bool:
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = _list(statement.get("Action"))
        resources = _list(statement.get("Resource"))
        if not any(fnmatch.fnmatchcase(need.action.lower(), a.lower()) for a in actions):
            continue
        if need.resource is None or any(fnmatch.fnmatchcase(need.resource, r) for r in resources):
            return True
    return False


def role_statements(session: Any, role_arn: str) -> list[dict[str, Any]]:
    """Every Allow statement of the role's inline policies (the stack attaches no managed ones)."""
    iam = session.client("iam")
    role = role_arn.rsplit("/", 1)[1]
    assert not iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"], f"{role} has managed policies"
    statements = []
    for policy in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role, PolicyName=policy)["PolicyDocument"]
        document = json.loads(document) if isinstance(document, str) else document
        statements += _list(document["Statement"])
    return statements


# --------------------------------------------------------------------------- helpers


def _call(spec: FunctionSpec, event: dict[str, Any], context: Any, *, runtime: Runtime) -> Any:
    """The function's real handler, imported when it is first invoked (a deployment registers every
    function; a test invokes the few it needs)."""
    handler = getattr(importlib.import_module(spec.module), spec.attribute)
    return handler(event, context, runtime=runtime)


def _environment(configuration: dict[str, Any]) -> dict[str, str]:
    return configuration.get("Environment", {}).get("Variables", {})


def _record(calls: list[Call], function: str, params: dict[str, Any], model: Any, **_: Any) -> None:
    calls.append(Call(function, model.service_model.service_name, model.name, params))


def _zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README", "a public layer, played")
    return buffer.getvalue()


def _zip(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder))
    return buffer.getvalue()


def table_arn(name: str, index: str | None = None) -> str:
    arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
    return f"{arn}/index/{index}" if index else arn


def _bus_arn(name_or_arn: str) -> str:
    return (
        name_or_arn if name_or_arn.startswith("arn:") else f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{name_or_arn}"
    )


_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}


def _dynamodb_needs(operation: str, p: dict[str, Any]) -> list[Need]:
    if operation == "TransactWriteItems":
        return [
            Need(f"dynamodb:{_TRANSACT[kind]}", table_arn(body["TableName"]))
            for item in p["TransactItems"]
            for kind, body in item.items()
        ]
    if operation == "TransactGetItems":
        return [Need("dynamodb:GetItem", table_arn(item["Get"]["TableName"])) for item in p["TransactItems"]]
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return [Need(f"dynamodb:{operation}", table_arn(table)) for table in p["RequestItems"]]
    if "TableName" not in p:
        return [Need(f"dynamodb:{operation}", None)]
    return [Need(f"dynamodb:{operation}", table_arn(p["TableName"], p.get("IndexName")))]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value] if value is not None else []
