"""Where stages read a mission's repository: a checked local root, or a snapshot unpacked once per container.

A Lambda's filesystem holds only the runtime, so a registered repository's immutable snapshot
is downloaded and extracted into ephemeral storage (`workspace_dir`, sized in the stack) the first
time a warm container needs it, and reused by hash afterwards. A git import's history, kept beside
its snapshot, is unpacked as the tree's `.git` (missions.service.repositories.history). Every check that held when the
mission started is made again here: a local root must still be under the allowed roots, and a
snapshot must belong to the mission's user (or be shared) — its key is derived from the owner,
never taken from the context.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from missions.core.mission.refs import SHARED_OWNER, RepositoryRef
from missions.core.roots import AllowedRoots, PathRefused


class WorkspaceRefused(PermissionError):
    """The mission may not read this repository (a forged or stale reference): never retried."""


class SnapshotReader(Protocol):
    def download(self, key: str, destination: Path) -> None:
        """Write the object at `key` to `destination`; NotFound when it does not exist."""


@dataclass
class Materialized:
    """How the last materialization went (the benchmark reads it)."""

    sha256: str
    cold: bool
    seconds: float


@dataclass
class RepositoryWorkspaces:
    local_roots: AllowedRoots
    cache_dir: Path
    snapshots: SnapshotReader | None = None
    extract: Callable[[Path, Path], None] | None = None  # (archive, target): the checked extraction
    keep: int = 3  # snapshots kept unpacked per container (the stack sizes ephemeral storage for them)
    last: Materialized | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def roots(self) -> AllowedRoots:
        """Tools may read under the local roots and under the snapshot cache, nowhere else."""
        return AllowedRoots(self.local_roots.roots + (self.cache_dir.resolve(),))

    def root_for(self, repository: RepositoryRef, user_id: str) -> Path:
        if repository.kind == "local":
            try:
                return self.local_roots.resolve(repository.root, what="repository")
            except PathRefused as exc:
                raise WorkspaceRefused(str(exc)) from None
        if repository.owner not in (user_id, SHARED_OWNER):
            raise WorkspaceRefused(f"repository {repository.id} is not readable by this mission's user")
        return self._materialize(repository)

    def _materialize(self, repository: RepositoryRef) -> Path:
        if self.snapshots is None or self.extract is None:
            raise WorkspaceRefused("registered repositories cannot be read here (no snapshot store is wired)")
        assert repository.snapshot is not None
        target = self.cache_dir.resolve() / repository.snapshot
        started = time.perf_counter()
        if target.is_dir():
            target.touch()  # most recently used: evicted last
            self.last = Materialized(repository.snapshot, False, time.perf_counter() - started)
            return target
        with self._lock:  # parallel branches of one container unpack a snapshot once
            if not target.is_dir():
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                self._evict_for(target)
                with tempfile.TemporaryDirectory(dir=self.cache_dir, prefix=".download-") as scratch:
                    archive = Path(scratch) / "snapshot.tar.gz"
                    self.snapshots.download(repository.key, archive)
                    if not repository.history:
                        self.extract(archive, target)
                    else:  # unpacked whole before it is in place: no reader sees a tree without its `.git`
                        staged = Path(scratch) / "tree"
                        self.extract(archive, staged)
                        history = Path(scratch) / "history.tar.gz"
                        self.snapshots.download(repository.history_key, history)
                        self.extract(history, staged / ".git")
                        staged.rename(target)
        self.last = Materialized(repository.snapshot, True, time.perf_counter() - started)
        return target

    def _evict_for(self, target: Path) -> None:
        """Ephemeral storage is finite: keep the most recently used snapshots, at most `keep` with this one."""
        cached = [entry for entry in self.cache_dir.iterdir() if entry != target and not entry.name.startswith(".")]
        cached.sort(key=lambda entry: entry.stat().st_mtime, reverse=True)
        for stale in cached[self.keep - 1 :]:
            shutil.rmtree(stale, ignore_errors=True)


__all__ = ["Materialized", "RepositoryWorkspaces", "SnapshotReader", "WorkspaceRefused"]
