"""A code index per repository snapshot: definitions with their spans, call sites with the function
that makes them, and imports, for Python (`ast`) and JavaScript/TypeScript, Go and Java (tree-sitter's
own grammars).

Why an index: "who calls X" is a question about the syntax tree, not about the word "call"; grepping
answers it with lines that merely mention the name. The index is built once per snapshot (the files'
paths, sizes and modification times hash to its key), kept in memory for the process and on disk
under the temp directory (a warm Lambda reuses /tmp), and every entry carries the file and line a
citation needs. Files are listed by ripgrep, so .gitignore is honoured as a developer's tools honour it.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

from capabilities.code_analysis.index._cache import _load, _store
from capabilities.code_analysis.index._files import list_files, rg_command, ripgrep, snapshot_key
from capabilities.code_analysis.index._imports import _Layout
from capabilities.code_analysis.index._model import (
    LANGUAGES,
    MAX_LINE_CHARS,
    CallSite,
    CodeIndex,
    Definition,
    Import,
)
from capabilities.code_analysis.index._parse import _parse_all

# -- building ------------------------------------------------------------------------------------


_memory: dict[str, CodeIndex] = {}
_lock = threading.Lock()
MEMORY_ENTRIES = 4


def index_for(root: str | Path) -> CodeIndex:
    """The index of the repository at root as it is now: from memory, from the disk cache, or built."""
    base = Path(root).resolve()
    files = [f for f in list_files(base) if Path(f).suffix in LANGUAGES]
    key = snapshot_key(base, files)
    with _lock:
        if key in _memory:
            return _memory[key]
    index = _load(key) or _build(base, files, key)
    with _lock:
        _memory[key] = index
        while len(_memory) > MEMORY_ENTRIES:
            _memory.pop(next(iter(_memory)))
    return index


def build_index(root: Path, cache: bool = False) -> CodeIndex:
    """Build (not read from a cache unless asked) the index of root: the bench measures this."""
    return index_for(root) if cache else _build(Path(root).resolve(), None, None)


def _build(base: Path, files: list[str] | None, key: str | None) -> CodeIndex:
    started = time.perf_counter()
    if files is None:
        files = [f for f in list_files(base) if Path(f).suffix in LANGUAGES]
    key = key or snapshot_key(base, files)
    definitions: list[Definition] = []
    calls: list[CallSite] = []
    imports: list[Import] = []
    skipped: list[str] = []
    languages: dict[str, int] = defaultdict(int)
    for part in _parse_all(base, files):
        for language, parsed, why in part:
            if why:
                skipped.append(why)
                continue
            languages[language] += 1
            definitions += parsed[0]
            calls += parsed[1]
            imports += parsed[2]
    layout = _Layout(set(files))
    imports = [layout.resolve(i) for i in imports]
    index = CodeIndex(str(base), key, files, dict(languages), definitions, calls, imports, skipped)
    index.stats = {
        "files": len(files),
        "definitions": len(definitions),
        "references": len(calls),
        "imports": len(imports),
        "skipped": len(skipped),
        "seconds": round(time.perf_counter() - started, 3),
    }
    index.stats["bytes"] = _store(index)
    return index


__all__ = [
    "LANGUAGES",
    "MAX_LINE_CHARS",
    "CallSite",
    "CodeIndex",
    "Definition",
    "Import",
    "build_index",
    "index_for",
    "list_files",
    "rg_command",
    "ripgrep",
]
