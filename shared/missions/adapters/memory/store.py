"""In-memory adapters: the fakes unit tests use, and the reference for the conformance suite."""

from __future__ import annotations

import builtins
import threading
from pathlib import Path
from typing import Any

from missions.core.artifacts import Artifact, check_artifact
from missions.core.envelope import InterruptResponse, utcnow
from missions.core.errors import ConflictError, NotFound, TransitionRefused
from missions.core.events import Event
from missions.ports.store import (
    Checkpoint,
    InterruptRecord,
    MissionRecord,
    MissionSummary,
    RepositoryRecord,
    RepositorySnapshot,
    event_position,
    parse_position,
)


class MemoryMissionStore:
    def __init__(self) -> None:
        self._items: dict[str, MissionRecord] = {}
        self._lock = threading.Lock()

    def create(self, record: MissionRecord) -> None:
        with self._lock:
            if record.mission_id in self._items:
                raise ConflictError(f"mission {record.mission_id} exists")
            self._items[record.mission_id] = record.model_copy(deep=True)

    def discard(self, mission_id: str) -> bool:
        with self._lock:
            record = self._items.get(mission_id)
            if record is None or record.execution_arn or record.status not in ("created", "queued", "running"):
                return False
            del self._items[mission_id]
            return True

    def get(self, mission_id: str) -> MissionRecord:
        try:
            return self._items[mission_id].model_copy(deep=True)
        except KeyError:
            raise NotFound(f"mission {mission_id}") from None

    def update(self, mission_id: str, **fields: Any) -> None:
        if "status" in fields:
            raise ValueError("a mission's status changes only through missions.service.lifecycle (transition)")
        with self._lock:
            self._set(mission_id, fields)

    def transition(self, mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> MissionRecord:
        with self._lock:
            if mission_id not in self._items:
                raise NotFound(f"mission {mission_id}")
            current = self._items[mission_id].status
            if current not in allowed_from:
                raise TransitionRefused(mission_id, current, status)
            self._set(mission_id, {**fields, "status": status})
            return self._items[mission_id].model_copy(deep=True)

    def add_note(self, mission_id: str, note: dict[str, Any], allowed_from: frozenset[str], limit: int) -> None:
        with self._lock:
            record = self._items.get(mission_id)
            if record is None:
                raise NotFound(f"mission {mission_id}")
            if record.status not in allowed_from:
                raise TransitionRefused(mission_id, record.status, "noted")
            if len(record.notes) >= limit:
                raise ConflictError(f"mission {mission_id} already has {limit} notes")
            self._set(mission_id, {"notes": [*record.notes, dict(note)]})

    def _set(self, mission_id: str, fields: dict[str, Any]) -> None:
        if mission_id not in self._items:
            raise NotFound(f"mission {mission_id}")
        current = self._items[mission_id].model_dump()
        current.update(fields, updated_at=utcnow())
        self._items[mission_id] = MissionRecord.model_validate(current)

    def set_feedback(self, mission_id: str, feedback: dict[str, Any]) -> None:
        with self._lock:
            record = self._items.get(mission_id)
            if record is None:
                raise NotFound(f"mission {mission_id}")
            if record.feedback is not None:
                raise ConflictError(f"mission {mission_id} already has feedback")
            self._items[mission_id] = record.model_copy(update={"feedback": feedback, "updated_at": utcnow()})

    def ended_before(self, status: str, before: str, limit: int = 100) -> list[MissionRecord]:
        found = [m for m in self._items.values() if m.status == status and m.completed_at and m.completed_at < before]
        return [m.model_copy(deep=True) for m in sorted(found, key=lambda m: m.completed_at or "")[:limit]]

    def list_for_user(self, user_id: str, limit: int = 50) -> list[MissionSummary]:
        found = [m for m in list(self._items.values()) if m.user_id == user_id]
        return [MissionSummary.of(m) for m in sorted(found, key=lambda m: m.created_at, reverse=True)[:limit]]


class MemoryCheckpointStore:
    """Checkpoints kept as JSON text, as a real store serializes them: what comes back is never the
    caller's object, and a copy costs a parse rather than a deep copy of the envelope."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        key = (checkpoint.thread_id, checkpoint.checkpoint_id)
        with self._lock:
            existing = self._items.get(key)
            if existing is not None:
                return Checkpoint.model_validate_json(existing)
            self._items[key] = checkpoint.model_dump_json()
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
            return len(keys)

    def latest(self, thread_id: str) -> Checkpoint | None:
        found = self.list(thread_id)
        return found[-1] if found else None


class MemoryEventStore:
    """The reference timeline: a mission's batches in order (a per-mission sequence), each holding its
    events; the last one is rewritten in place when its batch is appended again."""

    def __init__(self) -> None:
        self._batches: dict[str, list[tuple[int, str, list[Event]]]] = {}  # mission -> (sequence, batch id, events)
        self._lock = threading.Lock()

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        if not events:
            return
        with self._lock:
            batches = self._batches.setdefault(mission_id, [])
            if batches and batches[-1][1] == batch_id:  # a retry of the last write: in place, nothing left of it
                sequence = batches.pop()[0]
            else:
                sequence = batches[-1][0] + 1 if batches else 1
            placed = [
                event.model_copy(update={"mission_id": mission_id, "position": event_position(sequence, index)})
                for index, event in enumerate(events)
            ]
            batches.append((sequence, batch_id, placed))

    def read(self, mission_id: str, after: str | None = None, limit: int = 100) -> tuple[list[Event], str | None]:
        cursor = parse_position(after) if after is not None else (0, 0)
        if limit <= 0:
            return [], after
        found: list[Event] = []
        for sequence, _, events in list(self._batches.get(mission_id, [])):
            if sequence < cursor[0]:
                continue
            found += [e for i, e in enumerate(events) if (sequence, i) > cursor]
            if len(found) >= limit:
                break
        found = [e.model_copy() for e in found[:limit]]
        return found, (found[-1].position if found else after)


class MemoryInterruptStore:
    def __init__(self) -> None:
        self._items: dict[tuple[str, str], InterruptRecord] = {}
        self._lock = threading.Lock()

    def put(self, record: InterruptRecord) -> None:
        with self._lock:
            existing = self._items.get((record.mission_id, record.interrupt_id))
            if existing is not None and existing.status != "pending":
                raise ConflictError(f"interrupt {record.interrupt_id} is already {existing.status}")
            self._items[(record.mission_id, record.interrupt_id)] = record.model_copy(deep=True)

    def get(self, mission_id: str, interrupt_id: str) -> InterruptRecord:
        try:
            return self._items[(mission_id, interrupt_id)].model_copy(deep=True)
        except KeyError:
            raise NotFound(f"interrupt {mission_id}/{interrupt_id}") from None

    def answer(self, mission_id: str, interrupt_id: str, response: InterruptResponse) -> InterruptRecord:
        with self._lock:
            record = self._items.get((mission_id, interrupt_id))
            if record is None:
                raise NotFound(f"interrupt {mission_id}/{interrupt_id}")
            if record.status != "pending":
                raise ConflictError(f"interrupt {interrupt_id} is already {record.status}")
            record = record.model_copy(update={"status": "answered", "response": response, "answered_at": utcnow()})
            self._items[(mission_id, interrupt_id)] = record
            return record.model_copy(deep=True)

    def reopen(self, mission_id: str, interrupt_id: str) -> None:
        with self._lock:
            record = self._items.get((mission_id, interrupt_id))
            if record is None:
                raise NotFound(f"interrupt {mission_id}/{interrupt_id}")
            if record.status != "answered":
                raise ConflictError(f"interrupt {interrupt_id} is {record.status}, not answered")
            self._items[(mission_id, interrupt_id)] = record.model_copy(
                update={"status": "pending", "response": None, "answered_at": None}
            )

    def expire(self, mission_id: str, interrupt_id: str) -> None:
        with self._lock:
            record = self._items.get((mission_id, interrupt_id))
            if record is None:
                raise NotFound(f"interrupt {mission_id}/{interrupt_id}")
            self._items[(mission_id, interrupt_id)] = record.model_copy(
                update={"status": "expired", "response": None, "answered_at": None}
            )

    def pending(self, mission_id: str) -> list[InterruptRecord]:
        return [r for (m, _), r in self._items.items() if m == mission_id and r.status == "pending"]

    def overdue(self, asked_before: str, limit: int = 100) -> list[InterruptRecord]:
        waiting = [r for r in self._items.values() if r.status == "pending" and r.created_at < asked_before]
        return sorted(waiting, key=lambda r: r.created_at)[:limit]


class MemoryBlobStore:
    def __init__(self) -> None:
        self.items: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        self.items.setdefault(key, data)

    def get(self, key: str) -> bytes:
        return self.items[key]


class MemoryArtifactStore:
    def __init__(self) -> None:
        self._items: dict[str, dict[str, list[Artifact]]] = {}
        self._lock = threading.Lock()

    def put(self, mission_id: str, path: str, content: Any, *, stage: str = "", written_by: str = "") -> Artifact:
        check_artifact(path, content)
        with self._lock:
            versions = self._items.setdefault(mission_id, {}).setdefault(path, [])
            if versions and written_by and versions[-1].written_by == written_by:
                return versions[-1].model_copy(deep=True)
            artifact = Artifact(
                mission_id=mission_id,
                path=path,
                version=len(versions) + 1,
                content=content,
                stage=stage,
                written_by=written_by,
            )
            versions.append(artifact)
            return artifact.model_copy(deep=True)

    def get(self, mission_id: str, path: str, version: int | None = None) -> Artifact:
        versions = self._items.get(mission_id, {}).get(path, [])
        chosen = (
            versions[-1] if versions and version is None else next((a for a in versions if a.version == version), None)
        )
        if chosen is None:
            raise NotFound(f"artifact {path}" + (f" v{version}" if version else "") + f" of {mission_id}")
        return chosen.model_copy(deep=True)

    def list(self, mission_id: str) -> list[Artifact]:
        paths = self._items.get(mission_id, {})
        return [a.model_copy(deep=True) for path in sorted(paths) for a in paths[path]]


class MemoryRepositoryStore:
    def __init__(self) -> None:
        self._items: dict[str, RepositoryRecord] = {}
        self._lock = threading.Lock()

    def create(self, record: RepositoryRecord) -> None:
        with self._lock:
            if record.repository_id in self._items:
                raise ConflictError(f"repository {record.repository_id} exists")
            self._items[record.repository_id] = record.model_copy(deep=True)

    def get(self, repository_id: str) -> RepositoryRecord:
        try:
            return self._items[repository_id].model_copy(deep=True)
        except KeyError:
            raise NotFound(f"repository {repository_id}") from None

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


class InMemoryMissionsByCapability:
    """The test fake: reads the in-memory mission store's items directly."""

    def __init__(self, store: MemoryMissionStore):
        self._store = store

    def list(self, capability: str, since_iso: str) -> list[MissionSummary]:
        found = [
            m for m in list(self._store._items.values()) if m.capability == capability and m.created_at >= since_iso
        ]
        return [MissionSummary.of(m) for m in sorted(found, key=lambda m: m.created_at)]
