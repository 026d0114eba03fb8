"""Turning hostile input (a git repository, an uploaded .tar.gz or .zip) into an immutable snapshot.

A snapshot is a gzip tar we write ourselves: members sorted by path, regular files (0644 or
0755) and symlinks that stay inside the root, no directories, mtime 0, no owners, a gzip header
without a name or time. So equal content always has the same sha256, which names it.

Every entry is checked before a byte of it is written: absolute names, `..`, NUL bytes, links out
of the root, hard links out, devices and FIFOs, duplicates and file/directory conflicts, and the
limits (archive size, file count, file size, total size, and the unpacked/compressed ratio of a
decompression bomb). Sizes declared in headers are checked first, and bytes are counted again
while they are copied, so a lying header cannot get past a limit. Extraction (`extract_snapshot`)
checks everything again: it runs where the snapshot is read, long after it was written.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import urllib3
    from dulwich.objects import Commit, Tag
    from dulwich.repo import BaseRepo

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class SnapshotLimits:
    max_archive_bytes: int = 100 * 2**20  # size of an uploaded archive (compressed)
    max_total_bytes: int = 500 * 2**20  # sum of file sizes once unpacked
    max_files: int = 50_000  # regular files + symlinks
    max_file_bytes: int = 50 * 2**20  # one file
    max_ratio: float = 100.0  # unpacked / compressed: a decompression bomb beyond this
    max_path_chars: int = 1024
    max_depth: int = 64  # path components


class ArchiveRejected(ValueError):
    """The input cannot become a snapshot; str(exc) is a one-line reason naming the entry (shown to the user)."""


@dataclass(frozen=True)
class Snapshot:
    path: Path  # the normalized .tar.gz written
    sha256: str  # hex digest of the bytes at `path`
    files: int  # regular files + symlinks
    total_bytes: int  # unpacked size
    archive_bytes: int  # size of the .tar.gz


@dataclass(frozen=True)
class GitSnapshot:
    snapshot: Snapshot
    commit: str  # full hex sha of the commit snapshotted
    ref: str  # the ref asked for, or the branch HEAD pointed at
    history: Snapshot | None = None  # its git directory (missions.service.repositories.history), when kept
    history_note: str | None = None  # why it was not


# -- names ----------------------------------------------------------------------------------------


def _clean_name(raw: str, limits: SnapshotLimits) -> str:
    """A member name as a relative POSIX path, or ArchiveRejected naming what is wrong with it."""
    shown = raw[:200]
    if "\x00" in raw:
        raise ArchiveRejected(f"entry name holds a NUL byte: {shown!r}")
    if len(raw) > limits.max_path_chars:
        raise ArchiveRejected(f"entry name longer than {limits.max_path_chars} characters: {shown!r}")
    if raw.startswith(("/", "\\")) or (len(raw) > 1 and raw[1] == ":") or "\\" in raw:
        raise ArchiveRejected(f"absolute or Windows path in the archive: {shown!r}")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ArchiveRejected(f"entry escapes the repository root with '..': {shown!r}")
    if len(parts) > limits.max_depth:
        raise ArchiveRejected(f"entry nested deeper than {limits.max_depth} directories: {shown!r}")
    return "/".join(parts)


def _link_target(name: str, target: str) -> str:
    """The target of a symlink at `name`, relative to the root; ArchiveRejected when it leaves the root."""
    if not target or "\x00" in target or target.startswith(("/", "\\")) or (len(target) > 1 and target[1] == ":"):
        raise ArchiveRejected(f"link out of the repository: {name} -> {target[:200]}")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    if resolved == ".." or resolved.startswith("../") or resolved.startswith("/"):
        raise ArchiveRejected(f"link out of the repository: {name} -> {target[:200]}")
    return target


# -- the normalized writer ------------------------------------------------------------------------


class _Writer:
    """Collects checked entries, then writes them sorted, deterministically, counting every limit."""

    def __init__(self, limits: SnapshotLimits, compressed_bytes: int | None = None):
        self.limits = limits
        self.compressed_bytes = compressed_bytes
        self.files: dict[str, tuple[str, object]] = {}  # name -> ("file", path on disk) | ("link", target)
        self.total = 0
        self.scratch = tempfile.TemporaryDirectory(prefix="snapshot-")

    def _claim(self, name: str) -> None:
        if name in self.files:
            raise ArchiveRejected(f"the archive holds {name} twice")
        if len(self.files) >= self.limits.max_files:
            raise ArchiveRejected(f"more than {self.limits.max_files} files")

    def add_file(self, name: str, source: IO[bytes], declared: int, executable: bool) -> None:
        self._claim(name)
        self._check_size(name, declared)
        path = Path(self.scratch.name) / f"{len(self.files):08d}"
        copied = 0
        with path.open("wb") as out:
            while chunk := source.read(CHUNK):
                copied += len(chunk)
                self._check_size(name, copied)  # a header may lie: count what really arrives
                out.write(chunk)
        self.total += copied
        self.files[name] = ("exec" if executable else "file", path)

    def add_link(self, name: str, target: str) -> None:
        self._claim(name)
        self.files[name] = ("link", _link_target(name, target))

    def _check_size(self, name: str, size: int) -> None:
        if size > self.limits.max_file_bytes:
            raise ArchiveRejected(f"{name} is larger than {self.limits.max_file_bytes} bytes")
        total = self.total + size
        if total > self.limits.max_total_bytes:
            raise ArchiveRejected(f"the repository unpacks to more than {self.limits.max_total_bytes} bytes")
        if self.compressed_bytes and total > self.limits.max_ratio * max(self.compressed_bytes, 1) and total > CHUNK:
            raise ArchiveRejected(
                f"the archive expands more than {self.limits.max_ratio:.0f} times (a decompression bomb)"
            )

    def finish(self, out: Path, strip_top: bool) -> Snapshot:
        try:
            if not self.files:
                raise ArchiveRejected("the archive holds no files")
            names = _strip_single_top(sorted(self.files)) if strip_top else {n: n for n in self.files}
            _check_conflicts(list(names.values()))
            out.parent.mkdir(parents=True, exist_ok=True)
            with (
                out.open("wb") as raw,
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped,
                tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
            ):
                for original, name in sorted(names.items(), key=lambda item: item[1]):
                    kind, value = self.files[original]
                    info = tarfile.TarInfo(name)
                    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                    if kind == "link":
                        info.type, info.linkname, info.mode = tarfile.SYMTYPE, str(value), 0o777
                        _link_target(name, str(value))  # still inside once the top folder is gone
                        tar.addfile(info)
                        continue
                    path = Path(str(value))
                    info.size, info.mode = path.stat().st_size, 0o755 if kind == "exec" else 0o644
                    with path.open("rb") as handle:
                        tar.addfile(info, handle)
            digest = hashlib.sha256()
            with out.open("rb") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
            return Snapshot(out, digest.hexdigest(), len(self.files), self.total, out.stat().st_size)
        finally:
            self.scratch.cleanup()

    def close(self) -> None:
        self.scratch.cleanup()


def _strip_single_top(names: list[str]) -> dict[str, str]:
    """GitHub-style archives wrap everything in one folder (`repo-main/...`): paths start below it."""
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) == 1 and all("/" in name for name in names):
        return {name: name.split("/", 1)[1] for name in names}
    return {name: name for name in names}


def _check_conflicts(names: list[str]) -> None:
    files = set(names)
    for name in names:
        parts = name.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in files:
                raise ArchiveRejected(f"{prefix} is both a file and a directory")


# -- sources ----------------------------------------------------------------------------------------


def snapshot_from_archive(
    source: Path, fmt: Literal["tar.gz", "zip"], out: Path, limits: SnapshotLimits = SnapshotLimits()
) -> Snapshot:
    """An uploaded archive, checked entry by entry, as a normalized snapshot."""
    size = source.stat().st_size
    if size > limits.max_archive_bytes:
        raise ArchiveRejected(f"the archive is {size} bytes; the limit is {limits.max_archive_bytes}")
    writer = _Writer(limits, compressed_bytes=size)
    try:
        if fmt == "tar.gz":
            _read_tar(source, writer, limits)
        elif fmt == "zip":
            _read_zip(source, writer, limits)
        else:
            raise ArchiveRejected(f"unknown archive format {fmt!r}")
    except ArchiveRejected:
        writer.close()
        raise
    except (tarfile.TarError, zipfile.BadZipFile, gzip.BadGzipFile, EOFError, OSError, ValueError) as exc:
        writer.close()
        raise ArchiveRejected(f"not a readable {fmt} archive: {type(exc).__name__}: {str(exc)[:200]}") from None
    return writer.finish(out, strip_top=True)


def _read_tar(source: Path, writer: _Writer, limits: SnapshotLimits) -> None:
    with tarfile.open(source, mode="r:gz") as tar:
        for member in tar:
            name = _clean_name(member.name, limits)
            if member.isdir():
                continue
            if not name:
                raise ArchiveRejected(f"entry without a name: {member.name[:200]!r}")
            if member.issym():
                writer.add_link(name, member.linkname)
            elif member.islnk():
                target = _clean_name(member.linkname, limits)
                if target not in writer.files or writer.files[target][0] == "link":
                    raise ArchiveRejected(f"hard link out of the repository: {name} -> {member.linkname[:200]}")
                kind, path = writer.files[target]
                with Path(str(path)).open("rb") as handle:  # a copy: hard links are not kept
                    writer.add_file(name, handle, Path(str(path)).stat().st_size, kind == "exec")
            elif member.isreg():
                extracted = tar.extractfile(member)
                if extracted is None:
                    raise ArchiveRejected(f"unreadable entry {name}")
                writer.add_file(name, extracted, member.size, bool(member.mode & 0o111))
            else:
                raise ArchiveRejected(f"special file (device, FIFO or socket) in the archive: {name}")


def _read_zip(source: Path, writer: _Writer, limits: SnapshotLimits) -> None:
    with zipfile.ZipFile(source) as archive:
        for info in archive.infolist():
            name = _clean_name(info.filename, limits)
            mode = info.external_attr >> 16
            if info.is_dir() or stat.S_ISDIR(mode):
                continue
            if not name:
                raise ArchiveRejected(f"entry without a name: {info.filename[:200]!r}")
            if stat.S_ISLNK(mode):
                with archive.open(info) as handle:
                    target = handle.read(limits.max_path_chars + 1).decode("utf-8", errors="replace")
                writer.add_link(name, target)
            elif mode == 0 or stat.S_ISREG(mode):
                with archive.open(info) as handle:
                    writer.add_file(name, handle, info.file_size, bool(mode & 0o111))
            else:
                raise ArchiveRejected(f"special file (device, FIFO or socket) in the archive: {name}")


def snapshot_from_directory(root: Path, out: Path, limits: SnapshotLimits = SnapshotLimits()) -> Snapshot:
    """A directory (without .git) as a snapshot; a symlink out of it is refused like in an archive."""
    root = root.resolve()
    if not root.is_dir():
        raise ArchiveRejected(f"{root} is not a directory")
    writer = _Writer(limits)
    try:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != ".git" and not (Path(dirpath) / d).is_symlink())
            for entry in sorted(filenames) + sorted(
                d for d in os.listdir(dirpath) if (Path(dirpath) / d).is_symlink() and (Path(dirpath) / d).is_dir()
            ):
                path = Path(dirpath) / entry
                name = _clean_name(path.relative_to(root).as_posix(), limits)
                if path.is_symlink():
                    writer.add_link(name, os.readlink(path))
                elif path.is_file():
                    with path.open("rb") as handle:
                        writer.add_file(name, handle, path.stat().st_size, bool(path.stat().st_mode & 0o111))
                else:
                    raise ArchiveRejected(f"special file (device, FIFO or socket): {name}")
    except ArchiveRejected:
        writer.close()
        raise
    return writer.finish(out, strip_top=False)


# -- git ------------------------------------------------------------------------------------------------


def _public(url: str) -> str:
    """A URL safe to echo: never with credentials."""
    import re

    return re.sub(r"//[^/@]*@", "//", url)


def snapshot_from_git(
    url: str,
    ref: str | None,
    out: Path,
    workdir: Path,
    limits: SnapshotLimits = SnapshotLimits(),
    history: Path | None = None,
) -> GitSnapshot:
    """Fetch `url` into a bare repository and snapshot one commit's tree, read from the object store; with
    `history`, also write there the git directory that keeps the commit's history beside the snapshot."""
    from dulwich import porcelain
    from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
    from dulwich.repo import Repo

    if not (url.startswith(("https://", "http://", "file://")) or url.startswith("/")):
        raise ArchiveRejected(f"not a git URL: {_public(url)[:200]}")
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "repository.git"
    errors = io.BytesIO()
    transport: dict[str, object] = {}
    if url.startswith(("https://", "http://")):
        transport["pool_manager"] = _no_redirects()
    try:
        repo = porcelain.clone(url, str(target), bare=True, checkout=False, errstream=errors, **transport)  # type: ignore[arg-type]
    except (GitProtocolError, HangupException, NotGitRepository, OSError, KeyError, ValueError) as exc:
        shutil.rmtree(target, ignore_errors=True)
        message = _public(str(exc)).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ArchiveRejected(f"cannot fetch {_public(url)[:200]}: {message}") from None
    try:
        commit, used = _resolve(repo, ref)
        writer = _Writer(limits)
        try:
            _walk_tree(repo, repo[commit].tree, "", writer, limits)  # type: ignore[attr-defined]
        except ArchiveRejected:
            writer.close()
            raise
        snapshot = writer.finish(out, strip_top=False)
        if history is None:
            return GitSnapshot(snapshot, commit.decode(), used)
        from missions.service.repositories.history import pack_history

        kept, note = pack_history(target, commit.decode(), used, history, limits)
        return GitSnapshot(snapshot, commit.decode(), used, kept, note)
    finally:
        repo.close()
        if isinstance(repo, Repo):
            shutil.rmtree(target, ignore_errors=True)


