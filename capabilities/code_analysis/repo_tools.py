"""Read-only repository tools: list files, grep, read lines and find symbols.

Why: an agent's claims about code must rest on lines it really read, so every result carries
citations (POSIX paths relative to the repository root), and no path a model invents may leave
that root. Tools raise `ToolError` for expected failures; `_guarded` turns it into a ToolResult,
so a tool called directly behaves exactly as it does under the executor.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path, PureWindowsPath
from typing import Any, Literal

from pydantic import Field

from missions.core.envelope import Citation, Model
from missions.core.roots import NEVER_ROOTS
from missions.core.tools import RiskLevel, ToolCatalog, ToolCategory, ToolError, ToolResult

CATALOG = ToolCatalog()

# generated or vendored trees: answers cite the sources, not copies of them (e.g. the built Lambda layer)
SKIP_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", "cdk.out", "build", "dist", "site-packages"})
MAX_FILE_BYTES = 1_000_000
MAX_LINE_CHARS = 300
MAX_CITATIONS = 50
MAX_READ_LINES = 400
MAX_SYMBOLS = 200
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


class _NotFound(ToolError):
    """An expected miss: reported as status 'not_found' rather than 'error'."""


def _guarded(func: Callable[[Any], ToolResult]) -> Callable[[Any], ToolResult]:
    """Why: the ToolResult contract says a tool never raises, even when called directly."""

    @functools.wraps(func)
    def run(params: Any) -> ToolResult:
        try:
            return func(params)
        except _NotFound as exc:
            return ToolResult.fail(str(exc), "not_found")
        except ToolError as exc:
            return ToolResult.fail(str(exc))

    return run


# -- paths -----------------------------------------------------------------------------------


def repo_root(repo: str) -> Path:
    """The resolved root; a missing root is an error, not an empty repository.

    Which roots a mission may name is the runtime's decision (checked when it starts and again by
    the executor before every call); a tool still never reads the whole system or its pseudo-files.
    """
    root = Path(repo).resolve()
    if root == Path(root.anchor) or any(root.is_relative_to(never) for never in NEVER_ROOTS):
        raise ToolError(f"repository root refused: {repo}")
    if not root.is_dir():
        raise ToolError(f"repository root does not exist or is not a directory: {repo}")
    return root


def resolve_inside(root: Path | str, relative: str) -> Path:
    """Resolve `relative` under `root`, refusing absolute paths, `..` escapes and symlinks out.

    Why: the path comes from a model; resolving (which follows symlinks) before the
    containment check is what makes the check mean "the bytes we read live in the repo".
    """
    base = Path(root).resolve()
    absolute = relative.startswith(("/", "\\")) or PureWindowsPath(relative).drive
    if absolute or Path(relative).is_absolute():
        raise ToolError(f"path escapes the repository root: {relative!r} is absolute")
    try:
        target = (base / relative).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # null bytes, symlink loops
        raise ToolError(f"invalid path {relative!r}: {exc}") from exc
    if not target.is_relative_to(base):
        raise ToolError(f"path escapes the repository root: {relative!r}")
    return target


def _rel(base: Path, path: Path) -> str:
    return path.relative_to(base).as_posix() or "."


def _is_binary(path: Path) -> bool:
    """A NUL byte in the first 8 KiB: the same heuristic git uses."""
    try:
        with path.open("rb") as fh:
            return b"\0" in fh.read(8192)
    except OSError:
        return True


def _text_lines(path: Path) -> list[str]:
    """Lines numbered as editors and `ast` number them (universal newlines, split on \\n only)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ToolError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _walk(base: Path, start: Path, pattern: str) -> Iterator[Path]:
    """Files under `start` whose name matches `pattern`, in a stable order.

    Why skip: hidden and vendored dirs are noise and can be huge; symlinks are not followed
    into directories, and a file symlink resolving outside the root is never yielded.
    """
    if start.is_file():
        if fnmatch.fnmatch(start.name, pattern):
            yield start
        return
    if not start.is_dir():
        raise _NotFound(f"path not found: {_rel(base, start)}")
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not fnmatch.fnmatch(name, pattern):
                continue
            if path.is_symlink() and not path.resolve().is_relative_to(base):
                continue
            if path.is_file():
                yield path


# -- parameters ------------------------------------------------------------------------------


class RepoParams(Model):
    repo: str = Field(max_length=4096, description="absolute path of the repository root, supplied by the runtime")


class ListFilesParams(RepoParams):
    path: str = Field(".", max_length=1000, description="directory relative to the root")
    pattern: str = Field("*", min_length=1, max_length=200, description="fnmatch glob on names")
    max_results: int = Field(200, ge=1, le=2000)


class GrepParams(RepoParams):
    pattern: str = Field(min_length=1, max_length=500, description="a Python regular expression")
    path: str = Field(".", max_length=1000)
    glob: str = Field("*", min_length=1, max_length=200, description="fnmatch glob on names")
    max_matches: int = Field(50, ge=1, le=500)
    ignore_case: bool = False


class ReadLinesParams(RepoParams):
    file: str = Field(min_length=1, max_length=1000)
    start: int = Field(1, ge=1)
    end: int | None = Field(None, ge=1, description="inclusive; default start+59, max 400 lines")


class FindSymbolParams(RepoParams):
    name: str = Field(min_length=1, max_length=200, pattern=IDENTIFIER, description="f or Cls.f")
    path: str = Field(".", max_length=1000)
    kind: Literal["any", "function", "class"] = "any"


# -- tools -----------------------------------------------------------------------------------


