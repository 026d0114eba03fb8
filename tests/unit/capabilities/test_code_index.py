"""code_analysis's code index and the tools over it, in the languages developers write: definitions
with spans, call sites with the calling function, call paths, imports; .gitignore honoured; one build
per snapshot."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from capabilities.code_analysis import index as code_index
from capabilities.code_analysis.repo_tools import CATALOG
from missions.core.capability.tools import ToolResult

TS = """\
import { readFile } from './fs';

/** Turns bytes into a File the API accepts. */
export async function toFile(value: Uint8Array, name: string): Promise<File> {
  const bytes = await readFile(name);
  return new File([bytes], name);
}

export class Uploads {
  create(body: Uint8Array) {
    return toFile(body, 'upload.bin');
  }
}

export const helper = (x: number) => x + 1;
"""
FS_TS = "export function readFile(name: string): Promise<Uint8Array> { return fetch(name).then((r) => r.bytes()); }\n"
GO = """\
package server

import "fmt"

// Server serves requests.
type Server struct{ name string }

// Start starts the server.
func (s *Server) Start() error {
\treturn listen(s.name)
}

func listen(name string) error {
\tfmt.Println(name)
\treturn nil
}
"""
JAVA = """\
package demo;

import java.util.List;

public class Greeter {
    /** Says hello. */
    public String greet(String name) {
        return format(name);
    }

    private String format(String name) {
        return "hello " + name;
    }
}
"""
PY_TAX = """\
def compute_tax(amount: float) -> float:
    \"\"\"VAT at 20%.\"\"\"
    return amount * 0.2
"""
PY_SHOP = """\
from .tax import compute_tax


def checkout(total):
    return total + compute_tax(total)


def receipt(total):
    # compute_tax is mentioned here but not called
    return f"{checkout(total):.2f}"
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def polyglot(tmp_path: Path) -> Path:
    return write(
        tmp_path / "repo",
        {
            "src/uploads.ts": TS,
            "src/fs.ts": FS_TS,
            "server/server.go": GO,
            "java/demo/Greeter.java": JAVA,
            "shop/__init__.py": "",
            "shop/tax.py": PY_TAX,
            "shop/cart.py": PY_SHOP,
            ".gitignore": "generated/\n",
            "generated/copy.py": "def compute_tax(x):\n    return x\n",
        },
    )


def call(tool_id: str, **params: object) -> ToolResult:
    spec = CATALOG.get(tool_id)
    assert spec is not None
    return spec.func(spec.parameters(**params))


def line(root: Path, ref: str) -> str:
    file, number = ref.rsplit(":", 1)
    return (root / file).read_text().split("\n")[int(number) - 1]


@pytest.mark.parametrize(
    ("name", "file", "kind", "qualname", "text"),
    [
        ("toFile", "src/uploads.ts", "function", "toFile", "export async function toFile("),
        ("Uploads.create", "src/uploads.ts", "method", "Uploads.create", "create(body"),
        ("helper", "src/uploads.ts", "function", "helper", "const helper = "),
        ("Start", "server/server.go", "method", "Server.Start", "func (s *Server) Start()"),
        ("Server", "server/server.go", "class", "Server", "type Server struct"),
        ("greet", "java/demo/Greeter.java", "method", "Greeter.greet", "public String greet("),
        ("compute_tax", "shop/tax.py", "function", "compute_tax", "def compute_tax("),
    ],
)
def test_definitions_are_found_in_every_language_with_their_span(polyglot: Path, name, file, kind, qualname, text):
    # When a definition is looked up by name
    result = call("code.find_symbol", repo=str(polyglot), name=name)
    # Then there is one (the .gitignore'd copy is not indexed), cited at the line that defines it
    assert result.status == "success", result.error
    [symbol] = result.data["symbols"]
    assert (symbol["file"], symbol["kind"], symbol["qualname"]) == (file, kind, qualname)
    assert text in line(polyglot, f"{file}:{symbol['line']}")
    assert symbol["end_line"] >= symbol["line"]
    assert result.citations[0].end_line == symbol["end_line"]


def test_a_definition_carries_the_comment_or_docstring_above_it(polyglot: Path):
    [ts] = call("code.find_symbol", repo=str(polyglot), name="toFile").data["symbols"]
    [go] = call("code.find_symbol", repo=str(polyglot), name="Start").data["symbols"]
    [py] = call("code.find_symbol", repo=str(polyglot), name="compute_tax").data["symbols"]
    assert ts["docstring"] == "Turns bytes into a File the API accepts."
    assert go["docstring"] == "Start starts the server."
    assert py["docstring"] == "VAT at 20%."


@pytest.mark.parametrize(
    ("name", "callers"),
    [
        ("toFile", {"Uploads.create"}),
        ("readFile", {"toFile"}),
        ("listen", {"Server.Start"}),
        ("format", {"Greeter.greet"}),
        ("compute_tax", {"checkout"}),
    ],
)
def test_callers_are_call_sites_with_the_function_that_makes_them(polyglot: Path, name, callers):
    # When the callers of a function are asked for
    result = call("code.find_callers", repo=str(polyglot), name=name)
    # Then every result is a line that calls it (not a mention, not a definition), in the named caller
    assert result.status == "success", result.error
    assert {c["caller"] for c in result.data["callers"]} == callers
    for ref in (c.ref for c in result.citations):
        assert f"{name}(" in line(polyglot, ref), ref


