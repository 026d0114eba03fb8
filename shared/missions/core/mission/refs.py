"""What a mission's context carries about the repository it reads, and the ports that resolve it.

A request names a repository by id (`"repository": "r_..."`, optionally `"ref"`) or, where local
roots are configured, by path (`"repo": "/src/shop"`). The runtime, never the request, turns that
into a `RepositoryRef` under the context key `repository`, checks it again whenever the mission
starts, and once more when a stage opens files. Pure: no AWS, no filesystem access beyond `Path`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal, Protocol

from missions.core.mission.envelope import Model
from missions.core.roots import AllowedRoots

CONTEXT_KEY = "repository"
PATH_KEY = "repo"  # a local path, accepted only under the allowed roots
REF_KEY = "ref"  # which imported ref or commit of a registered repository
SHARED_OWNER = "#shared"  # '#' never appears in a user id (the API refuses such callers)
SNAPSHOT_PREFIX = "repositories/"
UPLOAD_PREFIX = "uploads/"


class RepositoryRef(Model):
    """The resolved repository of a mission (set by the runtime; a request cannot forge one that holds)."""

    kind: Literal["local", "snapshot"]
    name: str
    root: str | None = None  # local: the resolved directory
    id: str | None = None  # snapshot: the registered repository
    owner: str | None = None  # snapshot: its owner, or SHARED_OWNER
    snapshot: str | None = None  # snapshot: sha256 of the immutable archive
    commit: str | None = None
    ref: str | None = None
    history: bool | None = None  # snapshot: True when its git history is kept beside it, unpacked as `.git`

    @property
    def key(self) -> str:
        """Where the snapshot lives, derived (never read from a request) from owner, id and hash."""
        if self.kind != "snapshot" or not (self.owner and self.id and self.snapshot):
            raise ValueError("only a snapshot reference has a key")
        return snapshot_key(self.owner, self.id, self.snapshot)

    @property
    def history_key(self) -> str:
        """Where the snapshot's git history lives (when `history`), beside it."""
        if self.kind != "snapshot" or not (self.owner and self.id and self.snapshot and self.history):
            raise ValueError("only a snapshot reference with a history has a history key")
        return history_key(self.owner, self.id, self.snapshot)


def owner_segment(owner: str) -> str:
    """A key segment per owner: user ids may hold ':' or '/', so they are hashed (and never collide)."""
    if owner == SHARED_OWNER:
        return "shared"
    return "u-" + hashlib.sha256(owner.encode()).hexdigest()[:32]


def snapshot_key(owner: str, repository_id: str, sha256: str) -> str:
    return f"{SNAPSHOT_PREFIX}{owner_segment(owner)}/{repository_id}/{sha256}.tar.gz"


def history_key(owner: str, repository_id: str, sha256: str) -> str:
    return f"{SNAPSHOT_PREFIX}{owner_segment(owner)}/{repository_id}/{sha256}.history.tar.gz"


def upload_key(owner: str, repository_id: str, fmt: str) -> str:
    return f"{UPLOAD_PREFIX}{owner_segment(owner)}/{repository_id}.{fmt}"


class RepositoryResolver(Protocol):
    """Turns what a request says about its repository into a checked RepositoryRef in the context."""

    def resolve(self, context: dict[str, Any], user_id: str, *, required: bool) -> dict[str, Any]:
        """The context with `repository` resolved (and `repo`/`ref` consumed); ValueError says why not."""
        ...


class Workspaces(Protocol):
    """Where a stage reads a mission's repository: a local root, or a snapshot materialized once per container."""

    @property
    def roots(self) -> AllowedRoots:
        """Every directory tools may read (checked again at each tool call)."""
        ...

    def root_for(self, repository: RepositoryRef, user_id: str) -> Path:
        """The directory holding the repository's files, after checking the mission's user may read it."""
        ...


__all__ = [
    "CONTEXT_KEY",
    "PATH_KEY",
    "REF_KEY",
    "SHARED_OWNER",
    "RepositoryRef",
    "RepositoryResolver",
    "Workspaces",
    "owner_segment",
    "snapshot_key",
    "upload_key",
]
