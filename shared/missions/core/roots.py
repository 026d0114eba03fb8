"""Which directories the runtime may read code from: a small, pure policy.

Why its own module: the same rule must hold where a request names a path (before anything is
stored) and again where a tool opens a file (defence in depth), and both places must agree on
what "inside" means. A path is inside a root only after resolving it (symlinks, `..`), so a link
planted in a repository that points at `/etc` is outside, whatever its name says. `/proc`, `/sys`
and `/dev` expose credentials and devices and are never roots; neither is `/`, which holds them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

NEVER_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
MAX_PATH_CHARS = 4096


class PathRefused(ValueError):
    """A path the caller may not read; the message says why, in one line, without reading anything."""


def _is_forbidden(path: Path) -> bool:
    return path == Path(path.anchor) or any(path == never or path.is_relative_to(never) for never in NEVER_ROOTS)


@dataclass(frozen=True)
class AllowedRoots:
    """Resolved directories under which reading is allowed; empty means no local path is allowed."""

    roots: tuple[Path, ...] = ()

    @classmethod
    def of(cls, paths: Iterable[str | Path]) -> AllowedRoots:
        """Resolve configured roots; a root that is `/` or under /proc, /sys or /dev is a configuration error."""
        resolved: list[Path] = []
        for raw in paths:
            root = Path(raw).expanduser().resolve()
            if _is_forbidden(root):
                raise PathRefused(f"{raw!s} cannot be a repository root (it exposes the whole system)")
            if root not in resolved:
                resolved.append(root)
        return cls(tuple(resolved))

    def with_root(self, path: str | Path) -> AllowedRoots:
        return AllowedRoots.of([*self.roots, path])

    def contains(self, path: Path) -> bool:
        """True when `path` (already resolved) lies in one of the roots and in no forbidden place."""
        return not _is_forbidden(path) and any(path == root or path.is_relative_to(root) for root in self.roots)

    def resolve(self, value: object, *, what: str = "repository") -> Path:
        """The resolved directory `value` names, or PathRefused.

        Relative paths are taken from the first root (the directory the dev server started in),
        never from the process's working directory, which a request does not control.
        """
        if not isinstance(value, str):
            raise PathRefused(f"{what} must be a string path, not {type(value).__name__}")
        text = value.strip()
        if not text or len(text) > MAX_PATH_CHARS or "\x00" in text:
            raise PathRefused(f"{what} is not a usable path")
        if not self.roots:
            raise PathRefused(f"{what} paths are not accepted here; register the repository and name its id")
        candidate = Path(text).expanduser()
        if not candidate.is_absolute():
            candidate = self.roots[0] / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loops, unreadable components
            raise PathRefused(f"{what} {text[:200]!r} cannot be resolved: {exc}") from None
        if not self.contains(resolved):
            allowed = ", ".join(str(root) for root in self.roots)
            raise PathRefused(f"{what} {text[:200]!r} is outside the allowed roots ({allowed})")
        try:
            is_dir = resolved.is_dir()
        except OSError as exc:  # a name too long for the filesystem, a component that is a file
            raise PathRefused(f"{what} {text[:200]!r} cannot be read: {exc.strerror or exc}") from None
        if not is_dir:
            raise PathRefused(f"{what} {text[:200]!r} is not a directory")
        return resolved


__all__ = ["NEVER_ROOTS", "AllowedRoots", "PathRefused"]