@CATALOG.register(
    "code.list_files",
    "List text files under a directory of the repository (recursive, sorted, hidden dirs skipped).",
    ListFilesParams,
    category=ToolCategory.READ,
    risk=RiskLevel.READ_ONLY,
    timeout_seconds=15.0,
    max_retries=0,
    root_param="repo",
)
@_guarded
def list_files(params: ListFilesParams) -> ToolResult:
    base = repo_root(params.repo)
    start = resolve_inside(base, params.path)
    files = sorted(_rel(base, p) for p in _walk(base, start, params.pattern) if not _is_binary(p))
    truncated = len(files) > params.max_results
    files = files[: params.max_results]
    citations = [Citation(file=f, line=1) for f in files[:MAX_CITATIONS]]
    return ToolResult.ok({"files": files, "truncated": truncated}, citations)


@CATALOG.register(
    "code.grep",
    "Search text files for a Python regular expression; every match is cited by file and line.",
    GrepParams,
    category=ToolCategory.READ,
    risk=RiskLevel.READ_ONLY,
    timeout_seconds=30.0,
    max_retries=0,
    root_param="repo",
)
@_guarded
def grep(params: GrepParams) -> ToolResult:
    try:
        regex = re.compile(params.pattern, re.IGNORECASE if params.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {params.pattern!r}: {exc}") from exc
    base = repo_root(params.repo)
    start = resolve_inside(base, params.path)
    matches: list[dict[str, Any]] = []
    truncated = False
    for path in _walk(base, start, params.glob):
        if truncated:
            break
        try:
            if path.stat().st_size > MAX_FILE_BYTES or _is_binary(path):
                continue
        except OSError:
            continue
        rel = _rel(base, path)
        for number, text in enumerate(_text_lines(path), start=1):
            if regex.search(text):
                if len(matches) == params.max_matches:
                    truncated = True
                    break
                matches.append({"file": rel, "line": number, "text": text[:MAX_LINE_CHARS]})
    citations = [Citation(file=m["file"], line=m["line"]) for m in matches]
    return ToolResult.ok({"matches": matches, "truncated": truncated}, citations)


@CATALOG.register(
    "code.read_lines",
    f"Read a range of lines from one file (1-based, inclusive, at most {MAX_READ_LINES} per call).",
    ReadLinesParams,
    category=ToolCategory.READ,
    risk=RiskLevel.READ_ONLY,
    timeout_seconds=10.0,
    max_retries=0,
    root_param="repo",
)
@_guarded
def read_lines(params: ReadLinesParams) -> ToolResult:
    base = repo_root(params.repo)
    path = resolve_inside(base, params.file)
    rel = _rel(base, path)
    if not path.exists():
        raise _NotFound(f"file not found: {params.file}")
    if not path.is_file():
        raise ToolError(f"not a regular file: {params.file}")
    if _is_binary(path):
        raise ToolError(f"binary file, not readable as text: {params.file}")
    lines = _text_lines(path)
    total = len(lines)
    if params.start > total:
        raise ToolError(f"start {params.start} is beyond the end of {params.file} ({total} lines)")
    end = params.end if params.end is not None else params.start + 59
    if end < params.start:
        raise ToolError(f"end {end} is before start {params.start}")
    end = min(end, params.start + MAX_READ_LINES - 1, total)
    selected = [{"line": n, "text": lines[n - 1]} for n in range(params.start, end + 1)]
    data = {"file": rel, "start": params.start, "end": end, "total_lines": total, "lines": selected}
    return ToolResult.ok(data, [Citation(file=rel, line=params.start, end_line=end)])


def _signature(node: ast.AST) -> str:
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
        return f"class {node.name}({', '.join(bases)})" if bases else f"class {node.name}"
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definitions(tree: ast.AST, scope: tuple[str, ...] = ()) -> Iterator[tuple[Definition, str]]:
    """Every function and class with its dotted qualname (Outer.method, func.inner)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, Definition):
            yield child, ".".join((*scope, child.name))
            yield from _definitions(child, (*scope, child.name))
        else:
            yield from _definitions(child, scope)


@CATALOG.register(
    "code.find_symbol",
    "Find Python function, method or class definitions by name (`name` or `Class.method`).",
    FindSymbolParams,
    category=ToolCategory.READ,
    risk=RiskLevel.READ_ONLY,
    timeout_seconds=30.0,
    max_retries=0,
    root_param="repo",
)
@_guarded
def find_symbol(params: FindSymbolParams) -> ToolResult:
    base = repo_root(params.repo)
    start = resolve_inside(base, params.path)
    wanted = params.name.split(".")
    symbols: list[dict[str, Any]] = []
    skipped = 0
    for path in _walk(base, start, "*.py"):
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                skipped += 1
                continue
            tree = ast.parse("\n".join(_text_lines(path)), filename=path.name)
        except (SyntaxError, ValueError, RecursionError, OSError, ToolError):
            skipped += 1
            continue
        rel = _rel(base, path)
        for node, qualname in _definitions(tree):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            if params.kind not in ("any", kind) or qualname.split(".")[-len(wanted) :] != wanted:
                continue
            doc = (ast.get_docstring(node) or "").strip()
            symbols.append(
                {
                    "file": rel,
                    "line": node.lineno,
                    "end_line": node.end_lineno,
                    "kind": kind,
                    "name": node.name,
                    "qualname": qualname,
                    "signature": _signature(node),
                    "docstring": doc.splitlines()[0] if doc else None,
                }
            )
    truncated = len(symbols) > MAX_SYMBOLS
    symbols = symbols[:MAX_SYMBOLS]
    citations = [Citation(file=s["file"], line=s["line"], end_line=s["end_line"]) for s in symbols]
    data = {"symbols": symbols, "skipped": skipped, "truncated": truncated}
    return ToolResult.ok(data, citations)