def _no_redirects() -> urllib3.PoolManager:
    """Git over HTTP that follows no redirect (a public host must not send the import to a private one,
    which the URL check could not see) and gives up on a server that stops answering."""
    import urllib3

    return urllib3.PoolManager(
        retries=urllib3.Retry(total=2, connect=2, read=1, redirect=False, raise_on_redirect=False),
        timeout=urllib3.Timeout(connect=10.0, read=60.0),
        headers={"User-Agent": "missions-repository-import"},
    )


def _resolve(repo: BaseRepo, ref: str | None) -> tuple[bytes, str]:
    """A branch, a tag (annotated ones peeled), or a full or abbreviated commit sha; None is HEAD."""
    from dulwich.objects import Commit, Tag
    from dulwich.refs import HEADREF, Ref

    refs = repo.get_refs()
    if ref is None:
        if HEADREF not in refs:
            raise ArchiveRejected("the repository has no HEAD (is it empty?)")
        head = repo.refs.get_symrefs().get(HEADREF, b"")
        name = head.decode().removeprefix("refs/heads/") if head else "HEAD"
        return _peel(repo, refs[HEADREF], Commit, Tag), name
    # a clone holds the remote's other branches as remote-tracking refs
    for candidate in (f"refs/heads/{ref}", f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref):
        key = Ref(candidate.encode())
        if key in refs:
            return _peel(repo, refs[key], Commit, Tag), ref
    if 7 <= len(ref) <= 40 and all(c in "0123456789abcdef" for c in ref.lower()):
        wanted = ref.lower().encode()
        matches = [sha for sha in repo.object_store if sha.startswith(wanted)]
        commits = [sha for sha in matches if isinstance(repo[sha], Commit)]
        if len(commits) == 1:
            return commits[0], ref
    prefixes = ("refs/heads/", "refs/remotes/origin/", "refs/tags/")
    known = sorted(
        {
            name.removeprefix(prefix)
            for name in (k.decode(errors="replace") for k in refs)
            for prefix in prefixes
            if name.startswith(prefix) and name != "refs/remotes/origin/HEAD"
        }
    )
    raise ArchiveRejected(f"unknown ref '{ref}'; the repository has: {', '.join(known[:10]) or 'no refs'}")


