"""Listing a repository's files with ripgrep (so .gitignore is honoured) and hashing them into a snapshot key."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from capabilities.code_analysis.index._model import INDEX_VERSION, SKIP_DIRS, SKIP_ROOT_DIRS

# -- listing files -----------------------------------------------------------------------------


def ripgrep() -> str:
    """The rg binary ripgrep's wheel ships: on PATH in a virtual environment, under the layer's bin/ in
    Lambda (pip --target puts scripts there), which is not on Lambda's PATH."""
    found = shutil.which("rg") or shutil.which("rg", path=str(Path(sys.executable).parent))
    if found:
        return found
    for entry in sys.path:
        candidate = Path(entry or ".") / "bin" / "rg"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise FileNotFoundError("ripgrep's rg binary is not installed (pip install ripgrep)")


def rg_command(*args: str) -> list[str]:
    """rg with the repository's ignore rules (.gitignore, also outside a git checkout) and vendored
    trees skipped; hidden files are skipped too, as rg does by default."""
    skips = [arg for name in SKIP_DIRS for arg in ("--glob", f"!**/{name}/**")]
    skips += [arg for name in SKIP_ROOT_DIRS for arg in ("--glob", f"!/{name}/")]
    return [ripgrep(), "--no-require-git", "--no-config", "--no-messages", *skips, *args]


def list_files(root: Path) -> list[str]:
    """Every file rg would search under root (text or not), as sorted POSIX paths relative to it."""
    result = subprocess.run(
        [*rg_command("--files", "--null"), "."], cwd=root, capture_output=True, timeout=120, check=False
    )
    if result.returncode not in (0, 1):  # 1: no files
        raise RuntimeError(f"rg --files failed in {root}: {result.stderr.decode(errors='replace')[:300]}")
    names = [n.removeprefix("./") for n in result.stdout.decode("utf-8", errors="replace").split("\0") if n]
    return sorted(names)


def snapshot_key(root: Path, files: Iterable[str]) -> str:
    """What identifies this state of the tree: the indexed files' paths, sizes and modification times."""
    digest = hashlib.sha256(f"v{INDEX_VERSION}:{root}".encode())
    for name in files:
        try:
            st = (root / name).stat()
        except OSError:
            continue
        digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]
