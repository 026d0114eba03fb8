"""Read-only repository tools: list files, grep, read lines and find symbols.

Why: an agent's claims about code must rest on lines it really read, so every result carries
citations (POSIX paths relative to the repository root), and no path a model invents may leave
that root. Tools raise `ToolError` for expected failures; `_guarded` turns it into a ToolResult,
so a tool called directly behaves exactly as it does under the executor.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Callable
from pathlib import Path, PureWindowsPath
from typing import Any, Literal

from pydantic import BaseModel, Field

from capabilities.code_analysis import index as code_index
from missions.core.capability.tools import RiskLevel, ToolCatalog, ToolCategory, ToolError, ToolResult
from missions.core.mission.envelope import Citation, Model
from missions.core.roots import NEVER_ROOTS

CATALOG = ToolCatalog()

MAX_LINE_CHARS = code_index.MAX_LINE_CHARS
MAX_CITATIONS = 50
MAX_READ_LINES = 400
MAX_SYMBOLS = 200
MAX_MEMBERS = 20  # methods of a class whose calls `code.callees` lists
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


def _repository_tool(
    tool_id: str, description: str, parameters: type[BaseModel], *, timeout_seconds: float = 60.0
) -> Callable[[Callable[[Any], ToolResult]], Callable[[Any], ToolResult]]:
    """Every tool here reads a registered repository: read-only, rooted at its `repo`, never retried (a
    read that failed fails the same way again), and guarded so it returns an error rather than raising."""

    def register(func: Callable[[Any], ToolResult]) -> Callable[[Any], ToolResult]:
        return CATALOG.register(
            tool_id,
            description,
            parameters,
            category=ToolCategory.READ,
            risk=RiskLevel.READ_ONLY,
            timeout_seconds=timeout_seconds,
            max_retries=0,
            root_param="repo",
        )(_guarded(func))

    return register


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


# -- parameters ------------------------------------------------------------------------------


class RepoParams(Model):
    repo: str = Field(max_length=4096, description="absolute path of the repository root, supplied by the runtime")


class ListFilesParams(RepoParams):
    path: str = Field(".", max_length=1000, description="directory relative to the root")
    pattern: str = Field("*", min_length=1, max_length=200, description="glob on names")
    max_results: int = Field(200, ge=1, le=2000)


class GrepParams(RepoParams):
    pattern: str = Field(min_length=1, max_length=500, description="a regular expression (ripgrep's syntax)")
    path: str = Field(".", max_length=1000)
    glob: str = Field("*", min_length=1, max_length=200, description="glob on names, e.g. *.py")
    max_matches: int = Field(50, ge=1, le=500)
    ignore_case: bool = False


class ReadLinesParams(RepoParams):
    file: str = Field(min_length=1, max_length=1000)
    start: int = Field(1, ge=1)
    end: int | None = Field(None, ge=1, description="inclusive; default start+59, max 400 lines")


class SymbolParams(RepoParams):
    name: str = Field(min_length=1, max_length=200, pattern=IDENTIFIER, description="f or Cls.f")
    path: str = Field(".", max_length=1000, description="only results under this folder")


class FindSymbolParams(SymbolParams):
    kind: Literal["any", "function", "method", "class", "interface", "type"] = "any"


class CallersParams(SymbolParams):
    max_results: int = Field(50, ge=1, le=500)


class CallPathParams(RepoParams):
    source: str = Field(min_length=1, max_length=200, pattern=IDENTIFIER, description="the function it starts in")
    target: str = Field(min_length=1, max_length=200, pattern=IDENTIFIER, description="the function it reaches")
    max_depth: int = Field(4, ge=1, le=8, description="calls along the path, at most")


class FileParams(RepoParams):
    file: str = Field(min_length=1, max_length=1000, description="a file relative to the root")


# -- text: ripgrep ----------------------------------------------------------------------------


def _rg(base: Path, args: list[str], limit: int, timeout: float = 25.0) -> tuple[list[str], bool]:
    """Up to `limit` output lines of rg run in base, and whether there were more. rg's exit code 2 is
    an error (a bad pattern, most often): its message becomes the tool's."""
    process = subprocess.Popen(code_index.rg_command(*args), cwd=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    lines: list[str] = []
    more = False
    try:
        for raw in process.stdout:
            if len(lines) == limit:
                more = True
                break
            lines.append(raw.decode("utf-8", errors="replace").rstrip("\n"))
    finally:
        if more:
            process.kill()
        try:
            _, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise ToolError(f"the search took longer than {timeout:.0f} s") from None
    if process.returncode == 2 and not more:
        message = " ".join(line.strip() for line in err.decode("utf-8", errors="replace").splitlines())
        raise _SearchFailed(message.removeprefix("rg: ")[:400] or "rg failed")
    return lines, more


class _SearchFailed(ToolError):
    """rg refused the search: a bad pattern most often."""


def _names(pattern: str) -> list[str]:
    """rg's filter for file names matching a glob. Not --glob: a --glob whitelists, overriding the
    ignore rules (hidden files, .gitignore), so `*` would list .git's insides."""
    if pattern in ("*", "**"):
        return []
    return ["--type-add", f"wanted:{pattern}", "--type", "wanted"]


def _scope(base: Path, path: str) -> str:
    """The folder a search is limited to, relative to the root ('.' for all); it must exist."""
    start = resolve_inside(base, path)
    if not start.exists():
        raise _NotFound(f"path not found: {path}")
    return _rel(base, start)


@_repository_tool(
    "code.list_files",
    "List text files under a directory of the repository (recursive, sorted; .gitignore'd, hidden and vendored "
    "folders skipped).",
    ListFilesParams,
    timeout_seconds=15.0,
)
def list_files(params: ListFilesParams) -> ToolResult:
    base = repo_root(params.repo)
    scope = _scope(base, params.path)
    names, _ = _rg(base, ["--files", "--sort", "path", *_names(params.pattern), scope], 1_000_000)
    files: list[str] = []
    for name in names:
        name = name.removeprefix("./")
        if not _is_binary(base / name):
            files.append(name)
            if len(files) > params.max_results:
                break
    truncated = len(files) > params.max_results
    files = files[: params.max_results]
    citations = [Citation(file=f, line=1) for f in files[:MAX_CITATIONS]]
    return ToolResult.ok({"files": files, "truncated": truncated}, citations)


@_repository_tool(
    "code.grep",
    "Search text files for a regular expression (ripgrep); every match is cited by file and line.",
    GrepParams,
    timeout_seconds=30.0,
)
def grep(params: GrepParams) -> ToolResult:
    base = repo_root(params.repo)
    scope = _scope(base, params.path)
    flags = ["--line-number", "--with-filename", "--no-heading", "--null", "--sort", "path", "--max-filesize", "1M"]
    flags += ["--ignore-case"] if params.ignore_case else ["--case-sensitive"]
    try:
        lines, truncated = _rg(
            base, [*flags, *_names(params.glob), "--regexp", params.pattern, scope], params.max_matches
        )
    except _SearchFailed as exc:
        raise ToolError(f"invalid regular expression {params.pattern!r}: {exc}") from exc
    matches: list[dict[str, Any]] = []
    for entry in lines:
        file, _, rest = entry.partition("\0")
        number, _, text = rest.partition(":")
        if number.isdigit():
            matches.append({"file": file.removeprefix("./"), "line": int(number), "text": text[:MAX_LINE_CHARS]})
    citations = [Citation(file=m["file"], line=m["line"]) for m in matches]
    return ToolResult.ok({"matches": matches, "truncated": truncated}, citations)


def count_mentions(repo: str, term: str) -> tuple[int, int]:
    """(lines mentioning `term`, case-insensitive, as a literal; text files searched) over the whole
    repository: what a gap must rest on before it says something is not there."""
    base = repo_root(repo)
    every = ["--no-ignore", "--hidden", "--glob", "!.git/"]  # every text file: ignored and hidden ones too
    hits, _ = _rg(base, [*every, "--count-matches", "--ignore-case", "--fixed-strings", "--regexp", term, "."], 10**6)
    searched, _ = _rg(base, [*every, "--files", "."], 10**7)
    return sum(int(line.rsplit(":", 1)[-1]) for line in hits if line.rsplit(":", 1)[-1].isdigit()), len(searched)


@_repository_tool(
    "code.read_lines",
    f"Read a range of lines from one file (1-based, inclusive, at most {MAX_READ_LINES} per call).",
    ReadLinesParams,
    timeout_seconds=10.0,
)
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


# -- the code index ---------------------------------------------------------------------------


def _index(repo: str) -> code_index.CodeIndex:
    base = repo_root(repo)
    try:
        return code_index.index_for(base)
    except (OSError, RuntimeError) as exc:
        raise ToolError(f"cannot index the repository: {exc}") from exc


def _under(scope: str, file: str) -> bool:
    return scope == "." or file == scope or file.startswith(f"{scope}/")


def _symbol(d: code_index.Definition) -> dict[str, Any]:
    return {
        "file": d.file,
        "line": d.line,
        "end_line": d.end_line,
        "kind": d.kind,
        "name": d.name,
        "qualname": d.qualname,
        "language": d.language,
        "signature": d.signature,
        "docstring": d.docstring,
    }


def _call(c: code_index.CallSite) -> dict[str, Any]:
    return {
        "file": c.file,
        "line": c.line,
        "text": c.text,
        "calls": c.name,
        "caller": c.caller,
        "caller_line": c.caller_line,
    }


def _indexed(index: code_index.CodeIndex) -> str:
    languages = ", ".join(f"{n} {lang}" for lang, n in sorted(index.languages.items())) or "no source"
    return f"{len(index.files)} indexed files ({languages})"


@_repository_tool(
    "code.find_symbol",
    "Find where functions, methods, classes, interfaces and types are defined, by name (`name` or "
    "`Class.method`), in Python, JavaScript/TypeScript, Go and Java: each with its span, signature and doc.",
    FindSymbolParams,
)
def find_symbol(params: FindSymbolParams) -> ToolResult:
    index = _index(params.repo)
    scope = _scope(repo_root(params.repo), params.path)
    found = [d for d in index.find_definitions(params.name, params.kind) if _under(scope, d.file)]
    truncated = len(found) > MAX_SYMBOLS
    symbols = [_symbol(d) for d in found[:MAX_SYMBOLS]]
    citations = [Citation(file=s["file"], line=s["line"], end_line=s["end_line"]) for s in symbols]
    data = {"symbols": symbols, "skipped": len(index.skipped), "truncated": truncated, "searched": _indexed(index)}
    return ToolResult.ok(data, citations)


@_repository_tool(
    "code.find_callers",
    "Who calls a function, method or class: every call site (`name(...)`, `obj.name(...)`, `new Name(...)`) "
    "with the function that makes the call, from the code index.",
    CallersParams,
)
def find_callers(params: CallersParams) -> ToolResult:
    index = _index(params.repo)
    scope = _scope(repo_root(params.repo), params.path)
    sites = [c for c in index.callers(params.name) if _under(scope, c.file)]
    if not sites:
        raise _NotFound(f"no call of {params.name} in {_indexed(index)}")
    truncated = len(sites) > params.max_results
    callers = [_call(c) for c in sites[: params.max_results]]
    data = {"symbol": params.name, "callers": callers, "truncated": truncated, "total": len(sites)}
    return ToolResult.ok(data, [Citation(file=c["file"], line=c["line"]) for c in callers])


@_repository_tool(
    "code.find_references",
    "Everywhere a name is used: its call sites (with the calling function), the imports that bring it in, and "
    "other mentions (whole word), each cited.",
    CallersParams,
)
def find_references(params: CallersParams) -> ToolResult:
    index = _index(params.repo)
    base = repo_root(params.repo)
    scope = _scope(base, params.path)
    last = params.name.split(".")[-1]
    seen: set[tuple[str, int]] = {(d.file, d.line) for d in index.find_definitions(params.name)}
    references: list[dict[str, Any]] = []
    for call in index.callers(params.name):
        if _under(scope, call.file) and (call.file, call.line) not in seen:
            seen.add((call.file, call.line))
            references.append({**_call(call), "kind": "call"})
    for item in index.imports:
        if last in item.names and _under(scope, item.file) and (item.file, item.line) not in seen:
            seen.add((item.file, item.line))
            references.append({"file": item.file, "line": item.line, "text": f"import {item.module}", "kind": "import"})
    flags = ["--line-number", "--with-filename", "--no-heading", "--null", "--sort", "path", "--word-regexp"]
    lines, _ = _rg(base, [*flags, "--fixed-strings", "--regexp", last, scope], 2000)
    for entry in lines:
        file, _, rest = entry.partition("\0")
        number, _, text = rest.partition(":")
        file = file.removeprefix("./")
        if number.isdigit() and (file, int(number)) not in seen:
            seen.add((file, int(number)))
            references.append(
                {"file": file, "line": int(number), "text": text.strip()[:MAX_LINE_CHARS], "kind": "mention"}
            )
    if not references:
        raise _NotFound(f"no use of {params.name} in {_indexed(index)} or any text file")
    references.sort(key=lambda r: ({"call": 0, "import": 1, "mention": 2}[r["kind"]], r["file"], r["line"]))
    truncated = len(references) > params.max_results
    references = references[: params.max_results]
    data = {"symbol": params.name, "references": references, "truncated": truncated}
    return ToolResult.ok(data, [Citation(file=r["file"], line=r["line"]) for r in references])


@_repository_tool(
    "code.callees",
    "What a function or method calls: the call sites inside its body, each with where the called name is "
    "defined in the repository when it is.",
    SymbolParams,
)
def callees(params: SymbolParams) -> ToolResult:
    index = _index(params.repo)
    scope = _scope(repo_root(params.repo), params.path)
    definitions = [d for d in index.find_definitions(params.name) if _under(scope, d.file)][:3]
    if not definitions:
        raise _NotFound(f"no definition of {params.name} in {_indexed(index)}")
    for owner in [d for d in definitions if d.kind in ("class", "interface")]:  # a class does what its methods do
        definitions += index.members(owner)[:MAX_MEMBERS]
    functions: list[dict[str, Any]] = []
    citations: list[Citation] = []
    for definition in definitions:
        calls = []
        for call in index.callees(definition)[:MAX_SYMBOLS]:
            targets = index.find_definitions(call.name)
            defined = [f"{t.file}:{t.line}" for t in targets[:3]]
            calls.append({**_call(call), "defined_at": defined})
            citations.append(Citation(file=call.file, line=call.line))
        functions.append({**_symbol(definition), "calls": calls})
        citations.append(Citation(file=definition.file, line=definition.line, end_line=definition.end_line))
    return ToolResult.ok({"symbol": params.name, "functions": functions}, citations)


@_repository_tool(
    "code.call_path",
    "How one function reaches another: the shortest chain of calls from `source` to a call of `target` "
    "(at most `max_depth` calls), each hop cited.",
    CallPathParams,
)
def call_path(params: CallPathParams) -> ToolResult:
    index = _index(params.repo)
    starts = index.find_definitions(params.source)
    if not starts:
        raise _NotFound(f"no definition of {params.source} in {_indexed(index)}")
    path = index.call_path(params.source, params.target, params.max_depth)
    if path is None:
        raise _NotFound(f"no chain of at most {params.max_depth} calls from {params.source} to {params.target}")
    start = next(
        d for d in starts if path[0].caller is not None and d.qualname == path[0].caller and d.file == path[0].file
    )
    hops = [_call(c) for c in path]
    citations = [Citation(file=start.file, line=start.line)] + [Citation(file=c.file, line=c.line) for c in path]
    data = {"source": _symbol(start), "target": params.target, "path": hops}
    return ToolResult.ok(data, citations)


def _file_imports(params: FileParams, key: str) -> ToolResult:
    """A file's imports (`imports`) or the imports of it elsewhere (`dependents`), each cited."""
    base = repo_root(params.repo)
    rel = _rel(base, resolve_inside(base, params.file))
    index = _index(params.repo)
    if rel not in index.files:
        raise _NotFound(f"not an indexed source file: {params.file}")
    found = index.imports_of(rel) if key == "imports" else index.dependents(rel)
    listed = [
        {"file": i.file, "line": i.line, "module": i.module, "names": list(i.names), "resolved": i.resolved}
        for i in found
    ]
    return ToolResult.ok({"file": rel, key: listed}, [Citation(file=i.file, line=i.line) for i in found])


_FILE_TOOL = {
    "category": ToolCategory.READ,
    "risk": RiskLevel.READ_ONLY,
    "timeout_seconds": 60.0,
    "max_retries": 0,
    "root_param": "repo",
}


@CATALOG.register(
    "code.imports",
    "What one file imports, each import cited and resolved to the repository file it names when it names one.",
    FileParams,
    **_FILE_TOOL,  # type: ignore[arg-type]
)
@_guarded
def imports(params: FileParams) -> ToolResult:
    return _file_imports(params, "imports")


@CATALOG.register(
    "code.dependents",
    "Which files import a given file (its dependents), each import cited.",
    FileParams,
    **_FILE_TOOL,  # type: ignore[arg-type]
)
@_guarded
def dependents(params: FileParams) -> ToolResult:
    return _file_imports(params, "dependents")
