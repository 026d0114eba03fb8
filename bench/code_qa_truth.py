"""The code-QA bench's packages and their ground truth, computed independently of the tools under test.

The packages are pinned third-party sources in three languages, fetched once into
`.bench/code_qa/<name>-<version>/` from their own registries (PyPI, npm, Debian) and checked against
the digests pinned here. Their ground truth comes from each language's own parser, none of which the
code tools use (they use Python's `ast` and tree-sitter) and none of this repository's code:

- Python: parso (the parser under jedi), walked here;
- TypeScript: the TypeScript compiler's parser (`ts.createSourceFile`), walked by bench/code_qa_truth.cjs
  under Node with `typescript` installed into `.bench`;
- Go: Go's `go/parser`, walked by bench/code_qa_truth.go, built by a Go toolchain unpacked from
  Debian's golang .debs into `.bench` (standard library only, offline once fetched).

Each gives every definition (function, method, class, struct, interface, type) with its first and
last line, and every call site with the name it calls and the definition it sits in. A call site "of
X" is a call naming X (`X()`, `obj.X()`, `new X()`): no parser here resolves types, so the bench asks
no caller or path question about a name the language's standard library also defines (`outside`:
`d.get()` may be anyone's `get`).
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import importlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE.parent / ".bench" / "code_qa"
TOOLS = CACHE / "_tools"
TRUTH_VERSION = 1  # bump when an extractor changes: cached ground truth is recomputed

# the toolchains the ground truth runs on (pinned; fetched into .bench/code_qa/_tools)
TYPESCRIPT = "5.6.3"
GO_DEBS = {"golang-1.19-go": "1.19.8-2", "golang-1.19-src": "1.19.8-2"}
GOROOT = TOOLS / "go" / "usr" / "lib" / "go-1.19"


@dataclass(frozen=True)
class Package:
    """A pinned package: where it comes from and which of its files make the repository asked about."""

    name: str
    version: str
    language: str  # py | ts | go
    source: str  # pypi | npm | deb
    digest: str = ""  # sha256 hex (pypi) or the npm integrity (sha512-...); a .deb is checked by apt
    keep: str = ""  # the folder inside the archive that becomes the repository ("" = the whole archive)
    extra: tuple[str, ...] = ()  # files inside the archive kept beside `keep` (README, manifest)
    deps: tuple[tuple[str, str], ...] = ()  # Debian packages (name, version) of the Go package's imports

    @property
    def dir(self) -> Path:
        return CACHE / f"{self.name}-{self.version}"


PACKAGES = (
    Package(
        "click",
        "8.1.7",
        "py",
        "pypi",
        digest="ca9853ad459e787e2192211578cc907e7594e294c7ccc834310722b41b9ca6de",
        keep="click-8.1.7",
    ),
    Package(
        "openai",
        "4.104.0",
        "ts",
        "npm",
        digest="sha512-p99EFNsA/yX6UhVO93f5kJsDRLAg+CTA2RBqdHK4RtK8u5IJw32Hyb2dTGKbnnFmnuoBv5r7Z2CURI9sGZpSuA==",
        keep="package/src",  # its TypeScript sources, not the JavaScript built from them
        extra=("package/README.md", "package/package.json"),
    ),
    Package(
        "golang-github-spf13-cobra-dev",
        "1.6.1-1",
        "go",
        "deb",
        keep="usr/share/gocode/src/github.com/spf13/cobra",
        deps=(
            ("golang-github-spf13-pflag-dev", "1.0.6~git20210604-d5e0c0615ace-1"),
            ("golang-github-cpuguy83-go-md2man-v2-dev", "2.0.2+ds1-1"),
            ("golang-gopkg-yaml.v3-dev", "3.0.1-3"),
        ),
    ),
)


# -- ground truth ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Definition:
    name: str
    qualname: str
    kind: str
    file: str
    line: int
    end_line: int

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"

    def holds(self, file: str, line: int) -> bool:
        return file == self.file and self.line <= line <= self.end_line


@dataclass(frozen=True)
class Call:
    name: str
    file: str
    line: int
    caller: str | None  # the id of the definition it sits in (None: module level)


@dataclass
class GroundTruth:
    parser: str
    definitions: list[Definition]
    calls: list[Call]
    outside: frozenset[str] = frozenset()  # names the language's standard library (or an import) defines too
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": TRUTH_VERSION,
            "parser": self.parser,
            "definitions": [d.__dict__ for d in self.definitions],
            "calls": [c.__dict__ for c in self.calls],
            "outside": sorted(self.outside),
            "errors": self.errors,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroundTruth:
        return cls(
            parser=data["parser"],
            definitions=[Definition(**d) for d in data["definitions"]],
            calls=[Call(**c) for c in data["calls"]],
            outside=frozenset(data.get("outside", ())),
            errors=list(data.get("errors", ())),
        )

    def counts(self) -> Counter[str]:
        return Counter(d.name for d in self.definitions)


# -- Python: parso --------------------------------------------------------------------------------


def python_truth(root: Path) -> GroundTruth:
    import parso
    from parso.grammar import load_grammar

    grammar = load_grammar()
    definitions: list[Definition] = []
    calls: list[Call] = []
    errors: list[str] = []
    imported: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        file = path.relative_to(root).as_posix()
        module = grammar.parse(path.read_text(encoding="utf-8", errors="replace"))
        errors += [f"{file}:{e.start_pos[0]}: {e.message}" for e in grammar.iter_errors(module)][:3]
        for node in module.iter_imports():
            imported.update(str(p[0].value) for p in node.get_paths() if p)
        _walk_python(module, file, [], None, None, definitions, calls)
    return GroundTruth(f"parso {parso.__version__}", definitions, calls, _python_outside(imported), errors)


def _end_line(node: Any) -> int:
    leaf = node.get_last_leaf()
    return int(leaf.start_pos[0] if leaf.type == "newline" else leaf.end_pos[0])


def _walk_python(
    node: Any,
    file: str,
    owners: list[str],
    caller: str | None,
    start: int | None,
    definitions: list[Definition],
    calls: list[Call],
) -> None:
    kind = node.type
    if kind in ("funcdef", "classdef"):
        name = node.name.value
        first = start or node.start_pos[0]
        is_method = kind == "funcdef" and bool(owners) and owners[-1].startswith("class:")
        qualname = ".".join([o.split(":", 1)[1] for o in owners] + [name])
        what = "class" if kind == "classdef" else ("method" if is_method else "function")
        definitions.append(Definition(name, qualname, what, file, first, _end_line(node)))
        owners = [*owners, f"{'class' if kind == 'classdef' else 'def'}:{name}"]
        if kind == "funcdef":
            caller = f"{file}:{first}"
        start = None
    elif kind == "decorated":  # the definition spans its decorators
        start = node.start_pos[0]
    elif kind == "decorator":
        # @name(...) calls name(...); @name alone calls nothing here
        target = node.children[1]
        if len(node.children) > 3 and getattr(node.children[2], "value", None) == "(":
            leaf = target.children[-1] if target.type == "dotted_name" else target
            calls.append(Call(leaf.value, file, leaf.start_pos[0], caller))
    elif kind in ("atom_expr", "power"):
        children = [c for c in node.children if not (c.type == "keyword" and c.value == "await")]
        for i, part in enumerate(children):
            if part.type != "trailer" or part.children[0].value != "(" or i == 0:
                continue
            before = children[i - 1]
            leaf = None
            if i == 1 and before.type == "name":
                leaf = before
            elif before.type == "trailer" and before.children[0].value == ".":
                leaf = before.children[1]
            if leaf is not None:
                calls.append(Call(leaf.value, file, leaf.start_pos[0], caller))
    for child in getattr(node, "children", ()):
        _walk_python(child, file, owners, caller, start if kind == "decorated" else None, definitions, calls)


def _python_outside(imported: Iterable[str]) -> frozenset[str]:
    """Names Python's builtins, its built-in types and the standard modules the package imports define
    (and those modules' classes): a call naming one may not be the package's."""
    names: set[str] = set(dir(builtins))
    for kind in (str, bytes, list, dict, set, frozenset, tuple, int, float, object, type, BaseException):
        names.update(dir(kind))
    for module_name in sorted(set(imported) & set(sys.stdlib_module_names)):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a platform's module (msvcrt, winreg...) the package imports on that platform only
            continue
        for attr in dir(module):
            names.add(attr)
            value = getattr(module, attr, None)
            if isinstance(value, type):
                names.update(dir(value))
    return frozenset(names)


# -- TypeScript: the TypeScript compiler ------------------------------------------------------------


def typescript_truth(root: Path) -> GroundTruth:
    node_path = ensure_typescript()
    env = {**os.environ, "NODE_PATH": str(node_path)}
    done = subprocess.run(
        ["node", str(HERE / "code_qa_truth.cjs"), str(root)], capture_output=True, text=True, env=env, check=True
    )
    data = json.loads(done.stdout)
    return GroundTruth(
        data["parser"],
        [Definition(**d) for d in data["definitions"]],
        [Call(**c) for c in data["calls"]],
        frozenset(data["builtins"]),
        data["errors"],
    )


def ensure_typescript() -> Path:
    """`typescript` (pinned) in .bench/code_qa/_tools/node: never in the project's node_modules."""
    prefix = TOOLS / "node"
    modules = prefix / "node_modules"
    manifest = modules / "typescript" / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != TYPESCRIPT:
        prefix.mkdir(parents=True, exist_ok=True)
        command = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--no-package-lock", "--no-save"]
        subprocess.run([*command, "--prefix", str(prefix), f"typescript@{TYPESCRIPT}"], check=True)
    return modules


# -- Go: go/parser --------------------------------------------------------------------------------


def go_truth(root: Path, deps: Iterable[Path] = ()) -> GroundTruth:
    data = _run_go_truth(root)
    outside: set[str] = {"append", "cap", "close", "complex", "copy", "delete", "imag", "len", "make", "new"}
    outside |= {"panic", "print", "println", "real", "recover", "min", "max", "clear"}
    # what the standard library and the package's dependencies define: the Go toolchain's own sources
    for folder in [*_go_std_dirs(root), *deps]:
        outside.update(d["name"] for d in _run_go_truth(folder)["definitions"])
    return GroundTruth(
        data["parser"],
        [Definition(**d) for d in data["definitions"]],
        [Call(**c) for c in data["calls"]],
        frozenset(outside),
        data["errors"],
    )


def _go_std_dirs(root: Path) -> list[Path]:
    """The standard packages the Go package imports (read from its import lines, with go/parser's help: a
    quoted path without a dot in its first element is a standard package)."""
    found: set[str] = set()
    for path in root.rglob("*.go"):
        text = path.read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            stripped = line.strip().removeprefix("import").strip()
            if stripped.startswith('"') and stripped.count('"') == 2:
                imported = stripped.split('"')[1]
                if "." not in imported.split("/")[0]:
                    found.add(imported)
            if line.startswith("func "):
                break
    return [GOROOT / "src" / p for p in sorted(found) if (GOROOT / "src" / p).is_dir()]


def _run_go_truth(root: Path) -> dict[str, Any]:
    binary = ensure_go_truth()
    done = subprocess.run([str(binary), str(root)], capture_output=True, text=True, check=True)
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def ensure_go_truth() -> Path:
    """bench/code_qa_truth.go built by Debian's Go toolchain, both in .bench/code_qa/_tools."""
    binary = TOOLS / f"code_qa_truth-go-v{TRUTH_VERSION}"
    source = HERE / "code_qa_truth.go"
    stamp = TOOLS / "code_qa_truth-go.sha256"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if binary.exists() and stamp.exists() and stamp.read_text() == digest:
        return binary
    if not (GOROOT / "bin" / "go").exists():
        for name, version in GO_DEBS.items():
            _unpack_deb(name, version, TOOLS / "go")
    env = {
        **os.environ,
        "GOROOT": str(GOROOT),
        "GOCACHE": str(TOOLS / "gocache"),
        "GOPATH": str(TOOLS / "gopath"),
        "GO111MODULE": "off",
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",
    }
    subprocess.run([str(GOROOT / "bin" / "go"), "build", "-o", str(binary), str(source)], env=env, check=True)
    stamp.write_text(digest)
    return binary


# -- fetching -------------------------------------------------------------------------------------


def _download(url: str, accept: str | None = None) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=120) as response:
        data: bytes = response.read()
        return data


