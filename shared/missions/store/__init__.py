"""Persistence ports (protocols) and their adapters: in-memory for tests, DynamoDB for AWS."""

from missions.store.ports import (
    Checkpoint,
    CheckpointStore,
    ConflictError,
    EventStore,
    InterruptRecord,
    InterruptStore,
    MissionRecord,
    MissionStore,
    NotFound,
)

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "ConflictError",
    "EventStore",
    "InterruptRecord",
    "InterruptStore",
    "MissionRecord",
    "MissionStore",
    "NotFound",
]
