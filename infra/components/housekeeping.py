"""Scheduled upkeep: the SLA check (every 15 minutes), the reconciler (every 5 minutes), the trace
scorers (nightly) and retention (daily)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.access import ACCESS, Resources, grant
from infra.components.functions import FunctionFactory
from infra.config import EnvironmentConfig
from missions.core.settings import environment_of
from missions.core.specs import EVALUATE_FUNCTION, RECONCILE_FUNCTION, RETENTION_FUNCTION, SLA_FUNCTION, FunctionSpec


class Housekeeping(Construct):
    def __init__(
        self, scope: Construct, id: str, *, config: EnvironmentConfig, factory: FunctionFactory, resources: Resources
    ) -> None:
        super().__init__(scope, id)
        self.functions: dict[str, lambda_.Function] = {}
        self.dead_letter_queues: dict[str, sqs.Queue] = {}
        # publishes InterruptsOverdue (Powertools EMF), which Monitoring alarms on
        self._scheduled(
            SLA_FUNCTION,
            "counts questions unanswered past the SLA",
            events.Schedule.rate(Duration.minutes(15)),
            factory,
            resources,
        )
        # a start left half-done by a crashed function is finished within stale-after + 5 minutes
        self._scheduled(
            RECONCILE_FUNCTION,
            "finishes mission starts that a crashed function left half-done",
            events.Schedule.rate(Duration.minutes(5)),
            factory,
            resources,
            timeout_seconds=120,
        )
        # publishes SafetyViolations (Powertools EMF), which Monitoring alarms on
        self._scheduled(
            EVALUATE_FUNCTION,
            "scores the missions that ended in the last day (trace scorers)",
            events.Schedule.cron(minute="47", hour="2"),  # nightly, before retention archives anything
            factory,
            resources,
            timeout_seconds=300,
        )
        self._scheduled(
            RETENTION_FUNCTION,
            f"archives missions ended {config.retention_completed_days}/{config.retention_failed_days} days ago",
            events.Schedule.cron(minute="17", hour="3"),  # daily, off the hour
            factory,
            resources,
            environment=environment_of(
                retention_completed_days=config.retention_completed_days,
                retention_failed_days=config.retention_failed_days,
            ),
            timeout_seconds=300,
        )

    def _scheduled(
        self,
        spec: FunctionSpec,
        description: str,
        schedule: events.Schedule,
        factory: FunctionFactory,
        resources: Resources,
        **options: object,
    ) -> None:
        queue = factory.dead_letter_queue(self, f"{spec.id}-dlq")
        function = factory.create(self, spec.id, spec, description=description, dead_letter_queue=queue, **options)  # type: ignore[arg-type]
        grant(function.role, ACCESS[spec.id], resources)  # type: ignore[arg-type]
        events.Rule(self, f"{spec.id}-schedule", schedule=schedule, description=description).add_target(
            targets.LambdaFunction(function, dead_letter_queue=queue, retry_attempts=2)
        )
        self.functions[spec.id], self.dead_letter_queues[spec.id] = function, queue
