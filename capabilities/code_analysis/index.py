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

import ast
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
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


# -- building ------------------------------------------------------------------------------------


_memory: dict[str, CodeIndex] = {}
_lock = threading.Lock()
MEMORY_ENTRIES = 4


def cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / "missions-code-index"


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


Parsed = tuple[list[Definition], list[CallSite], list[Import]]
FileResult = tuple[str, Parsed, str | None]  # (language, what it defines, calls and imports; why it was skipped)
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


def _line_text(lines: list[bytes], number: int) -> str:
    return lines[number - 1].decode("utf-8", errors="replace").strip()[:MAX_LINE_CHARS] if number <= len(lines) else ""


# -- Python --------------------------------------------------------------------------------------


def _python(file: str, source: bytes) -> Parsed:
    tree = ast.parse(source, filename=file)
    lines = source.split(b"\n")
    definitions: list[Definition] = []
    calls: list[CallSite] = []
    imports: list[Import] = []
    package = PurePosixPath(file).parent

    def visit(node: ast.AST, scope: tuple[str, ...], function: Definition | None, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _PY_LEAVES):
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = ".".join((*scope, child.name))
                is_class = isinstance(child, ast.ClassDef)
                kind = "class" if is_class else ("method" if in_class else "function")
                doc = (ast.get_docstring(child) or "").strip()
                definition = Definition(
                    child.name,
                    qualname,
                    kind,
                    file,
                    child.lineno,
                    child.end_lineno or child.lineno,
                    "python",
                    _python_signature(child),
                    doc.splitlines()[0][:MAX_LINE_CHARS] if doc else None,
                )
                definitions.append(definition)
                for decorator in child.decorator_list:  # evaluated where the definition stands
                    visit_node(decorator, scope, function, in_class)
                evaluated: list[ast.expr | None] = (
                    list(child.bases)
                    if isinstance(child, ast.ClassDef)
                    else [*child.args.defaults, *child.args.kw_defaults]
                )
                for default in evaluated:  # bases and default values run where the definition stands
                    if default is not None:
                        visit_node(default, scope, function, in_class)
                for statement in child.body:
                    visit_node(statement, (*scope, child.name), function if is_class else definition, is_class)
                continue
            if isinstance(child, ast.Call):
                called = _python_called(child.func)
                if called:
                    calls.append(
                        CallSite(
                            called,
                            file,
                            child.lineno,
                            _line_text(lines, child.lineno),
                            function.qualname if function else None,
                            function.line if function else None,
                        )
                    )
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    imports.append(Import(file, child.lineno, alias.name, (alias.asname or alias.name,), None))
            elif isinstance(child, ast.ImportFrom):
                base = package
                for _ in range(max(child.level - 1, 0)):
                    base = base.parent
                module = child.module or ""
                written = ("." * child.level) + module
                target = f"{base.as_posix()}/{module.replace('.', '/')}" if child.level else module
                names = tuple(a.name for a in child.names)
                imports.append(Import(file, child.lineno, written, names, target if child.level else None))
            visit(child, scope, function, in_class)

    def visit_node(node: ast.AST, scope: tuple[str, ...], function: Definition | None, in_class: bool) -> None:
        holder = ast.Module(body=[node], type_ignores=[])  # type: ignore[list-item]  # so the node is a child
        visit(holder, scope, function, in_class)

    visit(tree, (), None, False)
    return definitions, calls, imports


# nodes that hold no call and no definition: not descended into (most of a tree's nodes)
_PY_LEAVES = (
    ast.Name,
    ast.Constant,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
    ast.alias,
    ast.Pass,
)


def _python_called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _python_signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
        return f"class {node.name}({', '.join(bases)})" if bases else f"class {node.name}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"[:MAX_LINE_CHARS]


# -- tree-sitter languages -----------------------------------------------------------------------


@functools.cache
def _parser(language: str) -> Any:
    """tree-sitter's parser for a language, made on first use (the grammars are native modules)."""
    from tree_sitter import Language, Parser

    if language == "javascript":
        import tree_sitter_javascript as grammar

        return Parser(Language(grammar.language()))
    if language in ("typescript", "tsx"):
        import tree_sitter_typescript as ts

        return Parser(Language(ts.language_tsx() if language == "tsx" else ts.language_typescript()))
    if language == "go":
        import tree_sitter_go as go

        return Parser(Language(go.language()))
    if language == "java":
        import tree_sitter_java as java

        return Parser(Language(java.language()))
    raise ValueError(f"no grammar for {language}")