def _pypi_sdist(package: Package) -> bytes:
    """The sdist through PyPI's simple API (PEP 691 JSON), as pip finds it."""
    index = json.loads(_download(f"https://pypi.org/simple/{package.name}/", "application/vnd.pypi.simple.v1+json"))
    [sdist] = [f for f in index["files"] if f["filename"] == f"{package.name}-{package.version}.tar.gz"]
    data = _download(sdist["url"])
    if hashlib.sha256(data).hexdigest() != package.digest:
        raise RuntimeError(f"{package.name} {package.version}: the sdist's sha256 is not the pinned one")
    return data


def _npm_tarball(package: Package) -> bytes:
    data = _download(f"https://registry.npmjs.org/{package.name}/-/{package.name}-{package.version}.tgz")
    algorithm, expected = package.digest.split("-", 1)
    if base64.b64encode(hashlib.new(algorithm, data).digest()).decode() != expected:
        raise RuntimeError(f"{package.name} {package.version}: the tarball's integrity is not the pinned one")
    return data


def _unpack_deb(name: str, version: str, into: Path) -> None:
    """`apt-get download` (apt checks the archive's signatures and digests) and `dpkg-deb -x`: no root."""
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["apt-get", "download", "-q", f"{name}={version}"], cwd=scratch, check=True, capture_output=True)
        [deb] = Path(scratch).glob("*.deb")
        into.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)


