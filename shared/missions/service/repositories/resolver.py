"""Resolving what a mission request says about its repository, before anything is stored.

Runs when a request is submitted and again when the dispatcher starts it (the repository may
have been deleted, or its local root removed, in between). It trusts nothing in the context: a
`repository` that is already a resolved reference (a queued request, or a forged one) is looked
up and checked exactly like an id.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from missions.core.errors import NotFound
from missions.core.mission.refs import CONTEXT_KEY, PATH_KEY, REF_KEY, RepositoryRef
from missions.core.roots import AllowedRoots, PathRefused
from missions.ports.repositories import RepositoryRecord, RepositorySnapshot, RepositoryStore

MAX_REF_CHARS = 250


class RepositoryRefused(ValueError):
    """The request names a repository its user may not read (or none that exists); nothing was stored."""


class UserRepositories:
    """Local paths under the allowed roots, and registered repositories readable by the user."""

    def __init__(self, roots: AllowedRoots, store: RepositoryStore | None = None):
        self.roots = roots
        self.store = store

    def resolve(self, context: dict[str, Any], user_id: str, *, required: bool) -> dict[str, Any]:
        context = dict(context)
        path = context.pop(PATH_KEY, None)
        named = context.pop(CONTEXT_KEY, None)
        ref = context.pop(REF_KEY, None)
        if ref is not None and (not isinstance(ref, str) or not ref.strip() or len(ref) > MAX_REF_CHARS):
            raise RepositoryRefused(f"context.ref must be a non-empty string of at most {MAX_REF_CHARS} characters")
        if path is not None and named is not None:
            raise RepositoryRefused("name either context.repository (an id) or context.repo (a local path), not both")
        if path is not None:
            if ref is not None:
                raise RepositoryRefused("context.ref applies to a registered repository, not to a local path")
            resolved = self._local(path)
        elif named is not None:
            resolved = self._registered(named, ref, user_id)
        elif required:
            if not self.roots.roots:
                raise RepositoryRefused(
                    "this mission reads a repository: name one with context.repository (an id from POST /repositories)"
                )
            resolved = self._local(str(self.roots.roots[0]))  # the directory the dev server started in
        else:
            return context
        context[CONTEXT_KEY] = resolved.model_dump(mode="json", exclude_none=True)
        return context

    # -- local paths -----------------------------------------------------------------------------

    def _local(self, path: object) -> RepositoryRef:
        if isinstance(path, dict):  # a reference resolved before (a queued request): check it again
            path = path.get("root")
        try:
            root = self.roots.resolve(path, what="context.repo")
        except PathRefused as exc:
            raise RepositoryRefused(str(exc)) from None
        return RepositoryRef(kind="local", name=root.name or str(root), root=str(root))

    # -- registered repositories -----------------------------------------------------------------

    def _registered(self, named: object, ref: str | None, user_id: str) -> RepositoryRef:
        pinned: str | None = None
        if isinstance(named, dict):
            try:
                previous = RepositoryRef.model_validate(named)
            except ValidationError:
                raise RepositoryRefused("context.repository must be a repository id") from None
            if previous.kind == "local":
                return self._local(previous.root)
            named, pinned = previous.id, previous.snapshot
        if not isinstance(named, str) or not named.strip() or len(named) > 80:
            raise RepositoryRefused("context.repository must be a repository id (a string from POST /repositories)")
        if self.store is None:
            raise RepositoryRefused("registered repositories are not available here; name a local path in context.repo")
        try:
            record = self.store.get(named)
        except NotFound:
            record = None
        if record is None or not record.readable_by(user_id):
            raise RepositoryRefused(f"no repository {named}")  # another user's looks exactly like a missing one
        if not record.snapshots:  # a failed re-import leaves the last good snapshot readable
            why = f": {record.reason}" if record.reason else ""
            raise RepositoryRefused(f"repository {named} is {record.status}, not ready{why}")
        snapshot = _choose(record, ref, pinned)
        return RepositoryRef(
            kind="snapshot",
            name=record.name,
            id=record.repository_id,
            owner=record.owner,
            snapshot=snapshot.sha256,
            commit=snapshot.commit,
            ref=snapshot.ref,
            history=snapshot.history or None,
        )


def _choose(record: RepositoryRecord, ref: str | None, pinned: str | None) -> RepositorySnapshot:
    """The pinned snapshot, else the one matching `ref` (a ref name or a commit prefix), else the newest."""
    if pinned is not None:
        for snapshot in record.snapshots:
            if snapshot.sha256 == pinned:
                return snapshot
        raise RepositoryRefused(f"repository {record.repository_id} no longer has snapshot {pinned[:12]}")
    if ref is None:
        return record.snapshots[-1]
    for snapshot in reversed(record.snapshots):
        if snapshot.ref == ref or (len(ref) >= 7 and snapshot.commit and snapshot.commit.startswith(ref.lower())):
            return snapshot
    known = sorted({s.ref or (s.commit or "")[:12] or s.sha256[:12] for s in record.snapshots})
    raise RepositoryRefused(
        f"repository {record.repository_id} has no imported ref '{ref}' (imported: {', '.join(known)}); "
        f"import it with POST /repositories/{record.repository_id}/imports"
    )


__all__ = ["RepositoryRefused", "UserRepositories"]