def _peel(repo: BaseRepo, sha: bytes, commit_type: type[Commit], tag_type: type[Tag]) -> bytes:
    obj = repo[sha]
    for _ in range(10):
        if not isinstance(obj, tag_type):
            break
        obj = repo[obj.object[1]]
    if not isinstance(obj, commit_type):
        raise ArchiveRejected("the ref does not name a commit")
    return obj.id


def _walk_tree(repo: BaseRepo, tree_sha: bytes, prefix: str, writer: _Writer, limits: SnapshotLimits) -> None:
    from dulwich.objects import Blob, Tree

    tree = repo[tree_sha]
    if not isinstance(tree, Tree):
        raise ArchiveRejected(f"a directory of the repository is not a tree: {prefix or '/'}")
    for entry in tree.items():
        raw = entry.path.decode("utf-8", errors="replace")
        name = _clean_name(f"{prefix}{raw}", limits)
        mode = entry.mode
        if stat.S_ISDIR(mode):
            _walk_tree(repo, entry.sha, f"{name}/", writer, limits)
        elif mode == 0o160000:
            continue  # a submodule: its commit is in another repository
        elif stat.S_ISLNK(mode):
            link = repo[entry.sha]
            if not isinstance(link, Blob):
                raise ArchiveRejected(f"symlink {name} is not a blob")
            writer.add_link(name, link.data.decode("utf-8", errors="replace"))
        else:
            blob = repo[entry.sha]
            writer.add_file(name, io.BytesIO(blob.as_raw_string()), blob.raw_length(), bool(mode & 0o111))


