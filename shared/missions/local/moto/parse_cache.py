"""Patch 8's parsed definitions, kept on disk between processes.

A process that starts the emulation (each `missions run`, each test module's cloud) parsed each state
machine's definition anew: an ANTLR parse of about 0.2 s per definition, 0.4 s of a CLI run's 3.7 s. The
parsed program depends only on the definition and moto's version, and holds no execution state (see patch
8), so it is pickled into the user's cache directory once and read back by later processes.

Only a directory the current user owns, and no one else may write, is used: a pickle is code. A file
that does not read back (cut short, from another Python) is parsed again and replaced. The process's
own cache stays patch 8's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

_log = logging.getLogger(__name__)
_FORMAT = 1  # bump when what is kept changes


def default_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "missions" / "asl"


class ParseCache:
    """Parsed programs by definition, under `directory` (None: kept nowhere; not given: the user's cache
    directory, found at first use, not at import)."""

    def __init__(self, directory: Path | None | Callable[[], Path] = default_directory) -> None:
        self._directory = directory

    @property
    def directory(self) -> Path | None:
        if callable(self._directory):
            self._directory = self._directory()
        return self._directory

    @directory.setter
    def directory(self, directory: Path | None) -> None:
        self._directory = directory

    def _file(self, definition: str) -> Path | None:
        directory = self.directory
        if directory is None or not _private(directory):
            return None
        import moto

        key = f"{_FORMAT}\0{moto.__version__}\0{sys.version_info[:2]}\0{definition}"
        return directory / f"{hashlib.sha256(key.encode()).hexdigest()}.pickle"

    def load(self, definition: str) -> Any | None:
        """The program parsed from `definition` by an earlier process, or None."""
        file = self._file(definition)
        if file is None or not file.is_file():
            return None
        try:
            return pickle.loads(file.read_bytes())
        except Exception as exc:  # cut short, or pickled by another moto: parsed again and replaced
            _log.debug("the parsed definition at %s does not read back (%s): parsing it again", file, exc)
            return None

    def store(self, definition: str, program: Any) -> None:
        file = self._file(definition)
        if file is None:
            return
        try:
            data = pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a component moto made unpicklable: this definition is parsed per process
            _log.debug("a parsed definition cannot be kept (%s)", exc)
            return
        handle, temporary = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, file)  # whole or not at all, whichever process writes last
        except OSError:
            Path(temporary).unlink(missing_ok=True)


def _private(directory: Path) -> bool:
    """Made if missing (0700); usable only if this user owns it and no one else may write to it."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = directory.stat()
    except OSError:
        return False
    return found.st_uid == os.getuid() and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