# node type -> definition kind, per grammar family
_DEFINES = {
    "javascript": {
        "function_declaration": "function",
        "generator_function_declaration": "function",
        "class_declaration": "class",
        "abstract_class_declaration": "class",
        "method_definition": "method",
        "interface_declaration": "interface",
        "type_alias_declaration": "type",
        "enum_declaration": "type",
        "function_signature": "function",
        "method_signature": "method",
        "abstract_method_signature": "method",
    },
    "go": {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"},
    "java": {
        "class_declaration": "class",
        "interface_declaration": "interface",
        "enum_declaration": "class",
        "record_declaration": "class",
        "method_declaration": "method",
        "constructor_declaration": "method",
    },
}
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_CALLS = frozenset({"call_expression", "new_expression", "method_invocation", "object_creation_expression"})


def _tree_sitter(language: str) -> Callable[[str, bytes], Parsed]:
    family = "javascript" if language in ("javascript", "typescript", "tsx") else language
    defines = _DEFINES[family]

    def parse(file: str, source: bytes) -> Parsed:
        tree = _parser(language).parse(source)
        lines = source.split(b"\n")
        definitions: list[Definition] = []
        calls: list[CallSite] = []
        imports: list[Import] = []

        def text(node: Any) -> str:
            return source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

        def walk(node: Any, scope: tuple[str, ...], function: Definition | None) -> None:
            for child in node.named_children:
                definition = _ts_definition(child, defines, family, scope, file, language, text, lines)
                if definition is not None:
                    definitions.append(definition)
                    inner_scope = (*scope, definition.name) if family != "go" else ()
                    is_type = definition.kind in ("class", "interface", "type")
                    walk(child, inner_scope, function if is_type else definition)
                    continue
                if child.type in _CALLS:
                    called = _ts_called(child)
                    if called is not None:
                        line = called.start_point[0] + 1  # the name's line: a chained call spans several
                        calls.append(
                            CallSite(
                                text(called),
                                file,
                                line,
                                _line_text(lines, line),
                                function.qualname if function else None,
                                function.line if function else None,
                            )
                        )
                elif child.type in ("import_statement", "import_spec", "import_declaration"):
                    imports.extend(_ts_imports(child, family, file, text))
                walk(child, scope, function)

        walk(tree.root_node, (), None)
        return definitions, calls, imports

    return parse


def _ts_definition(
    node: Any,
    defines: dict[str, str],
    family: str,
    scope: tuple[str, ...],
    file: str,
    language: str,
    text: Callable[[Any], str],
    lines: list[bytes],
) -> Definition | None:
    kind = defines.get(node.type)
    name_node = node.child_by_field_name("name")
    if kind is None and family == "javascript" and node.type == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        kind = "function"
    if kind is None or name_node is None:
        return None
    name = text(name_node).strip("\"'#")
    if family == "go" and node.type == "type_spec":
        shape = node.child_by_field_name("type")
        kind = {"struct_type": "class", "interface_type": "interface"}.get(shape.type if shape else "", "type")
    qualname = ".".join((*scope, name))
    if family == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        owner = _go_receiver(text(receiver)) if receiver is not None else ""
        qualname = f"{owner}.{name}" if owner else name
    line = node.start_point[0] + 1
    if node.type == "variable_declarator" or (family == "go" and node.type == "type_spec"):
        line = node.start_point[0] + 1
    end_line = node.end_point[0] + 1
    signature = _line_text(lines, line)
    docstring = _comment_above(lines, line)
    return Definition(name, qualname, kind, file, line, end_line, language, signature, docstring)


def _go_receiver(receiver: str) -> str:
    """`(s *Server)` -> Server; `(Server[T])` -> Server."""
    inner = receiver.strip("() ").split()[-1] if receiver.strip("() ") else ""
    return inner.lstrip("*").split("[")[0]


def _comment_above(lines: list[bytes], line: int) -> str | None:
    """The first line of the comment block just above a definition (JSDoc, Go doc, Javadoc)."""
    block: list[str] = []
    number = line - 1
    while number >= 1:
        stripped = lines[number - 1].decode("utf-8", errors="replace").strip()
        if stripped.startswith(("//", "*", "/*", "*/")) or stripped.startswith("@") and block:
            block.append(stripped)
            number -= 1
            continue
        if stripped.startswith("@"):  # a decorator or annotation between the comment and the definition
            number -= 1
            continue
        break
    for raw in reversed(block):
        cleaned = raw.lstrip("/*").removesuffix("*/").strip()
        if cleaned and not cleaned.startswith("@"):
            return cleaned[:MAX_LINE_CHARS]
    return None


def _ts_called(node: Any) -> Any | None:
    """The name node a call calls: f(), obj.f(), new F(), obj.<T>f(), Java's obj.f() and new F()."""
    if node.type == "method_invocation":
        return node.child_by_field_name("name")
    if node.type == "object_creation_expression":
        target = node.child_by_field_name("type")
    else:
        target = node.child_by_field_name("function") or node.child_by_field_name("constructor")
    while target is not None:
        if target.type in ("identifier", "type_identifier", "field_identifier", "property_identifier"):
            return target
        if target.type in ("member_expression", "selector_expression"):
            target = target.child_by_field_name("property") or target.child_by_field_name("field")
        elif target.type in ("generic_type", "scoped_type_identifier"):
            named = target.named_children
            target = named[-1] if target.type == "scoped_type_identifier" and named else (named[0] if named else None)
        elif target.type in ("parenthesized_expression", "non_null_expression"):
            target = target.named_children[0] if target.named_children else None
        else:
            return None
    return None


def _ts_imports(node: Any, family: str, file: str, text: Callable[[Any], str]) -> list[Import]:
    line = node.start_point[0] + 1
    if family == "javascript":
        source = node.child_by_field_name("source")
        if source is None:
            return []
        module = text(source).strip("\"'`")
        names = tuple(text(n) for n in _descendants(node) if n.type in ("identifier",) and n.parent.type != "string")
        return [Import(file, line, module, names, None)]
    if family == "go":
        path = node.child_by_field_name("path")
        if path is None:
            return []
        module = text(path).strip('"`')
        return [Import(file, line, module, (module.rsplit("/", 1)[-1],), None)]
    written = text(node).removeprefix("import").removesuffix(";").replace("static ", "").strip()
    return [Import(file, line, written, (written.rsplit(".", 1)[-1],), None)]


def _descendants(node: Any) -> Iterator[Any]:
    for child in node.named_children:
        yield child
        yield from _descendants(child)


_PARSERS: dict[str, Callable[[str, bytes], Parsed]] = {
    "python": _python,
    "javascript": _tree_sitter("javascript"),
    "typescript": _tree_sitter("typescript"),
    "tsx": _tree_sitter("tsx"),
    "go": _tree_sitter("go"),
    "java": _tree_sitter("java"),
}


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


__all__ = ["CallSite", "CodeIndex", "Definition", "Import", "build_index", "index_for", "list_files", "ripgrep"]
