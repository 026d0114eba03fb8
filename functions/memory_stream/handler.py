"""The memory table's stream: each change becomes a `memory.changed` event on the bus.

Powertools batch processing reports partial failures, so one bad record is retried alone.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from missions.ingest import publish_memory_change
from missions.wiring import Runtime, default_runtime

logger = Logger(service="missions-memory-stream")


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime | None = None) -> dict[str, Any]:
    active = runtime or default_runtime()
    return process_partial_response(
        event=event,
        record_handler=lambda record: publish_memory_change(record, active),
        processor=BatchProcessor(event_type=EventType.DynamoDBStreams),
        context=context,
    )
