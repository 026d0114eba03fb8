"""Alarms (when the environment wants them) and one dashboard for the whole runtime."""

from __future__ import annotations

from aws_cdk import Annotations, CfnOutput, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import EnvironmentConfig

PERIOD = Duration.minutes(5)
NAMESPACE = "Missions"  # Powertools metrics namespace of the runtime's own metrics
NO_SUBSCRIBER = "missions:alarms-without-subscriber"  # the id of the synth warning


class AlarmTopic(Construct):
    """The topic every alarm notifies (alarmed environments only), made before anything is alarmed on."""

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(self, "Alarms", display_name=f"{config.prefix} alarms", enforce_ssl=True)
        CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn, description="every alarm notifies this topic")
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        else:  # not an error: an operator may subscribe a pager or chat endpoint to the topic instead
            Annotations.of(self.topic).add_warning_v2(
                NO_SUBSCRIBER,
                f"alarms are on but environments.{config.name}.alarm_email is not set in cdk.json: the alarm "
                "topic has no subscriber and alarms will notify nobody. Set alarm_email, or subscribe an "
                "endpoint to the topic of the stack output AlarmTopicArn after the deploy.",
            )


def alarm(
    scope: Construct, id: str, metric: cloudwatch.IMetric, description: str, topic: sns.ITopic
) -> cloudwatch.Alarm:
    """One alarm: at least one occurrence in a period notifies the topic."""
    made = cloudwatch.Alarm(
        scope,
        id,
        metric=metric,
        threshold=1,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=description,
    )
    made.add_alarm_action(actions.SnsAction(topic))
    return made


def pipeline_alarms(
    scope: Construct,
    name: str,
    machine: sfn.StateMachine,
    functions: dict[str, lambda_.Function],
    topic: sns.ITopic,
) -> list[cloudwatch.Alarm]:
    """A state machine's failures and time-outs, and its functions' errors and throttles."""
    made = [
        alarm(scope, f"{name}-failed", machine.metric_failed(period=PERIOD), f"{name}: executions failed", topic),
        alarm(
            scope, f"{name}-timed-out", machine.metric_timed_out(period=PERIOD), f"{name}: executions timed out", topic
        ),
    ]
    for stage, function in functions.items():
        made.append(
            alarm(
                scope, f"{stage}-errors", function.metric_errors(period=PERIOD), f"{stage}: invocations failed", topic
            )
        )
        made.append(
            alarm(scope, f"{stage}-throttles", function.metric_throttles(period=PERIOD), f"{stage}: throttled", topic)
        )
    return made


class Monitoring(Construct):
    """The runtime's own alarms (its service functions, dead-letter queues, overdue questions, safety
    violations; each capability alarms on its own pipeline in its stack) and one dashboard for all."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        topic: sns.ITopic | None,
        state_machines: dict[str, sfn.StateMachine],
        functions: dict[str, lambda_.Function],
        service_functions: dict[str, lambda_.Function],
        dead_letter_queues: dict[str, sqs.Queue],
    ) -> None:
        super().__init__(scope, id)
        self.alarms: list[cloudwatch.Alarm] = []
        self.topic = topic
        overdue = cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name="InterruptsOverdue",
            dimensions_map={"service": "missions-sla"},
            statistic="Maximum",
            period=PERIOD,
        )
        if topic is not None:
            for name, function in service_functions.items():
                self._alarm(f"{name}-errors", function.metric_errors(period=PERIOD), f"{name}: invocations failed")
                self._alarm(f"{name}-throttles", function.metric_throttles(period=PERIOD), f"{name}: throttled")
            for name, queue in dead_letter_queues.items():
                self._alarm(
                    f"{name}-dlq-depth",
                    queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                    f"{name}: deliveries in the dead-letter queue",
                )
            self._alarm("interrupts-overdue", overdue, f"questions unanswered for over {config.interrupt_sla_hours} h")
            violations = cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name="SafetyViolations",
                dimensions_map={"service": "missions-evaluate"},
                statistic="Maximum",
                period=Duration.days(1),
            )
            self._alarm("safety-violations", violations, "a tool with side effects ran without the user's approval")

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{config.prefix}-runtime")
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Executions",
                left=[
                    m
                    for machine in state_machines.values()
                    for m in (machine.metric_started(), machine.metric_succeeded())
                ],
                right=[
                    m
                    for machine in state_machines.values()
                    for m in (machine.metric_failed(), machine.metric_timed_out())
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Lambda errors and throttles",
                left=[f.metric_errors() for f in functions.values()],
                right=[f.metric_throttles() for f in functions.values()],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda duration p95",
                left=[f.metric_duration(statistic="p95") for f in functions.values()],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Dead-letter queues and overdue questions",
                left=[q.metric_approximate_number_of_messages_visible() for q in dead_letter_queues.values()],
                right=[overdue],
                width=12,
            ),
        )

    def _alarm(self, id: str, metric: cloudwatch.IMetric, description: str) -> None:
        assert self.topic is not None
        self.alarms.append(alarm(self, id, metric, description, self.topic))
