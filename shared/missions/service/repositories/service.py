"""Repositories as a resource a user owns: register (git URL or upload), import, list, delete.

The API registers and queues; the import function (`run_import`) clones or unpacks, validates,
and stores one immutable snapshot per content hash under the owner's prefix. Nothing a request
sends reaches a URL, the filesystem or a subprocess before the checks here: git URLs are https
to public hosts (file and loopback URLs only where the operator enabled local sources), without
credentials; archives are validated entry by entry by `missions.service.repositories.archive`.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from missions.core.errors import DependencyUnavailable, NotFound, RepositoryConflict, RepositoryRequestError
from missions.core.mission.envelope import new_id
from missions.core.mission.refs import SHARED_OWNER, SNAPSHOT_PREFIX, owner_segment, upload_key
from missions.core.redaction import redact
from missions.core.roots import AllowedRoots, PathRefused
from missions.ports.repositories import (
    RepositoryRecord,
    RepositorySnapshot,
    RepositoryStatus,
    RepositoryStore,
    SnapshotStore,
)

UPLOAD_FORMATS = ("tar.gz", "zip")
UPLOAD_URL_SECONDS = 900
MAX_URL_CHARS = 2048
NAME_PATTERN = re.compile(r"^[\w.\- ]{1,100}$")
REF_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/\-]{0,199}$")


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportRequest:
    """What the import function is asked (the repository-import rule's event, read by missions.app.events)."""

    repository_id: str
    ref: str | None = None


class ImportQueue(Protocol):
    def request_import(self, repository_id: str, ref: str | None) -> None:
        """Ask the import function to import; DependencyUnavailable when the request cannot be queued."""


def _resolve_host(host: str) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})  # typeshed allows an int


@dataclass(frozen=True)
class UrlPolicy:
    """Which git URLs an import may fetch. In AWS: https to hosts that resolve only to public addresses."""

    allow_local: bool = False  # dev and tests: file URLs and paths under `roots`, http(s) to loopback
    roots: AllowedRoots = field(default_factory=AllowedRoots)
    resolve_host: Callable[[str], list[str]] = _resolve_host

    def check(self, url: object) -> str:
        if not isinstance(url, str) or not url.strip() or len(url) > MAX_URL_CHARS or any(c in url for c in "\r\n\0"):
            raise RepositoryRequestError(f"url must be a git URL of at most {MAX_URL_CHARS} characters")
        url = url.strip()
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme in ("", "file"):
            return self._local(unquote(parts.path) if scheme == "file" else url)
        if scheme not in ("https", "http"):
            raise RepositoryRequestError(f"url scheme {scheme!r} is not supported; use https://")
        if parts.username or parts.password:
            raise RepositoryRequestError(
                "put no credentials in the URL; for a private repository upload an archive instead"
            )
        host = parts.hostname or ""
        if not host:
            raise RepositoryRequestError("url has no host")
        try:
            addresses = [ipaddress.ip_address(a) for a in self.resolve_host(host)]
        except (OSError, ValueError):
            raise RepositoryRequestError(f"host {host!r} cannot be resolved") from None
        if not addresses:
            raise RepositoryRequestError(f"host {host!r} cannot be resolved")
        loopback = all(a.is_loopback for a in addresses)
        if self.allow_local and loopback:
            return url
        if scheme != "https":
            raise RepositoryRequestError("only https:// git URLs are accepted")
        if not all(a.is_global for a in addresses):
            raise RepositoryRequestError(f"host {host!r} is not a public address")
        return url

    def _local(self, path: str) -> str:
        if not self.allow_local:
            raise RepositoryRequestError("only https:// git URLs are accepted")
        try:
            return str(self.roots.resolve(path, what="url"))
        except PathRefused as exc:
            raise RepositoryRequestError(str(exc)) from None


def public_url(url: str | None) -> str | None:
    """A URL as it may be shown or logged: never with credentials (they are refused, but be sure)."""
    if not url:
        return url
    return re.sub(r"//[^/@]*@", "//", url)


