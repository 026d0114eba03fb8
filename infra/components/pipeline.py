"""One capability deployed: a Lambda per agent stage and the state machine the compiler wrote, in a
nested stack of its own with its alarms, so the runtime's stack stays far from CloudFormation's 500
resources however many capabilities an environment deploys."""

from __future__ import annotations

import json

from aws_cdk import ArnFormat, NestedStack, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.components.access import ACCESS, READ_SNAPSHOTS, Resources, grant
from infra.components.functions import FunctionFactory, retention
from infra.components.monitoring import pipeline_alarms
from infra.components.nag import acknowledge
from infra.components.sandbox import Sandbox
from infra.components.storage import removal_policy
from infra.config import EnvironmentConfig
from missions.core.capability import Capability
from missions.core.compiler import compile_pipeline, placeholders
from missions.core.settings import environment_of
from missions.core.specs import STAGE_FUNCTION, state_machine_name

# the workspace keeps up to 3 unpacked snapshots (missions.service.repositories.workspace) of at most 500 MB each
# (SnapshotLimits.max_total_bytes), plus the archive being unpacked
WORKSPACE_STORAGE_MB = 2048


def definition_of(capability: Capability) -> str:
    """The state machine definition exactly as the compiler wrote it (placeholders left in)."""
    return json.dumps(compile_pipeline(capability.pipeline), sort_keys=True)


class CapabilityPipeline(Construct):
    """`stages[name]` are the stage functions and `state_machine` runs them."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        capability: Capability,
        config: EnvironmentConfig,
        functions: FunctionFactory,
        resources: Resources,
        interrupt_function: lambda_.IFunction,
        sandbox: Sandbox | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.capability = capability
        self.stages: dict[str, lambda_.Function] = {}
        connection = config.connections.get(capability.name)
        reaches = {**connection.environment, **connection.secrets} if connection else {}
        for agent in capability.pipeline.agents:
            reads_code = capability.repository != "none" and agent.has_tools
            function = functions.create(
                self,
                f"Stage-{agent.name}",
                STAGE_FUNCTION,
                description=f"{capability.name}: {agent.name} stage",
                memory_mb=agent.memory_mb,
                timeout_seconds=agent.timeout_seconds,
                reserved_concurrency=agent.reserved_concurrency,
                environment={**environment_of(capability=capability.name), **reaches},
                ephemeral_storage_mb=WORKSPACE_STORAGE_MB if reads_code else None,
            )
            # a stage that remembers has its writes embedded for search: it may call the model's embeddings
            grant(function.role, ACCESS["stage"], resources, openai=agent.has_llm or agent.remembers)  # type: ignore[arg-type]
            if reads_code:  # its tools read the mission's repository: snapshots are unpacked into /tmp
                grant(function.role, READ_SNAPSHOTS, resources)  # type: ignore[arg-type]
            if agent.sandbox and sandbox is not None:  # it runs analysis scripts
                sandbox.grant_invoke(function.role)  # type: ignore[arg-type]
            if connection and connection.secrets and agent.has_tools:  # its tools reach the user's service
                function.add_to_role_policy(
                    iam.PolicyStatement(
                        actions=["secretsmanager:GetSecretValue"],
                        resources=[
                            Stack.of(self).format_arn(
                                service="secretsmanager",
                                resource="secret",
                                resource_name=f"{name}-??????",
                                arn_format=ArnFormat.COLON_RESOURCE_NAME,
                            )
                            for name in connection.secrets.values()
                        ],
                    )
                )
            self.stages[agent.name] = function

        substitutions = {f"fn_{name}": fn.function_arn for name, fn in self.stages.items()}
        substitutions["fn_interrupt"] = interrupt_function.function_arn
        missing = set(placeholders(capability.pipeline)) - set(substitutions)
        if missing:
            raise ValueError(f"capability '{capability.name}': no function for placeholders {sorted(missing)}")

        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
        invoked = [*self.stages.values(), interrupt_function]
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[fn.function_arn for fn in invoked])
        )
        log_group = logs.LogGroup(
            self,
            "Logs",
            # vended-log groups for Step Functions must live under /aws/vendedlogs/ to keep the policy small
            log_group_name=f"/aws/vendedlogs/states/{state_machine_name(config.prefix, capability.name)}",
            retention=retention(config),
            removal_policy=removal_policy(config),
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=state_machine_name(config.prefix, capability.name),
            definition_body=sfn.DefinitionBody.from_string(definition_of(capability)),
            definition_substitutions=substitutions,
            role=role,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery (logs:*LogDelivery*, DescribeLogGroups) and X-Ray tracing "
            "accept no resource other than '*'.",
        )


class CapabilityStack(NestedStack):
    """A capability's pipeline and its alarms (state machine failures, stage errors and throttles)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        capability: Capability,
        config: EnvironmentConfig,
        functions: FunctionFactory,
        resources: Resources,
        interrupt_function: lambda_.IFunction,
        alarm_topic: sns.ITopic | None,
        sandbox: Sandbox | None = None,
    ) -> None:
        super().__init__(scope, id, description=f"missions {config.name}: the {capability.name} capability")
        self.pipeline = CapabilityPipeline(
            self,
            "Pipeline",
            capability=capability,
            config=config,
            functions=functions,
            resources=resources,
            interrupt_function=interrupt_function,
            sandbox=sandbox,
        )
        self.alarms: list[cloudwatch.Alarm] = []
        if alarm_topic is not None:
            self.alarms = pipeline_alarms(
                self,
                capability.name,
                self.pipeline.state_machine,
                {f"{capability.name}-{stage}": fn for stage, fn in self.pipeline.stages.items()},
                alarm_topic,
            )
