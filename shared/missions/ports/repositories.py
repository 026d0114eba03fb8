"""What the runtime needs to keep repositories: their records, and the snapshots they are imported into.

Every backend runs the same conformance suite (tests/conformance), in memory and on DynamoDB (+ S3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from missions.core.mission.envelope import Model, utcnow


class RepositoryStatus:
    AWAITING_UPLOAD = "awaiting_upload"  # registered for an upload that has not arrived yet
    IMPORTING = "importing"
    READY = "ready"
    FAILED = "failed"  # `reason` says why; the repository can be imported again


class RepositorySnapshot(Model):
    """One immutable import of a repository: its content hash names its archive."""

    sha256: str
    commit: str | None = None  # git imports: the commit snapshotted
    ref: str | None = None  # git imports: the ref asked for (or the default branch)
    files: int = 0
    total_bytes: int = 0
    archive_bytes: int = 0
    history: bool = False  # git imports: its history is kept beside it (missions.service.repositories.history)
    imported_at: str = Field(default_factory=utcnow)


class RepositoryRecord(Model):
    repository_id: str
    owner: str  # the user who registered it, or "#shared" for one an operator shared with everyone
    name: str
    source: str  # "git" | "upload"
    url: str | None = None  # git: without credentials
    ref: str | None = None  # git: the ref to import (None: the default branch)
    format: str | None = None  # upload: "tar.gz" | "zip"
    upload_bytes: int | None = None  # upload: the size the client declared (signed into the upload URL)
    status: str = RepositoryStatus.IMPORTING
    reason: str | None = None  # why the last import failed
    snapshots: list[RepositorySnapshot] = Field(default_factory=list)  # oldest first; the last is current
    revision: int = 0  # bumped by every snapshot change: concurrent imports never overwrite each other
    created_at: str = Field(default_factory=utcnow)
    updated_at: str = Field(default_factory=utcnow)

    def readable_by(self, user_id: str) -> bool:
        return self.owner == user_id or self.owner == "#shared"


class RepositoryStore(Protocol):
    def create(self, record: RepositoryRecord) -> None:
        """Create; ConflictError if the id exists."""

    def get(self, repository_id: str) -> RepositoryRecord:
        """NotFound when missing."""

    def list_for_owner(self, owner: str, limit: int = 100) -> list[RepositoryRecord]:
        """Newest first."""

    def update(self, repository_id: str, *, expect_status: str | None = None, **fields: Any) -> RepositoryRecord:
        """Set fields; with `expect_status`, only in that status (else ConflictError). NotFound if missing."""

    def add_snapshot(self, repository_id: str, snapshot: RepositorySnapshot) -> RepositoryRecord:
        """Append a snapshot (one with the same sha256 is not added twice) and mark the repository ready."""

    def delete(self, repository_id: str) -> None:
        """Remove the record; NotFound if missing."""


class SnapshotStore(Protocol):
    """Immutable repository snapshots and the uploads they are made from (S3 in AWS)."""

    def upload(self, key: str, source: Path) -> None: ...

    def download(self, key: str, destination: Path) -> None:
        """NotFound when there is no such object."""

    def size(self, key: str) -> int | None:
        """The object's size in bytes, None when it does not exist."""

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under the prefix; returns how many."""

    def upload_url(self, key: str, size_bytes: int, expires_seconds: int) -> str:
        """A URL a client PUTs exactly `size_bytes` to (a presigned S3 URL in AWS)."""