@dataclass
class RepositoryService:
    store: RepositoryStore
    snapshots: SnapshotStore
    imports: ImportQueue
    urls: UrlPolicy = field(default_factory=UrlPolicy)
    limits: Any = None  # archive.SnapshotLimits (imported lazily: the API function does not unpack)

    # -- the API's side -------------------------------------------------------------------------

    def register(
        self,
        user: str,
        *,
        name: str | None = None,
        url: str | None = None,
        ref: str | None = None,
        upload: dict[str, Any] | None = None,
        shared: bool = False,
        operator: bool = False,
    ) -> tuple[RepositoryRecord, dict[str, Any] | None]:
        """Register a repository; a git one is queued for import, an upload gets a URL to PUT to."""
        if (url is None) == (upload is None):
            raise RepositoryRequestError("give either url (a git repository) or upload (an archive), not both")
        if shared and not operator:
            raise PermissionError("only an operator can share a repository with every user")
        owner = SHARED_OWNER if shared else user
        if ref is not None:
            _check_ref(ref)
        if url is not None:
            checked = self.urls.check(url)
            record = RepositoryRecord(
                repository_id=new_id("r_"),
                owner=owner,
                name=_name(name, default=_name_from_url(checked)),
                source="git",
                url=public_url(checked),
                ref=ref,
                status=RepositoryStatus.IMPORTING,
            )
            self.store.create(record)
            self._queue(record, ref, undo=True)
            return record, None
        fmt, size = _upload_spec(upload, self._max_archive_bytes())
        if ref is not None:
            raise RepositoryRequestError("ref applies to git repositories, not to uploads")
        record = RepositoryRecord(
            repository_id=new_id("r_"),
            owner=owner,
            name=_name(name, default="upload"),
            source="upload",
            format=fmt,
            upload_bytes=size,
            status=RepositoryStatus.AWAITING_UPLOAD,
        )
        self.store.create(record)
        return record, self.upload_instructions(record)

    def upload_instructions(self, record: RepositoryRecord) -> dict[str, Any]:
        assert record.format and record.upload_bytes
        key = upload_key(record.owner, record.repository_id, record.format)
        return {
            "url": self.snapshots.upload_url(key, record.upload_bytes, UPLOAD_URL_SECONDS),
            "method": "PUT",
            "headers": {"Content-Length": str(record.upload_bytes)},
            "expires_in": UPLOAD_URL_SECONDS,
            "then": f"POST /repositories/{record.repository_id}/imports",
        }

    def request_import(
        self, user: str, repository_id: str, ref: str | None = None, *, operator: bool = False
    ) -> RepositoryRecord:
        """Import again (a git repository's new commits or another ref), or import an upload that arrived."""
        record = self._writable(user, repository_id, operator)
        if ref is not None:
            _check_ref(ref)
            if record.source != "git":
                raise RepositoryRequestError("ref applies to git repositories, not to uploads")
        if record.status == RepositoryStatus.IMPORTING:
            raise RepositoryConflict(f"repository {repository_id} is already importing")
        if record.source == "upload":
            assert record.format
            size = self.snapshots.size(upload_key(record.owner, repository_id, record.format))
            if size is None:
                raise RepositoryConflict(f"no archive was uploaded for {repository_id}; PUT it to the upload URL first")
        updated = self.store.update(
            repository_id, expect_status=record.status, status=RepositoryStatus.IMPORTING, reason=None
        )
        self._queue(updated, ref, undo=False, previous=record.status)
        return updated

    def get(self, user: str, repository_id: str) -> RepositoryRecord:
        try:
            record = self.store.get(repository_id)
        except NotFound:
            record = None
        if record is None or not record.readable_by(user):
            raise NotFound(f"no repository {repository_id}")  # another user's looks exactly like a missing one
        return record

    def list(self, user: str) -> list[RepositoryRecord]:
        return self.store.list_for_owner(user) + self.store.list_for_owner(SHARED_OWNER)

    def delete(self, user: str, repository_id: str, *, operator: bool = False) -> int:
        """Delete the record and every snapshot and upload of it; returns how many objects went."""
        record = self._writable(user, repository_id, operator)
        prefix = f"{SNAPSHOT_PREFIX}{owner_segment(record.owner)}/{repository_id}/"
        removed = self.snapshots.delete_prefix(prefix)
        if record.format:
            removed += self.snapshots.delete_prefix(upload_key(record.owner, repository_id, record.format))
        self.store.delete(repository_id)
        return removed

    def _writable(self, user: str, repository_id: str, operator: bool) -> RepositoryRecord:
        record = self.get(user, repository_id)
        if record.owner != user and not (operator and record.owner == SHARED_OWNER):
            raise PermissionError(f"repository {repository_id} is shared; only an operator can change it")
        return record

    def _queue(self, record: RepositoryRecord, ref: str | None, *, undo: bool, previous: str | None = None) -> None:
        try:
            self.imports.request_import(record.repository_id, ref)
        except DependencyUnavailable:
            if undo:  # nothing stays half-made: the client retries the whole request
                self.store.delete(record.repository_id)
            elif previous is not None:
                self.store.update(record.repository_id, status=previous)
            raise

    def _max_archive_bytes(self) -> int:
        return int(self._limits().max_archive_bytes)

    def _limits(self) -> Any:
        if self.limits is None:
            from missions.service.repositories.archive import SnapshotLimits

            self.limits = SnapshotLimits()
        return self.limits

    # -- the import function's side -------------------------------------------------------------

    def handle_import(self, request: ImportRequest) -> dict[str, Any]:
        """The import function: one import run, logged, and its outcome as the function's answer."""
        record = self.run_import(request.repository_id, request.ref)
        log.info("repository imported", extra={"repository_id": record.repository_id, "status": record.status})
        return {"repository_id": record.repository_id, "status": record.status, "reason": record.reason}

    def run_import(self, repository_id: str, ref: str | None = None, workdir: Path | None = None) -> RepositoryRecord:
        """Build, store and record one snapshot; a refused input ends `failed` with the reason."""
        from missions.service.repositories.archive import ArchiveRejected, snapshot_from_archive, snapshot_from_git

        record = self.store.get(repository_id)
        with tempfile.TemporaryDirectory(dir=workdir, prefix="import-") as scratch:
            work = Path(scratch)
            out = work / "snapshot.tar.gz"
            try:
                if record.source == "git":
                    assert record.url
                    url = self.urls.check(record.url)  # checked again: policy or DNS may have changed
                    history = work / "history.tar.gz"
                    made = snapshot_from_git(url, ref or record.ref, out, work / "clone", self._limits(), history)
                    snapshot, commit, used_ref, kept = made.snapshot, made.commit, made.ref, made.history
                else:
                    assert record.format
                    source = work / f"upload.{record.format}"
                    key = upload_key(record.owner, repository_id, record.format)
                    size = self.snapshots.size(key)
                    if size is None:
                        raise ArchiveRejected("no archive was uploaded")
                    if size > self._max_archive_bytes():
                        raise ArchiveRejected(f"the archive is {size} bytes; the limit is {self._max_archive_bytes()}")
                    if record.upload_bytes is not None and size != record.upload_bytes:
                        raise ArchiveRejected(f"the upload is {size} bytes; {record.upload_bytes} were registered")
                    self.snapshots.download(key, source)
                    snapshot = snapshot_from_archive(source, record.format, out, self._limits())  # type: ignore[arg-type]
                    commit, used_ref, kept = None, None, None
            except (ArchiveRejected, RepositoryRequestError) as exc:
                # a git URL or server message may carry a password or token: the reason is shown over the API
                reason = redact(str(exc))[:500]
                return self.store.update(repository_id, status=RepositoryStatus.FAILED, reason=reason)
            except Exception as exc:  # recorded, then raised so the invocation is retried (and dead-lettered)
                self.store.update(
                    repository_id, status=RepositoryStatus.FAILED, reason=f"import failed: {type(exc).__name__}"
                )
                raise
            self.snapshots.upload(_snapshot_key(record, snapshot.sha256), snapshot.path)
            if kept is not None:  # the history second: a snapshot without one is still whole
                self.snapshots.upload(_snapshot_key(record, snapshot.sha256, history=True), kept.path)
        return self.store.add_snapshot(
            repository_id,
            RepositorySnapshot(
                sha256=snapshot.sha256,
                commit=commit,
                ref=used_ref,
                files=snapshot.files,
                total_bytes=snapshot.total_bytes,
                archive_bytes=snapshot.archive_bytes,
                history=kept is not None,
            ),
        )


