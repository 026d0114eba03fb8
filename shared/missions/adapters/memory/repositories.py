"""In-memory adapters of missions.ports.repositories:
the fake unit tests use, and the reference the conformance suite holds every backend to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from missions.adapters.memory._records import KeyedRecords
from missions.core.errors import ConflictError, NotFound
from missions.core.mission.envelope import utcnow
from missions.ports.repositories import RepositoryRecord, RepositorySnapshot


class MemoryRepositoryStore(KeyedRecords[RepositoryRecord]):
    noun = "repository"

    def create(self, record: RepositoryRecord) -> None:
        self._insert(record.repository_id, record)

    def get(self, repository_id: str) -> RepositoryRecord:
        return self._read(repository_id)

    def list_for_owner(self, owner: str, limit: int = 100) -> list[RepositoryRecord]:
        found = [r for r in self._items.values() if r.owner == owner]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return [r.model_copy(deep=True) for r in found[:limit]]

    def update(self, repository_id: str, *, expect_status: str | None = None, **fields: Any) -> RepositoryRecord:
        with self._lock:
            current = self.get(repository_id)
            if expect_status is not None and current.status != expect_status:
                raise ConflictError(f"repository {repository_id} is {current.status}, not {expect_status}")
            updated = RepositoryRecord.model_validate({**current.model_dump(), **fields, "updated_at": utcnow()})
            self._items[repository_id] = updated
            return updated.model_copy(deep=True)

    def add_snapshot(self, repository_id: str, snapshot: RepositorySnapshot) -> RepositoryRecord:
        with self._lock:
            current = self.get(repository_id)
            snapshots = [s for s in current.snapshots if s.sha256 != snapshot.sha256] + [snapshot]
            updated = current.model_copy(
                update={
                    "snapshots": snapshots,
                    "status": "ready",
                    "reason": None,
                    "updated_at": utcnow(),
                    "revision": current.revision + 1,
                }
            )
            self._items[repository_id] = updated
            return updated.model_copy(deep=True)

    def delete(self, repository_id: str) -> None:
        with self._lock:
            if self._items.pop(repository_id, None) is None:
                raise NotFound(f"repository {repository_id}")


class MemorySnapshotStore:
    """Objects in a dict; upload URLs are `memory://<key>` and `receive` plays the client's PUT."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def upload(self, key: str, source: Path) -> None:
        self.objects[key] = source.read_bytes()

    def download(self, key: str, destination: Path) -> None:
        if key not in self.objects:
            raise NotFound(f"object {key}")
        destination.write_bytes(self.objects[key])

    def size(self, key: str) -> int | None:
        data = self.objects.get(key)
        return None if data is None else len(data)

    def delete_prefix(self, prefix: str) -> int:
        doomed = [key for key in self.objects if key.startswith(prefix)]
        for key in doomed:
            del self.objects[key]
        return len(doomed)

    def upload_url(self, key: str, size_bytes: int, expires_seconds: int) -> str:
        return f"memory://{key}?size={size_bytes}"

    def receive(self, url: str, data: bytes) -> None:
        """What a client's PUT to an upload URL does."""
        self.objects[url.removeprefix("memory://").split("?", 1)[0]] = data
