"""Resolving imports to the repository's own files."""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from capabilities.code_analysis.index._model import LANGUAGES, Import

# -- resolving imports to files -----------------------------------------------------------------


class _Layout:
    """The repository's files keyed by every path suffix a module name can be: `pkg/mod` for
    src/pkg/mod.py, a Go package's folder suffixes, a Java class's path. Built once per index, so
    resolving is a lookup per import, not a scan of every file."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.modules: dict[str, str] = {}  # a Python module path suffix -> its file (shortest path wins)
        self.folders: dict[str, str] = {}  # a Go package folder suffix -> its first file
        for name in sorted(known, key=lambda n: (n.count("/"), n)):
            path = PurePosixPath(name)
            if path.suffix in (".py", ".pyi"):
                module = path.parent if path.stem == "__init__" else path.with_suffix("")
                self._suffixes(self.modules, module.parts, name)
            elif path.suffix in (".go", ".java"):
                parts = path.parent.parts if path.suffix == ".go" else path.with_suffix("").parts
                self._suffixes(self.folders, parts, name)

    @staticmethod
    def _suffixes(into: dict[str, str], parts: tuple[str, ...], name: str) -> None:
        for take in range(1, len(parts) + 1):
            into.setdefault("/".join(parts[-take:]), name)

    def resolve(self, item: Import) -> Import:
        language = LANGUAGES.get(PurePosixPath(item.file).suffix, "")
        target: str | None = None
        if language == "python":
            base = (item.resolved or item.module.replace(".", "/")).strip("/").removeprefix("./")
            for head in [f"{base}/{n}" for n in item.names] + [base]:  # `from pkg import mod` names a file first
                target = self._python(head, relative=item.resolved is not None)
                if target:
                    break
        elif language in ("javascript", "typescript", "tsx") and item.module.startswith("."):
            joined = os.path.normpath(str(PurePosixPath(item.file).parent / item.module)).replace("\\", "/")
            stem = joined.removesuffix(".js").removesuffix(".mjs")
            candidates = [joined] + [f"{stem}{ext}" for ext in (".ts", ".tsx", ".d.ts", ".js", ".mjs", ".jsx")]
            candidates += [f"{stem}/index{ext}" for ext in (".ts", ".tsx", ".js")]
            target = next((c for c in candidates if c in self.known), None)
        elif language == "go" and "." in item.module.split("/")[0]:  # the standard library's paths have no dot
            parts = item.module.split("/")
            target = next(
                (self.folders[k] for n in range(len(parts), 0, -1) if (k := "/".join(parts[-n:])) in self.folders), None
            )
        elif language == "java":
            target = self.folders.get(item.module.replace(".", "/"))
        return Import(item.file, item.line, item.module, item.names, target)

    def _python(self, head: str, relative: bool) -> str | None:
        if relative:
            return next((c for c in (f"{head}.py", f"{head}/__init__.py", f"{head}.pyi") if c in self.known), None)
        return self.modules.get(head)
