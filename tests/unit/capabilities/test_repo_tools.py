"""The read-only repository tools: results, citations that point at real lines, confinement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capabilities.code_analysis.repo_tools import CATALOG, resolve_inside
from missions.core.capability.tools import RiskLevel, ToolError, ToolResult

SECRET = "TOP-SECRET-OUTSIDE-THE-REPO"

APP_PY = '''\
"""The app module."""

import os


def helper(x: int, y: int = 2) -> int:
    """Add two numbers.

    More text here.
    """
    return x + y


@staticmethod
def decorated():
    return None


class Greeter(Base, metaclass=Meta):
    """Says hello."""

    def greet(self, name):
        return f"hello {name}"

    async def fetch(self):
        return await something()


async def main():
    def inner():
        pass
    return inner
'''


def call(tool_id: str, **params) -> ToolResult:
    spec = CATALOG.get(tool_id)
    assert spec is not None
    return spec.func(spec.parameters(**params))


def line_of(root: Path, file: str, line: int) -> str:
    return (root / file).read_text().split("\n")[line - 1]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text(f"{SECRET}\n")
    (secret_dir / "secret.py").write_text(f"def helper():\n    '''{SECRET}'''\n")
    return secret_dir


@pytest.fixture
def repo(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "app.py").write_text(APP_PY)
    (root / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'util helper'\n")
    (root / "src" / "broken.py").write_text("def oops(:\n    pass\n")
    (root / "README.md").write_text("# Demo\nThe helper lives in src/app.py\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00helper")
    for hidden in (".git", ".venv", "node_modules", "__pycache__", "cdk.out", ".cache", "build", "dist"):
        (root / hidden).mkdir()
        (root / hidden / "hidden.py").write_text("def helper():\n    pass  # helper\n")
    os.symlink(outside / "secret.txt", root / "link.txt")
    os.symlink(outside, root / "linkdir")
    return root


def test_all_tools_are_registered_read_only_without_retries():
    # Given the module catalog / When its specs are listed
    ids = {spec.id for spec in CATALOG.list()}
    # Then the text tools and the index's tools are there, read-only and never retried
    assert ids == {
        "code.list_files",
        "code.grep",
        "code.read_lines",
        "code.find_symbol",
        "code.find_callers",
        "code.find_references",
        "code.callees",
        "code.call_path",
        "code.imports",
        "code.dependents",
    }
    for spec in CATALOG.list():
        assert spec.risk is RiskLevel.READ_ONLY and spec.max_retries == 0
        assert "repo" in spec.parameters.model_json_schema()["properties"]


# -- code.list_files ---------------------------------------------------------------------------


def test_list_files_lists_sorted_text_files_and_skips_hidden_dirs_binaries_and_outside_links(repo):
    # Given a repo with hidden dirs, a binary file and symlinks to outside
    # When all files are listed
    result = call("code.list_files", repo=str(repo))
    # Then only the visible text files inside the root appear, sorted, each cited at line 1
    assert result.status == "success"
    assert result.data == {
        "files": ["README.md", "src/app.py", "src/broken.py", "src/pkg/util.py"],
        "truncated": False,
    }
    assert [(c.file, c.line) for c in result.citations] == [(f, 1) for f in result.data["files"]]


def test_list_files_filters_by_pattern_and_path_and_truncates(repo):
    # Given the repo / When listing *.py under src with a cap of 2
    result = call("code.list_files", repo=str(repo), path="src", pattern="*.py", max_results=2)
    # Then the first two sorted .py files come back and truncation is reported
    assert result.data == {"files": ["src/app.py", "src/broken.py"], "truncated": True}


def test_list_files_caps_citations_at_50(tmp_path):
    # Given a repo with 60 files
    for i in range(60):
        (tmp_path / f"f{i:02}.txt").write_text("x\n")
    # When listing them
    result = call("code.list_files", repo=str(tmp_path))
    # Then every file is returned but only 50 are cited
    assert len(result.data["files"]) == 60 and len(result.citations) == 50


def test_list_files_missing_dir_is_not_found(repo):
    # Given the repo / When listing a directory that does not exist
    result = call("code.list_files", repo=str(repo), path="nope")
    # Then the status says not found
    assert result.status == "not_found"


@pytest.mark.parametrize("root", ["/definitely/not/here", "file"])
def test_missing_or_non_directory_root_is_an_error(tmp_path, root):
    # Given a root that is missing or a regular file
    (tmp_path / "file").write_text("x")
    repo = root if root.startswith("/") else str(tmp_path / root)
    # When any tool runs against it
    result = call("code.list_files", repo=repo)
    # Then it fails cleanly
    assert result.status == "error" and "repository root" in result.error


# -- code.grep ---------------------------------------------------------------------------------


def test_grep_finds_matches_whose_citations_point_at_the_matching_line(repo):
    # Given the repo / When grepping for helper
    result = call("code.grep", repo=str(repo), pattern=r"def helper")
    # Then matches come from visible text files only, and each cited line contains the match
    assert result.status == "success" and result.data["truncated"] is False
    files = {m["file"] for m in result.data["matches"]}
    assert files == {"src/app.py", "src/pkg/util.py"}
    assert len(result.citations) == len(result.data["matches"])
    for match, citation in zip(result.data["matches"], result.citations, strict=True):
        assert (citation.file, citation.line) == (match["file"], match["line"])
        assert "def helper" in line_of(repo, citation.file, citation.line)
        assert match["text"] == line_of(repo, citation.file, citation.line)


def test_grep_honours_glob_ignore_case_and_max_matches(repo):
    # Given the repo / When grepping case-insensitively in markdown only
    result = call("code.grep", repo=str(repo), pattern="HELPER", glob="*.md", ignore_case=True)
    # Then the README line is found
    assert result.data["matches"] == [{"file": "README.md", "line": 2, "text": "The helper lives in src/app.py"}]
    # When the match cap is 1 for a pattern matching many lines
    capped = call("code.grep", repo=str(repo), pattern="helper", max_matches=1)
    # Then one match comes back and truncation is reported
    assert len(capped.data["matches"]) == 1 and capped.data["truncated"] is True


def test_grep_truncates_long_lines_and_skips_big_files(tmp_path):
    # Given a long line and a file over 1 MB
    (tmp_path / "long.txt").write_text("needle" + "x" * 1000 + "\n")
    (tmp_path / "big.txt").write_text("needle\n" + "y" * 1_100_000)
    # When grepping
    result = call("code.grep", repo=str(tmp_path), pattern="needle")
    # Then only the small file matches, its text cut to 300 characters
    assert [m["file"] for m in result.data["matches"]] == ["long.txt"]
    assert len(result.data["matches"][0]["text"]) == 300


def test_grep_invalid_regex_is_a_clear_error(repo):
    # Given the repo / When the pattern is not a valid regex
    result = call("code.grep", repo=str(repo), pattern="def (")
    # Then the tool reports it instead of raising
    assert result.status == "error"
    assert "invalid regular expression" in result.error and result.citations == []


# -- code.read_lines ---------------------------------------------------------------------------


def test_read_lines_returns_the_range_with_a_range_citation(repo):
    # Given the repo / When reading lines 6-8 of app.py
    result = call("code.read_lines", repo=str(repo), file="src/app.py", start=6, end=8)
    # Then those lines come back numbered, and the citation spans them
    assert result.status == "success"
    assert result.data["file"] == "src/app.py"
    assert (result.data["start"], result.data["end"]) == (6, 8)
    assert result.data["total_lines"] == len(APP_PY.splitlines())
    assert [entry["line"] for entry in result.data["lines"]] == [6, 7, 8]
    for entry in result.data["lines"]:
        assert entry["text"] == line_of(repo, "src/app.py", entry["line"])
    assert result.data["lines"][0]["text"].startswith("def helper")
    [citation] = result.citations
    assert (citation.file, citation.line, citation.end_line) == ("src/app.py", 6, 8)


def test_read_lines_default_window_and_clamping(tmp_path):
    # Given a 500-line file
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 501)))
    # When reading with defaults, past the end, and more than 400 lines
    default = call("code.read_lines", repo=str(tmp_path), file="f.txt", start=10)
    past_end = call("code.read_lines", repo=str(tmp_path), file="f.txt", start=490, end=9999)
    too_many = call("code.read_lines", repo=str(tmp_path), file="f.txt", start=1, end=500)
    # Then the window is start+59, the end is clamped to the file, and a call reads at most 400
    assert (default.data["start"], default.data["end"]) == (10, 69)
    assert past_end.data["end"] == 500 and past_end.citations[0].end_line == 500
    assert past_end.data["lines"][-1] == {"line": 500, "text": "line 500"}
    assert too_many.data["end"] == 400 and len(too_many.data["lines"]) == 400


def test_read_lines_start_beyond_end_missing_file_and_directory(repo):
    # Given the repo / When starting past the end, reading a missing file, or a directory
    beyond = call("code.read_lines", repo=str(repo), file="README.md", start=50)
    missing = call("code.read_lines", repo=str(repo), file="src/nope.py")
    directory = call("code.read_lines", repo=str(repo), file="src")
    # Then each fails with the right status
    assert beyond.status == "error" and "beyond the end" in beyond.error
    assert missing.status == "not_found"
    assert directory.status == "error"


# -- code.find_symbol --------------------------------------------------------------------------


def test_find_symbol_function_with_signature_docstring_and_def_line_citation(repo):
    # Given the repo / When looking for helper
    result = call("code.find_symbol", repo=str(repo), name="helper")
    # Then both definitions are found (hidden dirs and outside links are not searched)
    assert result.status == "success"
    by_file = {s["file"]: s for s in result.data["symbols"]}
    assert set(by_file) == {"src/app.py", "src/pkg/util.py"}
    helper = by_file["src/app.py"]
    assert helper["kind"] == "function" and helper["qualname"] == "helper"
    assert helper["signature"] == "def helper(x: int, y: int=2) -> int"
    assert helper["docstring"] == "Add two numbers."
    assert by_file["src/pkg/util.py"]["docstring"] is None
    # And the broken file was skipped and counted
    assert result.data["skipped"] == 1
    # And each citation's first line is the def line and spans the body
    for symbol, citation in zip(result.data["symbols"], result.citations, strict=True):
        assert (citation.file, citation.line, citation.end_line) == (symbol["file"], symbol["line"], symbol["end_line"])
        assert line_of(repo, citation.file, citation.line).lstrip().startswith("def helper(")
    assert helper["end_line"] == helper["line"] + 5


def test_find_symbol_decorated_function_cites_the_def_line(repo):
    # Given a decorated function / When looked up
    [symbol] = call("code.find_symbol", repo=str(repo), name="decorated").data["symbols"]
    # Then the citation points at `def`, not at the decorator
    assert line_of(repo, symbol["file"], symbol["line"]) == "def decorated():"


def test_find_symbol_class(repo):
    # Given the repo / When looking for the class Greeter
    result = call("code.find_symbol", repo=str(repo), name="Greeter", kind="class")
    # Then it is found with its bases and docstring
    [symbol] = result.data["symbols"]
    assert symbol["kind"] == "class"
    assert symbol["signature"] == "class Greeter(Base, metaclass=Meta)"
    assert symbol["docstring"] == "Says hello."
    assert line_of(repo, symbol["file"], symbol["line"]).startswith("class Greeter")


@pytest.mark.parametrize("name", ["greet", "Greeter.greet"])
def test_find_symbol_method_by_name_or_qualified_name(repo, name):
    # Given the repo / When looking for a method plainly or as Class.method
    [symbol] = call("code.find_symbol", repo=str(repo), name=name).data["symbols"]
    # Then the method is found with its qualified name and def line
    assert symbol["qualname"] == "Greeter.greet" and symbol["kind"] == "method"
    assert line_of(repo, symbol["file"], symbol["line"]).strip() == "def greet(self, name):"


def test_find_symbol_async_nested_and_kind_filter(repo):
    # Given the repo / When looking for async and nested functions
    [fetch] = call("code.find_symbol", repo=str(repo), name="Greeter.fetch").data["symbols"]
    [inner] = call("code.find_symbol", repo=str(repo), name="inner").data["symbols"]
    wrong_kind = call("code.find_symbol", repo=str(repo), name="greet", kind="class")
    other_class = call("code.find_symbol", repo=str(repo), name="Other.greet")
    # Then they are found, and the kind and qualifier filter others out
    assert fetch["signature"] == "async def fetch(self)"
    assert inner["qualname"] == "main.inner"
    assert wrong_kind.data["symbols"] == [] and other_class.data["symbols"] == []


def test_find_symbol_rejects_non_identifiers(repo):
    # Given the repo / When the name is not an identifier
    # Then the parameters do not validate
    with pytest.raises(ValueError):
        CATALOG.get("code.find_symbol").parameters(repo=str(repo), name="foo bar")


# -- confinement -------------------------------------------------------------------------------


ESCAPES = [
    ("code.list_files", {"path": "../outside"}),
    ("code.list_files", {"path": "linkdir"}),
    ("code.grep", {"pattern": "SECRET", "path": ".."}),
    ("code.grep", {"pattern": "SECRET", "path": "linkdir"}),
    ("code.grep", {"pattern": "SECRET", "path": "link.txt"}),
    ("code.read_lines", {"file": "../outside/secret.txt"}),
    ("code.read_lines", {"file": "src/../../outside/secret.txt"}),
    ("code.read_lines", {"file": "link.txt"}),
    ("code.read_lines", {"file": "linkdir/secret.txt"}),
    ("code.find_symbol", {"name": "helper", "path": "../outside"}),
    ("code.find_symbol", {"name": "helper", "path": "linkdir"}),
]


@pytest.mark.parametrize(("tool_id", "params"), ESCAPES)
def test_relative_escapes_and_outside_symlinks_are_rejected(repo, tool_id, params):
    # Given a secret next to the repo / When a tool is pointed at it
    result = call(tool_id, repo=str(repo), **params)
    # Then it is refused and nothing of the secret leaks
    assert result.status == "error"
    assert result.error.startswith("path escapes the repository root")
    assert SECRET not in result.model_dump_json()


@pytest.mark.parametrize(
    ("tool_id", "key"),
    [
        ("code.list_files", "path"),
        ("code.grep", "path"),
        ("code.read_lines", "file"),
        ("code.find_symbol", "path"),
    ],
)
def test_absolute_paths_are_rejected(repo, outside, tool_id, key):
    # Given an absolute path, even one inside the repo
    extra = {"pattern": "SECRET"} if tool_id == "code.grep" else {}
    extra |= {"name": "helper"} if tool_id == "code.find_symbol" else {}
    for target in (outside / "secret.txt", repo / "README.md"):
        # When a tool is given it
        result = call(tool_id, repo=str(repo), **{key: str(target)}, **extra)
        # Then it is refused
        assert result.status == "error" and "path escapes the repository root" in result.error
        assert SECRET not in result.model_dump_json()


def test_whole_repo_scans_never_read_through_outside_symlinks(repo):
    # Given symlinks to outside inside the repo / When scanning the whole repo
    results = [
        call("code.grep", repo=str(repo), pattern="SECRET"),
        call("code.list_files", repo=str(repo)),
        call("code.find_symbol", repo=str(repo), name="helper"),
    ]
    # Then nothing from outside shows up
    for result in results:
        assert result.status == "success"
        assert SECRET not in result.model_dump_json()
        assert not any(c.file.startswith(("link", "..")) for c in result.citations)
    assert results[0].data["matches"] == []


def test_symlink_inside_the_root_is_allowed(repo):
    # Given a symlink to a file inside the root
    os.symlink(repo / "README.md", repo / "readme-link.md")
    # When it is read
    result = call("code.read_lines", repo=str(repo), file="readme-link.md")
    # Then the real file is read and cited
    assert result.status == "success" and result.citations[0].file == "README.md"


SEGMENTS = st.sampled_from(["..", ".", "a", "b", "/", "x.py"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(SEGMENTS, max_size=8), sep=st.sampled_from(["/", ""]))
def test_resolve_inside_never_returns_a_path_outside_the_root(tmp_path, parts, sep):
    # Given a root with a real dir `a` and a symlink `b` pointing outside it
    root = tmp_path / "root"
    if not root.exists():
        (root / "a").mkdir(parents=True)
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "elsewhere", root / "b")
    relative = sep.join(parts)
    # When the path is resolved
    try:
        resolved = resolve_inside(root, relative)
    except ToolError as exc:
        # Then either it is refused as an escape
        assert "path escapes the repository root" in str(exc)
        return
    # Or it lies inside the root
    assert resolved.is_relative_to(root.resolve())