def _snapshot_key(record: RepositoryRecord, sha256: str, history: bool = False) -> str:
    from missions.core.mission.refs import history_key, snapshot_key

    return (history_key if history else snapshot_key)(record.owner, record.repository_id, sha256)


def _check_ref(ref: object) -> None:
    if not isinstance(ref, str) or not REF_PATTERN.match(ref) or ".." in ref:
        raise RepositoryRequestError("ref must be a branch, tag or commit name (letters, digits, . _ / -)")


def _name(name: str | None, *, default: str) -> str:
    value = (name if name is not None else default).strip()
    if not NAME_PATTERN.match(value):
        raise RepositoryRequestError("name must be 1-100 letters, digits, spaces, '.', '_' or '-'")
    return value


def _name_from_url(url: str) -> str:
    tail = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    cleaned = re.sub(r"[^\w.\- ]", "-", tail)[:100]
    return cleaned or "repository"


def _upload_spec(upload: object, max_bytes: int) -> tuple[str, int]:
    if not isinstance(upload, dict):
        raise RepositoryRequestError('upload must be {"format": "tar.gz" | "zip", "size_bytes": N}')
    fmt, size = upload.get("format"), upload.get("size_bytes")
    if fmt not in UPLOAD_FORMATS:
        raise RepositoryRequestError(f"upload.format must be one of {', '.join(UPLOAD_FORMATS)}")
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= max_bytes:
        raise RepositoryRequestError(f"upload.size_bytes must be an integer from 1 to {max_bytes}")
    return str(fmt), size


__all__ = [
    "ImportQueue",
    "ImportRequest",
    "RepositoryService",
    "UrlPolicy",
    "public_url",
]
