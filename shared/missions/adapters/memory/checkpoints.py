"""In-memory adapter of missions.ports.checkpoints:
the fake unit tests use, and the reference the conformance suite holds every backend to."""

from __future__ import annotations

import builtins
import threading

from missions.core.errors import NotFound
from missions.ports.checkpoints import Checkpoint


class MemoryCheckpointStore:
    """Checkpoints kept as JSON text, as a real store serializes them: what comes back is never the
    caller's object, and a copy costs a parse rather than a deep copy of the envelope."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], str] = {}
        self._latest: dict[str, str] = {}  # each thread's newest checkpoint id: a status read asks for it
        self._lock = threading.Lock()

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        key = (checkpoint.thread_id, checkpoint.checkpoint_id)
        with self._lock:
            existing = self._items.get(key)
            if existing is not None:
                return Checkpoint.model_validate_json(existing)
            self._items[key] = checkpoint.model_dump_json()
            newest = self._latest.get(checkpoint.thread_id)
            if newest is None or checkpoint.checkpoint_id > newest:
                self._latest[checkpoint.thread_id] = checkpoint.checkpoint_id
            return checkpoint

    def get(self, thread_id: str, checkpoint_id: str) -> Checkpoint:
        try:
            return Checkpoint.model_validate_json(self._items[(thread_id, checkpoint_id)])
        except KeyError:
            raise NotFound(f"checkpoint {thread_id}/{checkpoint_id}") from None

    def list(self, thread_id: str) -> builtins.list[Checkpoint]:
        found = [Checkpoint.model_validate_json(c) for (t, _), c in list(self._items.items()) if t == thread_id]
        return sorted(found, key=lambda c: c.checkpoint_id)

    def delete_thread(self, thread_id: str) -> int:
        with self._lock:
            keys = [key for key in self._items if key[0] == thread_id]
            for key in keys:
                del self._items[key]
            self._latest.pop(thread_id, None)
            return len(keys)

    def latest(self, thread_id: str) -> Checkpoint | None:
        newest = self._latest.get(thread_id)
        return None if newest is None else self.get(thread_id, newest)