# -- extraction ---------------------------------------------------------------------------------------


def extract_snapshot(archive: Path, target: Path, limits: SnapshotLimits = SnapshotLimits()) -> None:
    """Unpack a snapshot into `target`, checking every entry again; atomic (all or nothing), once."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        _extract_checked(archive, staging, limits)
        try:
            staging.rename(target)
        except OSError:
            if not target.exists():  # another invocation won the rename: theirs is as good as ours
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extract_checked(archive: Path, staging: Path, limits: SnapshotLimits) -> None:
    written = files = 0
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            for member in _members(tar):
                name = _clean_name(member.name, limits)
                if not name or member.isdir():
                    continue
                files += 1
                if files > limits.max_files:
                    raise ArchiveRejected(f"more than {limits.max_files} files")
                if member.issym():
                    _link_target(name, member.linkname)
                elif not member.isreg():
                    raise ArchiveRejected(f"unexpected entry in a snapshot: {name}")
                else:
                    written += member.size
                    if member.size > limits.max_file_bytes or written > limits.max_total_bytes:
                        raise ArchiveRejected("the snapshot is larger than the limits")
                member.name = name
                tar.extract(member, staging, filter="data")  # the standard library's own check, again
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise ArchiveRejected(f"cannot unpack the snapshot: {type(exc).__name__}: {str(exc)[:200]}") from None


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    yield from tar


__all__ = [
    "ArchiveRejected",
    "GitSnapshot",
    "Snapshot",
    "SnapshotLimits",
    "extract_snapshot",
    "snapshot_from_archive",
    "snapshot_from_directory",
    "snapshot_from_git",
]
