"""A git import's history, kept beside its snapshot so missions can ask when and why a line changed.

The snapshot is a tree of files (what the code tools read); the history is a second object, the git
directory a working tree of the snapshotted commit needs: the clone's objects, HEAD on a branch at that
commit, and a config. Materialized as `.git` inside the unpacked snapshot, it makes the snapshot a
repository that git and a git MCP server (code_analysis's history questions) read like any other; the
code tools skip `.git` as they always have.

It is built with the snapshot's own writer and limits (sizes, file counts, names), so a history is bounded
like a tree; one over the limits is left out with the reason, and the import still succeeds: history is
an extra, the snapshot is the repository.
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

from missions.service.repositories.archive import ArchiveRejected, Snapshot, SnapshotLimits, _Writer

BRANCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/\-]{0,199}$")
FALLBACK_BRANCH = "imported"  # the snapshot was of a tag or a commit: HEAD still needs a branch to stand on
CONFIG = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"

log = logging.getLogger(__name__)


def pack_history(
    git_dir: Path, commit: str, ref: str, out: Path, limits: SnapshotLimits = SnapshotLimits()
) -> tuple[Snapshot | None, str | None]:
    """(the history's archive, None), or (None, why it was left out). `git_dir` is the bare clone."""
    branch = ref if BRANCH.match(ref) and ".." not in ref and not ref.endswith((".lock", "/")) else FALLBACK_BRANCH
    if re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
        branch = FALLBACK_BRANCH
    writer = _Writer(limits)
    try:
        objects = git_dir / "objects"
        for path in sorted(p for p in objects.rglob("*") if p.is_file()):
            with path.open("rb") as handle:
                writer.add_file(f"objects/{path.relative_to(objects).as_posix()}", handle, path.stat().st_size, False)
        for name, content in (
            ("HEAD", f"ref: refs/heads/{branch}\n".encode()),
            (f"refs/heads/{branch}", f"{commit}\n".encode()),
            ("config", CONFIG),
        ):
            writer.add_file(name, io.BytesIO(content), len(content), False)
        return writer.finish(out, strip_top=False), None
    except ArchiveRejected as exc:
        writer.close()
        log.info("history left out", extra={"reason": str(exc)})
        return None, f"history left out: {exc}"
