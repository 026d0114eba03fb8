"""What the in-memory stores keyed by one id share: a dict of deep copies behind a lock, where creating an
existing id is a conflict and reading a missing one is NotFound, as the DynamoDB adapters answer."""

from __future__ import annotations

import threading
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel

from missions.core.errors import ConflictError, NotFound

Record = TypeVar("Record", bound=BaseModel)


class KeyedRecords(Generic[Record]):
    noun: ClassVar[str]

    def __init__(self) -> None:
        self._items: dict[str, Record] = {}
        self._lock = threading.Lock()

    def _insert(self, key: str, record: Record) -> None:
        with self._lock:
            if key in self._items:
                raise ConflictError(f"{self.noun} {key} exists")
            self._items[key] = record.model_copy(deep=True)

    def _read(self, key: str) -> Record:
        try:
            return self._items[key].model_copy(deep=True)
        except KeyError:
            raise NotFound(f"{self.noun} {key}") from None
