"""Repository imports: the function that turns a git URL or an uploaded archive into a snapshot.

The API registers a repository and puts an import request on the mission bus; a rule hands it
to this function, with EventBridge's retries and a dead-letter queue. It is the only function
with network egress that matters (git over https to public hosts: Lambda functions outside a
VPC reach the internet; the URL policy in missions.service.repositories.service refuses private and
loopback addresses and credentials) and the only one that writes snapshots.
"""

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
from missions.core.specs import REPOSITORY_IMPORT_FUNCTION, REPOSITORY_IMPORT_PATTERN

# a clone (with history), the upload or the normalized archive, and the unpacked tree being checked:
# SnapshotLimits allows 100 MB archives and 500 MB unpacked, so 4 GB leaves room for a large history
IMPORT_STORAGE_MB = 4096
IMPORT_MEMORY_MB = 1024  # dulwich keeps pack indexes in memory; gzip and tar stream
IMPORT_TIMEOUT_SECONDS = 900


class Repositories(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: EnvironmentConfig,
        bus: events.IEventBus,
        functions: FunctionFactory,
        resources: Resources,
    ) -> None:
        super().__init__(scope, id)
        self.dead_letter_queue: sqs.Queue = functions.dead_letter_queue(self, "import-dlq")
        self.function: lambda_.Function = functions.create(
            self,
            REPOSITORY_IMPORT_FUNCTION.id,
            REPOSITORY_IMPORT_FUNCTION,
            description="git URL or uploaded archive -> validated, immutable repository snapshot",
            memory_mb=IMPORT_MEMORY_MB,
            timeout_seconds=IMPORT_TIMEOUT_SECONDS,
            ephemeral_storage_mb=IMPORT_STORAGE_MB,
            dead_letter_queue=self.dead_letter_queue,
        )
        grant(self.function.role, ACCESS[REPOSITORY_IMPORT_FUNCTION.id], resources)  # type: ignore[arg-type]
        events.Rule(
            self,
            "ImportRequested",
            event_bus=bus,
            description="repository import requests from the API",
            event_pattern=events.EventPattern(
                source=REPOSITORY_IMPORT_PATTERN["source"], detail_type=REPOSITORY_IMPORT_PATTERN["detail-type"]
            ),
        ).add_target(
            targets.LambdaFunction(
                self.function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=2,
                max_event_age=Duration.hours(1),
            )
        )
