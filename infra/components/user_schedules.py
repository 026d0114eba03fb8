"""Users' own schedules (missions.service.triggers.schedules): the EventBridge Scheduler group they live in, and the
role the Scheduler assumes to fire them, which may only invoke the schedule function and hand what it could not
deliver to that function's dead-letter queue. The API creates, changes and deletes schedules in the group
only (infra/components/access.py, `user_schedules`), and may pass only this role, only to the Scheduler."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.storage import removal_policy
from infra.config import EnvironmentConfig
from missions.core.settings import environment_of

SCHEDULER_SERVICE = "scheduler.amazonaws.com"


def user_schedule_group(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-user-schedules"


class UserSchedules(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        target: lambda_.IFunction,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.group_name = user_schedule_group(config)
        self.group = scheduler.ScheduleGroup(
            self, "Group", schedule_group_name=self.group_name, removal_policy=removal_policy(config)
        )
        self.role = iam.Role(
            self,
            "SchedulerRole",
            description="EventBridge Scheduler fires users' schedules: invokes the schedule function only",
            # the confused deputy: only this account's Scheduler, for schedules of this group
            assumed_by=iam.ServicePrincipal(
                SCHEDULER_SERVICE,
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": self.group.schedule_group_arn},
                },
            ),
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[target.function_arn]))
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[dead_letter_queue.queue_arn])
        )
        self.target, self.dead_letter_queue = target, dead_letter_queue
        # what the API may touch: the schedules of this group (their names are made at run time)
        self.schedule_arns = stack.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.group_name}/*"
        )

    def settings(self) -> dict[str, str]:
        """The runtime settings naming them (missions.core.settings: schedule_group ...)."""
        return environment_of(
            schedule_group=self.group_name,
            scheduler_role_arn=self.role.role_arn,
            schedule_target_arn=self.target.function_arn,
            schedule_dead_letter_arn=self.dead_letter_queue.queue_arn,
        )
