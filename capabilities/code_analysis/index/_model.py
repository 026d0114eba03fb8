"""What the index holds: definitions, call sites and imports with their places, and the limits on what is read."""

from __future__ import annotations

import functools
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

INDEX_VERSION = 2  # bump when the stored shape changes: old cache files are then rebuilt
MAX_FILE_BYTES = 1_000_000
MAX_LINE_CHARS = 300
# installed dependencies and caches, anywhere: answers cite the repository's code, not copies of others'
SKIP_DIRS = ("node_modules", "__pycache__", "site-packages", ".venv", "cdk.out")
# build output at the root (e.g. the built Lambda layer); deeper, a package may well be named `build`
SKIP_ROOT_DIRS = ("build", "dist")
LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
}


class Definition(NamedTuple):
    name: str
    qualname: str  # Outer.method, func.inner; a Go method is Receiver.method
    kind: str  # function | method | class | interface | type
    file: str
    line: int
    end_line: int
    language: str
    signature: str
    docstring: str | None = None


class CallSite(NamedTuple):
    """`name` (the called identifier, without its receiver) is called at file:line inside `caller`
    (the enclosing function's qualname; None at module level)."""

    name: str
    file: str
    line: int
    text: str
    caller: str | None
    caller_line: int | None


class Import(NamedTuple):
    file: str
    line: int
    module: str  # as written: a dotted module, a relative path, a Go import path, a Java class
    names: tuple[str, ...]
    resolved: str | None  # the repository file it names, when it names one


@dataclass
class CodeIndex:
    root: str
    snapshot: str
    files: list[str]
    languages: dict[str, int]
    definitions: list[Definition]
    calls: list[CallSite]
    imports: list[Import]
    skipped: list[str] = field(default_factory=list)  # files that did not parse, with why
    stats: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def _definitions_by_name(self) -> dict[str, list[Definition]]:
        found: dict[str, list[Definition]] = defaultdict(list)
        for definition in self.definitions:
            found[definition.name].append(definition)
        return found

    @functools.cached_property
    def _calls_by_name(self) -> dict[str, list[CallSite]]:
        found: dict[str, list[CallSite]] = defaultdict(list)
        for call in self.calls:
            found[call.name].append(call)
        return found

    @functools.cached_property
    def _calls_by_caller(self) -> dict[tuple[str, str | None], list[CallSite]]:
        found: dict[tuple[str, str | None], list[CallSite]] = defaultdict(list)
        for call in self.calls:
            found[(call.file, call.caller)].append(call)
        return found

    def find_definitions(self, name: str, kind: str = "any") -> list[Definition]:
        """By name (`f`), or qualified (`Cls.f`): the last parts of the qualname must match."""
        wanted = name.split(".")
        found = [
            d
            for d in self._definitions_by_name.get(wanted[-1], [])
            if d.qualname.split(".")[-len(wanted) :] == wanted and kind in ("any", d.kind)
        ]
        if not found and kind in ("any", "function"):  # "method" is a function to whoever asks
            found = [
                d
                for d in self._definitions_by_name.get(wanted[-1], [])
                if d.qualname.split(".")[-len(wanted) :] == wanted
            ]
        return sorted(found, key=_by_place)

    def callers(self, name: str) -> list[CallSite]:
        """Call sites of `name` (the last part of a qualified name), excluding a definition's own line."""
        last = name.split(".")[-1]
        return sorted(self._calls_by_name.get(last, []), key=_by_place)

    def callees(self, definition: Definition) -> list[CallSite]:
        """The calls made directly inside a definition (not inside functions nested in it)."""
        return sorted(self._calls_by_caller.get((definition.file, definition.qualname), []), key=_by_place)

    def call_path(self, source: str, target: str, max_depth: int = 4) -> list[CallSite] | None:
        """The shortest chain of call sites from a definition named `source` to a call of `target`
        (breadth-first over the call graph, at most `max_depth` calls), or None."""
        starts = self.find_definitions(source)
        target_name = target.split(".")[-1]
        queue: deque[tuple[Definition, list[CallSite]]] = deque((d, []) for d in starts)
        seen = {(d.file, d.qualname) for d in starts}
        while queue:
            definition, path = queue.popleft()
            if len(path) >= max_depth:
                continue
            for call in self.callees(definition):
                if call.name == target_name:
                    return [*path, call]
                for nxt in self._definitions_by_name.get(call.name, []):
                    if (nxt.file, nxt.qualname) not in seen and nxt.kind in ("function", "method", "class"):
                        seen.add((nxt.file, nxt.qualname))
                        queue.append((nxt, [*path, call]))
        return None

    def members(self, owner: Definition) -> list[Definition]:
        """The methods (and nested types) defined directly in a class, interface or Go type."""
        prefix = f"{owner.qualname}."
        return [
            d
            for d in self.definitions
            if d.qualname.startswith(prefix)
            and "." not in d.qualname[len(prefix) :]
            and (d.file == owner.file or d.language == "go")
        ]

    def imports_of(self, file: str) -> list[Import]:
        return [i for i in self.imports if i.file == file]

    def dependents(self, file: str) -> list[Import]:
        """Imports, anywhere in the repository, that resolve to `file`."""
        return sorted((i for i in self.imports if i.resolved == file), key=_by_place)

    def enclosing(self, file: str, line: int) -> Definition | None:
        """The innermost definition whose span holds file:line."""
        inside = [d for d in self.definitions if d.file == file and d.line <= line <= d.end_line]
        return max(inside, key=lambda d: d.line, default=None)


def _by_place(item: Definition | CallSite | Import) -> tuple[str, int]:
    return item.file, item.line


Parsed = tuple[list[Definition], list[CallSite], list[Import]]
FileResult = tuple[str, Parsed, str | None]  # (language, what it defines, calls and imports; why it was skipped)


def _line_text(lines: list[bytes], number: int) -> str:
    return lines[number - 1].decode("utf-8", errors="replace").strip()[:MAX_LINE_CHARS] if number <= len(lines) else ""
