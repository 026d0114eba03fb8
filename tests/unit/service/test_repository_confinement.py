"""A mission reads only a repository its user may read: roots, request resolution, and the tools' own check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capabilities.code_analysis import repo_tools
from capabilities.code_analysis.repo_tools import CATALOG
from missions.core.capability import registry as registry
from missions.core.capability.tools import ToolExecutor
from missions.core.errors import MissionRequestError
from missions.core.mission.refs import RepositoryRef
from missions.core.mission.requests import MissionRequest
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.core.roots import AllowedRoots, PathRefused
from missions.service.launcher import build_envelope
from missions.service.repositories.resolver import RepositoryRefused, UserRepositories
from missions.service.repositories.workspace import RepositoryWorkspaces, WorkspaceRefused


@pytest.fixture
def root(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "tax.py").write_text("def compute_tax(x):\n    return x\n")
    (repo / "etc-link").symlink_to("/etc")
    return repo


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "canary.txt").write_text("CANARY-7f3a\n")
    return secret


# -- roots ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("never", ["/", "/proc", "/proc/self", "/sys/kernel", "/dev", "/dev/shm"])
def test_the_system_and_its_pseudo_filesystems_are_never_roots(never: str):
    # Given an operator who configures a root that would expose the system / Then it is refused
    with pytest.raises(PathRefused, match="cannot be a repository root"):
        AllowedRoots.of([never])


@pytest.mark.parametrize(
    "value",
    ["/etc", "/", "/proc/self", "/proc/self/environ", "/var/task", "/opt", "..", "../..", "pkg/../..", "etc-link"],
)
def test_paths_outside_every_root_are_refused(root: Path, value: str):
    # Given one allowed root holding a symlink to /etc
    roots = AllowedRoots.of([root])
    # When a request names a path outside it (directly, by `..`, or through the link) / Then it is refused
    with pytest.raises(PathRefused):
        roots.resolve(value)


@pytest.mark.parametrize(
    "value", [123, None, ["/etc"], {"root": "/etc"}, "", "   ", "a\x00b", "x" * 5000, "0" * 2048, "a/" + "b" * 300]
)
def test_values_that_are_not_usable_paths_are_refused(root: Path, value: object):
    with pytest.raises(PathRefused):
        AllowedRoots.of([root]).resolve(value)


def test_a_path_inside_a_root_resolves_relative_to_the_first_root(root: Path):
    roots = AllowedRoots.of([root])
    assert roots.resolve(".") == root.resolve()
    assert roots.resolve("pkg") == (root / "pkg").resolve()
    assert roots.resolve(str(root / "pkg" / "..")) == root.resolve()


def test_no_roots_means_no_path_at_all(root: Path):
    with pytest.raises(PathRefused, match="register the repository"):
        AllowedRoots().resolve(str(root))


# -- what a request says --------------------------------------------------------------------------


def test_a_local_path_becomes_a_checked_reference_and_the_raw_key_is_consumed(root: Path):
    context = UserRepositories(AllowedRoots.of([root])).resolve({"repo": str(root), "x": 1}, "ada", required=True)
    assert context == {"x": 1, "repository": {"kind": "local", "name": "repo", "root": str(root.resolve())}}


@pytest.mark.parametrize(
    "context",
    [
        {"repo": "/etc"},
        {"repo": 123},
        {"repo": "/proc/self"},
        {"repository": 123},
        {"repository": ""},
        {"repository": {"kind": "local", "name": "x", "root": "/etc"}},  # a forged reference
        {"repository": {"kind": "shell", "root": "/"}},
        {"repo": ".", "repository": "r_1"},
        {"repo": ".", "ref": "main"},
        {"ref": 5},
    ],
)
def test_what_a_request_may_not_name_is_refused(root: Path, context: dict):
    with pytest.raises(RepositoryRefused):
        UserRepositories(AllowedRoots.of([root])).resolve(context, "ada", required=True)


def test_a_required_repository_defaults_to_the_first_root_only_where_roots_exist(root: Path):
    resolved = UserRepositories(AllowedRoots.of([root])).resolve({}, "ada", required=True)
    assert resolved["repository"]["root"] == str(root.resolve())
    with pytest.raises(RepositoryRefused, match="name one with context.repository"):
        UserRepositories(AllowedRoots()).resolve({}, "ada", required=True)


def test_a_registered_repository_id_needs_the_repository_store(root: Path):
    with pytest.raises(RepositoryRefused, match="not available here"):
        UserRepositories(AllowedRoots.of([root])).resolve({"repository": "r_abc"}, "ada", required=True)


def test_build_envelope_without_a_resolver_refuses_rather_than_trusts(root: Path):
    registry.load("code_analysis")
    request = MissionRequest(capability="code_analysis", goal="Where is compute_tax?", context={"repo": "/etc"})
    with pytest.raises(MissionRequestError, match="cannot be resolved"):
        build_envelope(request)
    with pytest.raises(MissionRequestError, match="outside the allowed roots"):
        build_envelope(request, UserRepositories(AllowedRoots.of([root])))


def test_a_capability_that_reads_no_repository_still_never_carries_a_raw_path(root: Path):
    request = MissionRequest(capability="shopping", goal="find me a kettle", context={"repo": "/etc"})
    with pytest.raises(MissionRequestError, match="outside the allowed roots"):
        build_envelope(request, UserRepositories(AllowedRoots.of([root])))


# -- at the tools -----------------------------------------------------------------------------------


def _executor(roots: AllowedRoots | None) -> ToolExecutor:
    agent = AgentConfig(name="traverser", has_tools=True, tool_access=ToolAccess.READ, default_next=None)
    return ToolExecutor(catalog=CATALOG, agent=agent, roots=roots)


@pytest.mark.parametrize(
    ("tool", "params"),
    [
        ("code.read_lines", {"repo": "/etc", "file": "passwd"}),
        ("code.read_lines", {"repo": "/", "file": "etc/passwd"}),
        ("code.read_lines", {"repo": "/proc/self", "file": "environ"}),
        ("code.list_files", {"repo": "/"}),
        ("code.grep", {"repo": "/etc", "pattern": "root"}),
        ("code.find_symbol", {"repo": "/usr/lib", "name": "main"}),
    ],
)
def test_the_executor_refuses_a_root_outside_the_allowed_ones_at_every_call(root: Path, tool: str, params: dict):
    # Given a stage whose tools may read one root / When a call names another / Then it is denied, unread
    result = _executor(AllowedRoots.of([root])).execute(tool, params)
    assert result.status == "denied" and "refused" in (result.error or "")
    assert result.data is None


def test_the_executor_lets_a_call_inside_the_root_run(root: Path):
    result = _executor(AllowedRoots.of([root])).execute("code.read_lines", {"repo": str(root), "file": "pkg/tax.py"})
    assert result.status == "success" and result.data["lines"][0]["text"].startswith("def compute_tax")


@pytest.mark.parametrize("system", ["/", "/proc/self", "/proc", "/sys", "/dev"])
def test_the_tools_themselves_never_read_the_system(system: str):
    # Given a tool called with no executor at all (the last line of defence)
    result = repo_tools.list_files(repo_tools.ListFilesParams(repo=system))
    assert result.status == "error" and "refused" in (result.error or "")


def test_a_symlink_inside_a_root_does_not_lead_out(root: Path, outside: Path):
    (root / "leak").symlink_to(outside / "canary.txt")
    (root / "leakdir").symlink_to(outside)
    executor = _executor(AllowedRoots.of([root]))
    for params in ({"file": "leak"}, {"file": "leakdir/canary.txt"}):
        result = executor.execute("code.read_lines", {"repo": str(root), **params})
        assert result.status == "error" and "CANARY" not in str(result.data)
    grep = executor.execute("code.grep", {"repo": str(root), "pattern": "CANARY"})
    assert grep.status == "success" and grep.data["matches"] == []


# -- the workspace at stage time --------------------------------------------------------------------


def test_the_workspace_checks_a_local_reference_again(root: Path, tmp_path: Path):
    workspaces = RepositoryWorkspaces(AllowedRoots.of([root]), tmp_path / "cache")
    good = RepositoryRef(kind="local", name="repo", root=str(root))
    assert workspaces.root_for(good, "ada") == root.resolve()
    with pytest.raises(WorkspaceRefused):
        workspaces.root_for(RepositoryRef(kind="local", name="etc", root="/etc"), "ada")
    assert (tmp_path / "cache").resolve() in workspaces.roots.roots  # tools may read unpacked snapshots


def test_the_workspace_refuses_a_snapshot_of_another_user(tmp_path: Path):
    workspaces = RepositoryWorkspaces(AllowedRoots(), tmp_path / "cache")
    theirs = RepositoryRef(kind="snapshot", name="x", id="r_1", owner="bob", snapshot="ab" * 32)
    with pytest.raises(WorkspaceRefused, match="not readable"):
        workspaces.root_for(theirs, "ada")


def test_a_relative_root_is_resolved_once_from_where_the_server_started(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert AllowedRoots.of(["."]).roots == (Path(os.getcwd()).resolve(),)
