"""One capability deployed: a Lambda per agent stage and the state machines the compiler wrote (the
mission's Standard machine and, when its stages fit, the Express machine its segments run in), in a
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
from missions.core.capability.mcp import token_secrets
from missions.core.capability.registry import Capability
from missions.core.pipeline.compiler import compile_mission, placeholders
from missions.core.settings import environment_of
from missions.core.specs import STAGE_FUNCTION, segment_machine_name, state_machine_name

# the workspace keeps up to 3 unpacked snapshots (missions.service.repositories.workspace) of at most 500 MB each
# (SnapshotLimits.max_total_bytes), plus the archive being unpacked
WORKSPACE_STORAGE_MB = 2048


def definition_of(capability: Capability, machine: str = "mission") -> str:
    """A state machine's definition exactly as the compiler wrote it (placeholders left in):
    `machine` is "mission" (Standard) or "segment" (Express)."""
    return json.dumps(compile_mission(capability.pipeline).as_dict()[machine], sort_keys=True)


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
            tokens = token_secrets(capability.mcp_servers, agent)
            if tokens:  # its tools reach remote MCP servers: it may read their tokens, and no other secret
                function.add_to_role_policy(
                    iam.PolicyStatement(
                        actions=["secretsmanager:GetSecretValue"],
                        resources=[self._secret_arn(name) for name in tokens],
                    )
                )
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
        machines = compile_mission(capability.pipeline)
        self.segment_machine: sfn.StateMachine | None = None
        if machines.segment is not None:
            self.segment_machine = self._machine(
                "Segment",
                segment_machine_name(config.prefix, capability.name),
                definition_of(capability, "segment"),
                substitutions,
                invoked=list(self.stages.values()),
                express=True,
                config=config,
            )
            substitutions["segment"] = self.segment_machine.state_machine_arn
        missing = set(placeholders(capability.pipeline)) - set(substitutions)
        if missing:
            raise ValueError(f"capability '{capability.name}': no function for placeholders {sorted(missing)}")
        # the mission's machine runs the final stage itself only on its failure path (and, single-level, all)
        final = self.stages[capability.pipeline.final]
        self.state_machine = self._machine(
            "StateMachine",
            state_machine_name(config.prefix, capability.name),
            definition_of(capability),
            substitutions,
            invoked=[final, interrupt_function]
            if machines.segment is not None
            else [*self.stages.values(), interrupt_function],
            express=False,
            config=config,
        )
        if self.segment_machine is not None:
            self._may_run_segments(self.state_machine, self.segment_machine, config)

    def _secret_arn(self, name: str) -> str:
        """A secret named by its ARN is that one; by its name, that name with the suffix Secrets Manager adds."""
        if name.startswith("arn:"):
            return name
        return Stack.of(self).format_arn(
            service="secretsmanager",
            resource="secret",
            resource_name=f"{name}-??????",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )

    def _machine(
        self,
        id: str,
        name: str,
        definition: str,
        substitutions: dict[str, str],
        *,
        invoked: list[lambda_.IFunction],
        express: bool,
        config: EnvironmentConfig,
    ) -> sfn.StateMachine:
        role = iam.Role(
            self,
            f"{id}Role" if id != "StateMachine" else "Role",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[fn.function_arn for fn in invoked])
        )
        log_group = logs.LogGroup(
            self,
            f"{id}Logs" if id != "StateMachine" else "Logs",
            # vended-log groups for Step Functions must live under /aws/vendedlogs/ to keep the policy small
            log_group_name=f"/aws/vendedlogs/states/{name}",
            retention=retention(config),
            removal_policy=removal_policy(config),
        )
        machine = sfn.StateMachine(
            self,
            id,
            state_machine_name=name,
            state_machine_type=sfn.StateMachineType.EXPRESS if express else sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(definition),
            definition_substitutions={
                key: value for key, value in substitutions.items() if "${" + key + "}" in definition
            },
            role=role,
            tracing_enabled=True,
            # an Express execution keeps no history of its own: its log is where a segment can be read
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery (logs:*LogDelivery*, DescribeLogGroups) and X-Ray tracing "
            "accept no resource other than '*'.",
        )
        return machine

    def _may_run_segments(
        self, mission: sfn.StateMachine, segment: sfn.StateMachine, config: EnvironmentConfig
    ) -> None:
        """What a chain of segments needs (missions.core.pipeline.compiler): the mission's machine starts its
        segment machine and waits on a task token (`startExecution.waitForTaskToken`: nothing to describe,
        stop or follow); each segment starts the next one of its own machine and heartbeats, answers or
        fails the mission's token. Both ARNs are built from the machines' names: a reference to either
        machine from the segment's role would make the two machines depend on each other."""
        stack = Stack.of(self)

        def machine_arn(name: str) -> str:
            return stack.format_arn(
                service="states", resource="stateMachine", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
            )

        mission.add_to_role_policy(
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[segment.state_machine_arn])
        )
        segment.add_to_role_policy(
            iam.PolicyStatement(
                actions=["states:StartExecution"],
                resources=[machine_arn(segment_machine_name(config.prefix, self.capability.name))],
            )
        )
        segment.add_to_role_policy(
            iam.PolicyStatement(
                actions=["states:SendTaskFailure", "states:SendTaskHeartbeat", "states:SendTaskSuccess"],
                resources=[machine_arn(state_machine_name(config.prefix, self.capability.name))],
            )
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