def test_a_name_nothing_calls_is_not_found_and_says_what_was_searched(polyglot: Path):
    result = call("code.find_callers", repo=str(polyglot), name="receipt")
    assert result.status == "not_found"
    assert "no call of receipt in" in result.error and "indexed files" in result.error and "python" in result.error


def test_references_hold_calls_imports_and_plain_mentions(polyglot: Path):
    result = call("code.find_references", repo=str(polyglot), name="compute_tax")
    kinds = {(r["file"], r["kind"]) for r in result.data["references"]}
    assert ("shop/cart.py", "call") in kinds and ("shop/cart.py", "import") in kinds
    assert ("shop/cart.py", "mention") in kinds  # the comment in receipt
    assert not any(file.startswith("generated/") for file, _ in kinds)  # .gitignore'd


def test_callees_and_a_call_path_across_functions(polyglot: Path):
    # Given receipt -> checkout -> compute_tax
    callees = call("code.callees", repo=str(polyglot), name="checkout")
    assert [c["calls"] for f in callees.data["functions"] for c in f["calls"]] == ["compute_tax"]
    assert callees.data["functions"][0]["calls"][0]["defined_at"] == ["shop/tax.py:1"]
    # When the path from receipt to compute_tax is asked for
    path = call("code.call_path", repo=str(polyglot), source="receipt", target="compute_tax")
    # Then it is the two calls, in order, each cited
    assert path.status == "success", path.error
    assert [(hop["caller"], hop["calls"]) for hop in path.data["path"]] == [
        ("receipt", "checkout"),
        ("checkout", "compute_tax"),
    ]
    assert [c.ref for c in path.citations][1:] == [f"shop/cart.py:{h['line']}" for h in path.data["path"]]
    too_short = call("code.call_path", repo=str(polyglot), source="receipt", target="compute_tax", max_depth=1)
    assert too_short.status == "not_found" and "at most 1 calls" in too_short.error


def test_imports_resolve_to_files_and_dependents_are_their_reverse(polyglot: Path):
    imports = call("code.imports", repo=str(polyglot), file="shop/cart.py").data["imports"]
    assert [(i["module"], i["resolved"]) for i in imports] == [(".tax", "shop/tax.py")]
    ts_imports = call("code.imports", repo=str(polyglot), file="src/uploads.ts").data["imports"]
    assert [(i["module"], i["resolved"]) for i in ts_imports] == [("./fs", "src/fs.ts")]
    dependents = call("code.dependents", repo=str(polyglot), file="shop/tax.py")
    assert [c.ref for c in dependents.citations] == ["shop/cart.py:1"]


@pytest.mark.parametrize("escape", ["../outside.py", "/etc/passwd"])
def test_file_tools_stay_inside_the_repository(polyglot: Path, escape: str):
    result = call("code.imports", repo=str(polyglot), file=escape)
    assert result.status == "error" and "escapes the repository root" in result.error


def test_grep_and_list_files_honour_gitignore(polyglot: Path):
    listed = call("code.list_files", repo=str(polyglot)).data["files"]
    assert "shop/tax.py" in listed and not any(f.startswith("generated/") for f in listed)
    found = call("code.grep", repo=str(polyglot), pattern=r"def compute_tax").data["matches"]
    assert [m["file"] for m in found] == ["shop/tax.py"]


def test_the_index_is_built_once_per_snapshot_and_again_when_a_file_changes(polyglot: Path):
    # Given an index of the repository
    first = code_index.index_for(polyglot)
    # When it is asked for again with nothing changed, it is the same one (from memory)
    assert code_index.index_for(polyglot) is first
    # and when a file changes, a new snapshot is indexed with the change in it
    (polyglot / "shop" / "tax.py").write_text(PY_TAX + "\n\ndef compute_vat(amount):\n    return compute_tax(amount)\n")
    second = code_index.index_for(polyglot)
    assert second.snapshot != first.snapshot
    assert [c.caller for c in second.callers("compute_tax") if c.file == "shop/tax.py"] == ["compute_vat"]


def test_a_fresh_process_reads_the_index_from_the_disk_cache(polyglot: Path, monkeypatch: pytest.MonkeyPatch):
    built = code_index.index_for(polyglot)
    monkeypatch.setattr(code_index, "_memory", {})  # as a new warm process would start
    loaded = code_index.index_for(polyglot)
    assert loaded is not built and loaded.snapshot == built.snapshot
    assert loaded.definitions == built.definitions and loaded.calls == built.calls and loaded.imports == built.imports


def test_a_file_that_does_not_parse_is_skipped_with_why(tmp_path: Path):
    write(tmp_path, {"ok.py": "def fine():\n    pass\n", "broken.py": "def oops(:\n"})
    built = code_index.build_index(tmp_path)
    assert [d.name for d in built.definitions] == ["fine"]
    assert built.skipped and built.skipped[0].startswith("broken.py: SyntaxError")
    assert built.stats["files"] == 2 and built.stats["bytes"] > 0


def test_rg_is_found_under_the_layers_bin_when_it_is_not_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Given a layer laid out as pip --target lays it out (/opt/python/bin/rg), and no rg on PATH
    layer = tmp_path / "python"
    (layer / "bin").mkdir(parents=True)
    rg = layer / "bin" / "rg"
    rg.write_text("#!/bin/sh\n")
    rg.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-venv" / "python"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), str(layer)])
    # Then the index's rg is the layer's
    assert code_index.ripgrep() == str(rg)
