"""The memory table's stream: each change becomes a `memory.changed` event on the bus.

Powertools batch processing reports partial failures, so one bad record is retried alone.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from missions.app import events
from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler()
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return process_partial_response(
        event=event,
        record_handler=lambda record: runtime.ingest.memory_changed(events.memory_change(record.raw_event)),
        processor=BatchProcessor(event_type=EventType.DynamoDBStreams),
        context=context,
    )
