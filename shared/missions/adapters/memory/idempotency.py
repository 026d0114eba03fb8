"""Powertools Idempotency's persistence ABC, in memory: the reference backend beside its DynamoDB layer
(tests/conformance/test_idempotency_conformance.py runs both)."""

from __future__ import annotations

import copy
import datetime as dt
import threading

from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS, DataRecord


class MemoryIdempotencyLayer(BasePersistenceLayer):
    """Records by idempotency key; a put succeeds on a new key, an expired record, or a record whose
    in-progress window has passed (as the DynamoDB layer's condition does)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Powertools leaves it unannotated
        self._records: dict[str, DataRecord] = {}
        self._lock = threading.Lock()

    def _get_record(self, idempotency_key: str) -> DataRecord:
        with self._lock:
            record = self._records.get(idempotency_key)
            if record is None:
                raise IdempotencyItemNotFoundError
            return copy.copy(record)

    def _put_record(self, data_record: DataRecord) -> None:
        now = dt.datetime.now()
        with self._lock:
            old = self._records.get(data_record.idempotency_key)
            if old is not None and not _replaceable(old, now):
                self._validate_payload(data_payload=data_record, stored_data_record=old)
                raise IdempotencyItemAlreadyExistsError(old_data_record=copy.copy(old))
            self._records[data_record.idempotency_key] = copy.copy(data_record)

    def _update_record(self, data_record: DataRecord) -> None:
        with self._lock:
            self._records[data_record.idempotency_key] = copy.copy(data_record)

    def _delete_record(self, data_record: DataRecord) -> None:
        with self._lock:
            self._records.pop(data_record.idempotency_key, None)


def _replaceable(record: DataRecord, now: dt.datetime) -> bool:
    if record.expiry_timestamp is not None and record.expiry_timestamp < int(now.timestamp()):
        return True
    in_progress = record.status == STATUS_CONSTANTS["INPROGRESS"]
    window = record.in_progress_expiry_timestamp
    return in_progress and window is not None and window < int(now.timestamp() * 1000)


__all__ = ["MemoryIdempotencyLayer"]
