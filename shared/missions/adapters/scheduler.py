"""Users' schedules on EventBridge Scheduler (missions.ports.schedules.Scheduler), client injected.

Every schedule lives in the users' schedule group and invokes the schedule function with its input, as the
scheduler role (which may invoke only that function) and with the function's dead-letter queue for what it
could not deliver. The Scheduler substitutes `<aws.scheduler.scheduled-time>` in the input at each firing.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from missions.core.errors import DependencyUnavailable, NotFound
from missions.ports.schedules import SchedulerEntry

_NOT_FOUND = "ResourceNotFoundException"


class EventBridgeScheduler:
    def __init__(
        self,
        *,
        group: str,
        target_arn: str,
        role_arn: str,
        dead_letter_arn: str | None = None,
        client: Any = None,
    ):
        if client is None:
            import boto3

            client = boto3.client("scheduler")
        self.group = group
        self._target: dict[str, Any] = {"Arn": target_arn, "RoleArn": role_arn}
        if dead_letter_arn:
            self._target["DeadLetterConfig"] = {"Arn": dead_letter_arn}
        self._client = client

    def _definition(self, entry: SchedulerEntry) -> dict[str, Any]:
        after = {"ActionAfterCompletion": "DELETE"} if entry.one_time else {}
        return {
            **after,
            "Name": entry.name,
            "GroupName": self.group,
            "ScheduleExpression": entry.expression,
            "ScheduleExpressionTimezone": entry.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED" if entry.enabled else "DISABLED",
            "Description": entry.description[:512],
            "Target": {
                **self._target,
                "Input": json.dumps(entry.input, separators=(",", ":")),
                "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 3},
            },
        }

    def create(self, entry: SchedulerEntry) -> None:
        try:
            self._client.create_schedule(**self._definition(entry))
        except (ClientError, BotoCoreError) as exc:
            raise DependencyUnavailable(f"EventBridge Scheduler refused the schedule: {_why(exc)}") from exc

    def update(self, entry: SchedulerEntry) -> None:
        try:
            self._client.update_schedule(**self._definition(entry))
        except ClientError as exc:
            if _code(exc) == _NOT_FOUND:
                raise NotFound(f"no Scheduler schedule {entry.name}") from exc
            raise DependencyUnavailable(f"EventBridge Scheduler refused the change: {_why(exc)}") from exc
        except BotoCoreError as exc:
            raise DependencyUnavailable(f"EventBridge Scheduler is unreachable: {_why(exc)}") from exc

    def delete(self, name: str) -> bool:
        try:
            self._client.delete_schedule(Name=name, GroupName=self.group)
        except ClientError as exc:
            if _code(exc) == _NOT_FOUND:
                return False
            raise DependencyUnavailable(f"EventBridge Scheduler did not delete the schedule: {_why(exc)}") from exc
        except BotoCoreError as exc:
            raise DependencyUnavailable(f"EventBridge Scheduler is unreachable: {_why(exc)}") from exc
        return True


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _why(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return f"{_code(exc)}: {exc.response.get('Error', {}).get('Message', '')}"[:300]
    return type(exc).__name__


__all__ = ["EventBridgeScheduler"]
