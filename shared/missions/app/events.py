"""What each function's AWS event says, as the typed input of the service it calls.

The wire formats stay here, out of the services: the Lambda context (a stage's deadline, the sandbox
function's room), EventBridge's Step Functions status changes and repository imports, CloudFormation's
custom-resource requests and DynamoDB stream records. A handler reads its event with one of these and
hands the result to one service method.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from missions.core.sandbox import FUNCTION_HEADROOM_MB, TierLimits

if TYPE_CHECKING:
    from missions.core.memory.longterm import MemoryChange
    from missions.service.control import ExecutionStatus
    from missions.service.deployment import CustomResourceRequest
    from missions.service.repositories.service import ImportRequest

COMMIT_MARGIN_SECONDS = 3.0  # what a stage keeps back, after its last model call, to commit
SANDBOX_TIME_MARGIN_SECONDS = 2.0  # what the sandbox function keeps back to report after its child ends


def deadline_of(context: Any) -> float | None:
    """When this invocation must be done (time.monotonic()), from the Lambda context's remaining time."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return time.monotonic() + max(0.0, float(remaining()) / 1000 - COMMIT_MARGIN_SECONDS)


def sandbox_room(context: Any) -> TierLimits | None:
    """What a child may use inside the sandbox function: its memory less the headroom it was given for
    itself, its remaining time less the margin (None outside Lambda: the tier's limits apply as they are)."""
    memory = getattr(context, "memory_limit_in_mb", None)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if memory is None or remaining is None:
        return None
    return TierLimits(
        memory_mb=max(16, int(memory) - FUNCTION_HEADROOM_MB),
        timeout_seconds=max(1.0, float(remaining()) / 1000 - SANDBOX_TIME_MARGIN_SECONDS),
    )


def execution_status(event: dict[str, Any]) -> ExecutionStatus:
    """A Step Functions "Execution Status Change" event (EventBridge)."""
    from missions.service.control import ExecutionStatus

    detail = event.get("detail") or {}
    return ExecutionStatus(
        execution_arn=str(detail["executionArn"]), status=str(detail["status"]), name=detail.get("name")
    )


def repository_import(event: dict[str, Any]) -> ImportRequest:
    """The repository-import rule's event (EventBridge): which repository, at which ref."""
    from missions.service.repositories.service import ImportRequest

    detail = event.get("detail") or {}
    return ImportRequest(repository_id=str(detail.get("repository_id")), ref=detail.get("ref"))


def custom_resource(event: dict[str, Any]) -> CustomResourceRequest:
    """A CloudFormation custom-resource request (Powertools' parser models), as the deploy function reads it."""
    from aws_lambda_powertools.utilities.parser import parse
    from aws_lambda_powertools.utilities.parser.models import (
        CloudFormationCustomResourceCreateModel,
        CloudFormationCustomResourceDeleteModel,
        CloudFormationCustomResourceUpdateModel,
    )

    from missions.service.deployment import CustomResourceRequest

    parsed = parse(
        event,
        CloudFormationCustomResourceCreateModel
        | CloudFormationCustomResourceUpdateModel
        | CloudFormationCustomResourceDeleteModel,  # type: ignore[arg-type]
    )
    properties = parsed.resource_properties if isinstance(parsed.resource_properties, dict) else {}
    return CustomResourceRequest(
        request_type=parsed.request_type,
        response_url=str(parsed.response_url),
        stack_id=parsed.stack_id,
        request_id=parsed.request_id,
        logical_resource_id=parsed.logical_resource_id,
        capabilities=[str(name) for name in properties.get("Capabilities", [])],
    )


def memory_change(record: dict[str, Any]) -> MemoryChange | None:
    """One DynamoDB stream record of the memory table (None: not a change a trigger reads)."""
    from missions.adapters.dynamodb.longterm import change_from_stream_record

    return change_from_stream_record(record)


__all__ = [
    "COMMIT_MARGIN_SECONDS",
    "SANDBOX_TIME_MARGIN_SECONDS",
    "custom_resource",
    "deadline_of",
    "execution_status",
    "memory_change",
    "repository_import",
    "sandbox_room",
]
