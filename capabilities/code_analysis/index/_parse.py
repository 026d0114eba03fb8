"""Parsing every file, across the machine's cores when there are many."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from capabilities.code_analysis.index._model import LANGUAGES, MAX_FILE_BYTES, FileResult, Parsed
from capabilities.code_analysis.index._python import _python
from capabilities.code_analysis.index._treesitter import _tree_sitter

_PARSERS: dict[str, Callable[[str, bytes], Parsed]] = {
    "python": _python,
    "javascript": _tree_sitter("javascript"),
    "typescript": _tree_sitter("typescript"),
    "tsx": _tree_sitter("tsx"),
    "go": _tree_sitter("go"),
    "java": _tree_sitter("java"),
}


PARALLEL_FROM = 300  # files: below this, starting worker processes costs more than it saves


def _parse_all(base: Path, files: list[str]) -> Iterator[list[FileResult]]:
    """Each file parsed, in chunks across the machine's cores when there are many. Lambda has no
    /dev/shm for multiprocessing's locks: there (or wherever a pool cannot start) it runs serially."""
    workers = min(os.cpu_count() or 1, 8)
    if workers > 1 and len(files) >= PARALLEL_FROM:
        chunks = [files[i : i + 100] for i in range(0, len(files), 100)]
        try:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(workers) as pool:
                yield from pool.map(_parse_chunk, [str(base)] * len(chunks), chunks)
            return
        except (OSError, ImportError, NotImplementedError):
            pass
    yield _parse_chunk(str(base), files)


def _parse_chunk(base: str, files: list[str]) -> list[FileResult]:
    return [_parse_file(Path(base), name) for name in files]


def _parse_file(base: Path, name: str) -> FileResult:
    language = LANGUAGES[Path(name).suffix]
    nothing: Parsed = ([], [], [])
    path = base / name
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return language, nothing, f"{name}: larger than {MAX_FILE_BYTES} bytes"
        source = path.read_bytes()
    except OSError as exc:
        return language, nothing, f"{name}: {exc.strerror or exc}"
    if b"\0" in source[:8192]:
        return language, nothing, f"{name}: binary"
    try:
        return language, _PARSERS[language](name, source), None
    except (SyntaxError, ValueError, RecursionError) as exc:
        return language, nothing, f"{name}: {type(exc).__name__}: {exc}"[:300]