def _keep(members: Iterable[tuple[str, Callable[[], bytes | None]]], package: Package, into: Path) -> None:
    keep = PurePosixPath(package.keep) if package.keep else None
    for name, read in members:
        path = PurePosixPath(name)
        if name in package.extra:
            target = into / path.name
        elif keep is None:
            target = into / path
        elif path.is_relative_to(keep) and path != keep:
            target = into / path.relative_to(keep)
        else:
            continue
        data = read()
        if data is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _from_tar(data: bytes, package: Package, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        files = [m for m in archive.getmembers() if m.isfile()]

        def reader(member: tarfile.TarInfo) -> Callable[[], bytes | None]:
            def read() -> bytes | None:
                handle = archive.extractfile(member)
                return handle.read() if handle else None

            return read

        _keep(((m.name, reader(m)) for m in files), package, into)


def fetch(package: Package) -> Path:
    """The package's repository folder, fetched once (a folder with a `.complete` marker is cached)."""
    marker = package.dir / ".complete"
    if marker.exists():
        return package.dir
    if package.dir.exists():
        shutil.rmtree(package.dir)
    staging = package.dir.with_name(package.dir.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    if package.source == "pypi":
        _from_tar(_pypi_sdist(package), package, staging)
    elif package.source == "npm":
        _from_tar(_npm_tarball(package), package, staging)
    elif package.source == "deb":
        with tempfile.TemporaryDirectory() as scratch:
            _unpack_deb(package.name, package.version, Path(scratch))
            shutil.copytree(Path(scratch) / package.keep, staging, dirs_exist_ok=True)
    else:
        raise ValueError(f"unknown source {package.source!r}")
    staging.rename(package.dir)
    marker.write_text(f"{package.name} {package.version} from {package.source}\n")
    return package.dir


def dependency_dirs(package: Package) -> list[Path]:
    """The Go package's imports' sources (Debian -dev packages), for the names they define."""
    found = []
    for name, version in package.deps:
        folder = CACHE / "_deps" / f"{name}-{version}"
        if not (folder / ".complete").exists():
            if folder.exists():
                shutil.rmtree(folder)
            _unpack_deb(name, version, folder)
            (folder / ".complete").write_text("")
        found.append(folder / "usr" / "share" / "gocode" / "src")
    return found


def ground_truth(package: Package) -> GroundTruth:
    """The package's ground truth, computed once per extractor version (cached beside the package)."""
    root = fetch(package)
    cached = CACHE / f"{package.dir.name}.truth.json"
    if cached.exists():
        data = json.loads(cached.read_text())
        if data.get("version") == TRUTH_VERSION:
            return GroundTruth.from_json(data)
    if package.language == "py":
        truth = python_truth(root)
    elif package.language == "ts":
        truth = typescript_truth(root)
    elif package.language == "go":
        truth = go_truth(root, dependency_dirs(package))
    else:
        raise ValueError(f"no ground truth for {package.language!r}")
    cached.write_text(json.dumps(truth.to_json()))
    return truth


SOURCE_SUFFIXES = (".py", ".ts", ".tsx", ".go", ".js", ".mjs", ".java")


def text_of(root: Path) -> str:
    """Every text file of the repository, lowercased, for the false-gap check (does a term occur at all?)."""
    parts = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != ".complete":
            data = path.read_bytes()
            if b"\0" not in data[:8192]:
                parts.append(data.decode("utf-8", errors="replace").lower())
    return "\n".join(parts)
