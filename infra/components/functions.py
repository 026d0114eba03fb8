"""Lambda functions the same way everywhere: own role, own log group, the runtime layer, tracing.

Roles start with no AWS managed policy (AWSLambdaBasicExecutionRole would let a function write to
every log group of the account): each may create streams in and write to its own log group only,
and is granted exactly what its code calls by the construct that wires it (see access.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, Size
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.nag import acknowledge
from infra.components.storage import removal_policy
from infra.config import LOG_RETENTION_DAYS, EnvironmentConfig
from missions.core.settings import PROVIDER_SDKS
from missions.core.specs import FunctionSpec

ROOT = Path(__file__).resolve().parents[2]
# The Python the test suite runs (the venv) is the Python Lambda runs: the layer's compiled wheels are built
# for it (layers/build.py PYTHON) and tests/infra asserts every function's runtime equals the suite's.
PYTHON_VERSION = "3.11"
RUNTIME = lambda_.Runtime.PYTHON_3_11
ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}


class RuntimeLayer(Construct):
    """The layer built by layers/build.py: dependencies for the Lambda platform + shared/ + capabilities/, with
    the model SDK of the environment's provider."""

    def __init__(self, scope: Construct, id: str, *, layer_dir: Path, config: EnvironmentConfig) -> None:
        super().__init__(scope, id)
        build = f"`python layers/build.py --arch {config.architecture} --env {config.name} --out {layer_dir}`"
        if not (layer_dir / "python" / "missions").is_dir():
            raise FileNotFoundError(f"no runtime layer in {layer_dir}: build it first with {build} (or `make layer`)")
        sdks = PROVIDER_SDKS[config.llm.provider]
        missing = [sdk for sdk in sdks if not (layer_dir / "python" / sdk).is_dir()]
        if missing and has_dependencies(layer_dir):  # a sources-only layer (synth tests) carries no SDK at all
            raise FileNotFoundError(
                f"the runtime layer in {layer_dir} has no {', '.join(missing)} SDK, which environment "
                f"'{config.name}' calls its models with (llm.provider {config.llm.provider}): build it with {build}"
            )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(str(layer_dir)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURES[config.architecture]],
            description="missions runtime: pydantic, Powertools, shared/missions, capabilities"
            + "".join(f", {sdk}" for sdk in sdks),
            removal_policy=removal_policy(config),
        )


def has_dependencies(layer_dir: Path) -> bool:
    """Whether layers/build.py installed the dependencies (not `--sources-only`)."""
    return (layer_dir / "python" / "pydantic").is_dir()


@dataclass(frozen=True)
class FunctionNetwork:
    """Where a function attached to a VPC lives (its role then needs the ENI actions Lambda uses)."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_groups: tuple[ec2.ISecurityGroup, ...]


class FunctionFactory:
    """Builds functions with the settings every function shares."""

    def __init__(self, *, config: EnvironmentConfig, layer: lambda_.ILayerVersion, environment: dict[str, str]):
        self.config = config
        self.layer = layer
        self.environment = dict(environment)

    def create(
        self,
        scope: Construct,
        id: str,
        spec: FunctionSpec,
        *,
        description: str,
        memory_mb: int | None = None,
        timeout_seconds: int | None = None,
        reserved_concurrency: int | None = None,
        environment: dict[str, str] | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        ephemeral_storage_mb: int | None = None,
        network: FunctionNetwork | None = None,
        tracing: bool = True,
        extra_layers: Sequence[lambda_.ILayerVersion] = (),
        function_name: str | None = None,
    ) -> lambda_.Function:
        """`network`: the VPC subnets and security groups the function lives in (none: Lambda's own
        network, with internet egress); `tracing`: X-Ray (a function with no network path turns it off);
        `extra_layers`: after the runtime layer (the Lambda Web Adapter's, for a spec with a `server`)."""
        construct = Construct(scope, id)
        role = iam.Role(
            construct,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{description} (exact actions only)",
        )
        log_group = logs.LogGroup(
            construct,
            "Logs",
            retention=retention(self.config),
            removal_policy=removal_policy(self.config),
        )
        function = lambda_.Function(
            construct,
            "Function",
            function_name=function_name,  # named only where its own ARN must be known before it exists
            runtime=RUNTIME,
            architecture=ARCHITECTURES[self.config.architecture],
            code=lambda_.Code.from_asset(str(ROOT / "functions" / spec.code_dir), exclude=["__pycache__", "*.pyc"]),
            handler=spec.server or spec.handler,  # a web server's script runs under the adapter's wrapper
            layers=[self.layer, *extra_layers],
            role=role,
            log_group=log_group,
            memory_size=memory_mb or self.config.memory_mb,
            timeout=Duration.seconds(timeout_seconds or self.config.timeout_seconds),
            reserved_concurrent_executions=reserved_concurrency,
            dead_letter_queue=dead_letter_queue,  # asynchronous invocations that failed every retry
            tracing=lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.DISABLED,
            vpc=network.vpc if network else None,
            vpc_subnets=network.subnets if network else None,
            security_groups=list(network.security_groups) if network else None,
            ephemeral_storage_size=Size.mebibytes(ephemeral_storage_mb) if ephemeral_storage_mb else None,
            description=description,
            environment={
                **self.environment,
                "POWERTOOLS_SERVICE_NAME": f"missions-{spec.id}",
                **(environment or {}),
            },
        )
        # logs:CreateLogStream and logs:PutLogEvents on this function's own group (its ARN ends in ':*',
        # which covers the group's streams and nothing else)
        log_group.grant_write(role)
        acknowledge(
            function,
            "AwsSolutions-L1",
            f"The runtime is python{PYTHON_VERSION}, the version the test suite runs and the layer's compiled "
            "wheels are built for; moving to a newer one is a deliberate change of the venv, the locks and RUNTIME.",
        )
        if tracing:
            acknowledge(
                role,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray's PutTraceSegments and PutTelemetryRecords accept no resource other than '*'.",
            )
        return function

    def dead_letter_queue(self, scope: Construct, id: str) -> sqs.Queue:
        """Where failed asynchronous deliveries wait (14 days) instead of vanishing."""
        queue = sqs.Queue(
            scope,
            id,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            removal_policy=removal_policy(self.config),
        )
        watched = (
            "its depth is alarmed on (a message visible raises the alarm) and graphed on the runtime dashboard"
            if self.config.alarms
            else "this environment has alarms off; its depth is graphed on the runtime dashboard only"
        )
        acknowledge(queue, "AwsSolutions-SQS3", f"This queue is itself a dead-letter queue: {watched}.")
        return queue


def retention(config: EnvironmentConfig) -> logs.RetentionDays:
    return getattr(logs.RetentionDays, LOG_RETENTION_DAYS[config.log_retention_days])
