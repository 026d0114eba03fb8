"""The index on disk under the temp directory, which a warm Lambda reuses."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import zlib
from pathlib import Path

from capabilities.code_analysis.index._model import INDEX_VERSION, CallSite, CodeIndex, Definition, Import


def cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / "missions-code-index"


# -- the disk cache -------------------------------------------------------------------------------


def _path(key: str) -> Path:
    return cache_dir() / f"{key}.json.z"


def _store(index: CodeIndex) -> int:
    """Write the index (compressed JSON) beside earlier ones; the size is what the cache costs."""
    payload = {
        "version": INDEX_VERSION,
        "root": index.root,
        "snapshot": index.snapshot,
        "files": index.files,
        "languages": index.languages,
        "definitions": index.definitions,  # tuples: JSON arrays
        "calls": index.calls,
        "imports": index.imports,
        "skipped": index.skipped,
        "stats": index.stats,
    }
    data = zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), 1)  # fast: it is a cache
    try:
        target = _path(index.snapshot)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_bytes(data)
        partial.replace(target)  # atomic: a concurrent reader sees the old file or the new one
    except OSError:
        pass  # a read-only or full disk: the index still serves this process from memory
    return len(data)


def _load(key: str) -> CodeIndex | None:
    try:
        payload = json.loads(zlib.decompress(_path(key).read_bytes()))
    except (OSError, ValueError, zlib.error):
        return None
    if payload.get("version") != INDEX_VERSION:
        return None
    return CodeIndex(
        payload["root"],
        payload["snapshot"],
        payload["files"],
        payload["languages"],
        [Definition(*row) for row in payload["definitions"]],
        [CallSite(*row) for row in payload["calls"]],
        [Import(row[0], row[1], row[2], tuple(row[3]), row[4]) for row in payload["imports"]],
        payload["skipped"],
        payload["stats"],
    )
