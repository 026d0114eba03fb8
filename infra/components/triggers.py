"""Missions that start themselves: bus rules (webhooks, memory changes), cron schedules, the memory
table's stream, and Step Functions status changes that let the dispatcher start queued missions.

Every asynchronous target has a dead-letter queue, both for deliveries EventBridge or the
Scheduler could not make and for invocations that failed all of Lambda's retries.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack, TimeZone
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.access import ACCESS, Resources, grant
from infra.components.functions import FunctionFactory
from infra.components.nag import acknowledge
from infra.config import EnvironmentConfig
from missions.core.capability.registry import Capability
from missions.core.specs import (
    EXECUTION_ENDED,
    EXECUTION_STATUS_DETAIL_TYPE,
    EXECUTION_STATUS_SOURCE,
    MEMORY_STREAM_FUNCTION,
    SCHEDULE_FUNCTION,
    STATUS_FUNCTION,
    TRIGGER_FUNCTION,
)
from missions.core.triggers.specs import memory_rules, schedule_specs, webhook_rules


class Triggers(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        capabilities: list[Capability],
        bus: events.IEventBus,
        memory_table: dynamodb.Table,
        state_machine_arns: list[str],
        functions: FunctionFactory,
        resources: Resources,
    ) -> None:
        super().__init__(scope, id)
        self.dead_letter_queues: dict[str, sqs.Queue] = {}
        self.functions: dict[str, lambda_.Function] = {}

        trigger = self._function(functions, resources, TRIGGER_FUNCTION, "bus events (webhooks, memory) -> missions")
        for spec in webhook_rules(capabilities, config.prefix) + memory_rules(capabilities, config.prefix):
            rule = events.Rule(
                self,
                f"Rule-{spec.name}",
                rule_name=spec.name,
                event_bus=bus,
                event_pattern=events.EventPattern(**_pattern(spec.event_pattern)),
                description=f"{spec.capability}: trigger {spec.trigger_id}",
            )
            rule.add_target(self._lambda_target(trigger, TRIGGER_FUNCTION.id))

        # named: it sets debounce timers that invoke itself, so its settings hold its own ARN (schedule_function_arn)
        schedule = self._function(
            functions,
            resources,
            SCHEDULE_FUNCTION,
            "cron ticks -> a mission per opted-in user",
            name=schedule_function_name(config),
        )
        for spec in schedule_specs(capabilities, config.prefix):
            scheduler.Schedule(
                self,
                f"Schedule-{spec.name}",
                schedule_name=spec.name,
                description=f"{spec.capability}: schedule {spec.schedule_id}",
                # the trigger's expression is already EventBridge's "cron(...)" form
                schedule=scheduler.ScheduleExpression.expression(spec.expression, time_zone=TimeZone.of(spec.timezone)),
                target=scheduler_targets.LambdaInvoke(
                    schedule,
                    input=scheduler.ScheduleTargetInput.from_object(spec.input),
                    dead_letter_queue=self.dead_letter_queues[SCHEDULE_FUNCTION.id],
                    retry_attempts=3,
                    max_event_age=Duration.hours(1),
                ),
            )

        acknowledge(
            Stack.of(self),
            f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(schedule.node.default_child)}.Arn>:*]",
            "CDK's scheduler role may invoke any version of the schedule function: still only that function.",
        )

        stream = self._function(functions, resources, MEMORY_STREAM_FUNCTION, "memory table changes -> bus events")
        stream.add_event_source(
            sources.DynamoEventSource(
                memory_table,
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=25,
                bisect_batch_on_error=True,
                report_batch_item_failures=True,  # Powertools' BatchProcessor returns the failed records
                retry_attempts=5,
                max_record_age=Duration.hours(24),
                on_failure=sources.SqsDlq(self.dead_letter_queues[MEMORY_STREAM_FUNCTION.id]),
            )
        )

        status = self._function(functions, resources, STATUS_FUNCTION, "execution ended -> record it, start the next")
        if state_machine_arns:
            events.Rule(
                self,
                "ExecutionEnded",
                description="Step Functions executions of mission state machines that ended",
                event_pattern=events.EventPattern(
                    source=[EXECUTION_STATUS_SOURCE],
                    detail_type=[EXECUTION_STATUS_DETAIL_TYPE],
                    detail={"stateMachineArn": state_machine_arns, "status": list(EXECUTION_ENDED)},
                ),
            ).add_target(self._lambda_target(status, STATUS_FUNCTION.id))

    def _function(
        self, functions: FunctionFactory, resources: Resources, spec, description: str, name: str | None = None
    ) -> lambda_.Function:
        queue = functions.dead_letter_queue(self, f"{spec.id}-dlq")
        self.dead_letter_queues[spec.id] = queue
        function = functions.create(
            self, spec.id, spec, description=description, dead_letter_queue=queue, function_name=name
        )
        grant(function.role, ACCESS[spec.id], resources)  # type: ignore[arg-type]
        self.functions[spec.id] = function
        return function

    def _lambda_target(self, function: lambda_.IFunction, function_id: str) -> targets.LambdaFunction:
        return targets.LambdaFunction(
            function,
            dead_letter_queue=self.dead_letter_queues[function_id],
            retry_attempts=8,
            max_event_age=Duration.hours(2),
        )


def _pattern(pattern: dict) -> dict:
    """A rule spec's JSON pattern as EventPattern keyword arguments."""
    names = {"source": "source", "detail-type": "detail_type", "detail": "detail", "account": "account"}
    return {names[key]: value for key, value in pattern.items()}


def schedule_function_name(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-schedule"


def schedule_function_arn(scope: Construct, config: EnvironmentConfig) -> str:
    """The schedule function's ARN from its name: what its own settings can hold (a GetAtt of itself cannot)."""
    return Stack.of(scope).format_arn(
        service="lambda",
        resource="function",
        resource_name=schedule_function_name(config),
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
