"""Repositories as a resource: register, import, read through missions, delete — with fakes, no network."""

from __future__ import annotations

from pathlib import Path

import pytest
from dulwich import porcelain

from missions.adapters.memory.repositories import MemoryRepositoryStore, MemorySnapshotStore
from missions.core.capability.mcp import mcp_tools
from missions.core.capability.tools import ToolCatalog, ToolEnv, ToolExecutor
from missions.core.errors import DependencyUnavailable, NotFound, RepositoryConflict, RepositoryRequestError
from missions.core.mission.refs import SHARED_OWNER, RepositoryRef
from missions.core.pipeline.config import AgentConfig, ToolAccess
from missions.core.roots import AllowedRoots
from missions.service.repositories.archive import extract_snapshot
from missions.service.repositories.resolver import RepositoryRefused, UserRepositories
from missions.service.repositories.service import RepositoryService, UrlPolicy
from missions.service.repositories.workspace import RepositoryWorkspaces, WorkspaceRefused
from tests.support.archives import tar_gz_bytes as tar_gz
from tests.support.mcp_servers import REAL_GIT, gateway, git_server

READER = AgentConfig(name="traverser", has_tools=True, tool_access=ToolAccess.READ)

PUBLIC = {"github.com": ["140.82.121.4"], "evil.example": ["169.254.169.254"], "intranet.example": ["10.0.0.7"]}


def resolve(host: str) -> list[str]:
    if host in PUBLIC:
        return PUBLIC[host]
    if host in ("localhost", "127.0.0.1"):
        return ["127.0.0.1"]
    raise OSError("unknown host")


class Queue:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []
        self.down = False

    def request_import(self, repository_id: str, ref: str | None) -> None:
        if self.down:
            raise DependencyUnavailable("the event bus refused the import request")
        self.requests.append((repository_id, ref))


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "shop"
    root.mkdir(parents=True)
    (root / "tax.py").write_text("def compute_tax(amount):\n    return amount * 0.2\n")
    repo = porcelain.init(str(root))
    porcelain.add(repo, [str(root / "tax.py")])
    porcelain.commit(repo, message=b"first", author=b"A <a@example.com>", committer=b"A <a@example.com>")
    return root


@pytest.fixture
def service(tmp_path: Path) -> RepositoryService:
    policy = UrlPolicy(allow_local=True, roots=AllowedRoots.of([tmp_path / "src"]), resolve_host=resolve)
    return RepositoryService(MemoryRepositoryStore(), MemorySnapshotStore(), Queue(), urls=policy)


# -- which URLs an import may fetch ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://github.com/a/b.git", "only https"),
        ("https://user:token@github.com/a/b.git", "no credentials"),
        ("https://evil.example/a.git", "not a public address"),
        ("https://intranet.example/a.git", "not a public address"),
        ("https://127.0.0.1/a.git", "not a public address"),
        ("https://nowhere.example/a.git", "cannot be resolved"),
        ("ftp://github.com/a.git", "not supported"),
        ("ssh://git@github.com/a.git", "not supported"),
        ("file:///etc", "only https"),
        ("/etc", "only https"),
        (123, "must be a git URL"),
        ("https://github.com/\r\nx", "must be a git URL"),
    ],
)
def test_in_aws_only_https_to_public_hosts_without_credentials(url: object, why: str):
    with pytest.raises(RepositoryRequestError, match=why):
        UrlPolicy(resolve_host=resolve).check(url)


def test_a_public_https_url_is_accepted():
    assert UrlPolicy(resolve_host=resolve).check("https://github.com/a/b.git") == "https://github.com/a/b.git"


def test_locally_file_urls_must_lie_under_a_root(git_repo: Path, tmp_path: Path):
    policy = UrlPolicy(allow_local=True, roots=AllowedRoots.of([tmp_path / "src"]), resolve_host=resolve)
    assert policy.check(f"file://{git_repo}") == str(git_repo.resolve())
    assert policy.check("http://127.0.0.1:9/x.git") == "http://127.0.0.1:9/x.git"  # a dumb-HTTP server here
    for outside in ("file:///etc", "/etc", f"file://{tmp_path}"):
        with pytest.raises(RepositoryRequestError, match="outside the allowed roots"):
            policy.check(outside)


# -- git: register, import, read -----------------------------------------------------------------


def test_a_git_repository_is_registered_imported_and_read_by_its_owner_only(service, git_repo: Path, tmp_path: Path):
    # Given ada registers her repository by URL
    record, upload = service.register("ada", url=f"file://{git_repo}")
    assert upload is None and record.status == "importing" and record.name == "shop"
    assert service.imports.requests == [(record.repository_id, None)]
    # When the import function runs
    imported = service.run_import(record.repository_id, None, tmp_path)
    # Then one snapshot, under ada's prefix, named by its content hash, and its history beside it
    assert imported.status == "ready" and len(imported.snapshots) == 1
    snapshot = imported.snapshots[0]
    assert len(snapshot.commit or "") == 40 and snapshot.files == 1 and snapshot.history
    keys = list(service.snapshots.objects)
    ref = RepositoryRef(
        kind="snapshot", name="s", id=record.repository_id, owner="ada", snapshot=snapshot.sha256, history=True
    )
    assert sorted(keys) == sorted([ref.key, ref.history_key])
    # And a mission of ada's resolves it; bob's cannot tell it exists
    resolver = UserRepositories(AllowedRoots(), service.store)
    context = resolver.resolve({"repository": record.repository_id}, "ada", required=True)
    assert context["repository"]["snapshot"] == snapshot.sha256 and context["repository"]["kind"] == "snapshot"
    with pytest.raises(RepositoryRefused, match=f"no repository {record.repository_id}"):
        resolver.resolve({"repository": record.repository_id}, "bob", required=True)
    with pytest.raises(NotFound):
        service.get("bob", record.repository_id)
    # And a resolved reference is checked again, not trusted (a queued request, or a forged one)
    again = resolver.resolve(dict(context), "ada", required=True)
    assert again == context
    forged = {**context["repository"], "snapshot": "0" * 64}
    with pytest.raises(RepositoryRefused, match="no longer has snapshot"):
        resolver.resolve({"repository": forged}, "ada", required=True)
    with pytest.raises(RepositoryRefused):
        resolver.resolve({"repository": context["repository"]}, "bob", required=True)


def test_an_unreachable_bus_stores_nothing(service, git_repo: Path):
    service.imports.down = True
    with pytest.raises(DependencyUnavailable):
        service.register("ada", url=f"file://{git_repo}")
    assert service.list("ada") == []


def test_an_import_of_an_unknown_ref_fails_with_a_reason_and_keeps_the_last_good_snapshot(
    service, git_repo: Path, tmp_path: Path
):
    record, _ = service.register("ada", url=f"file://{git_repo}")
    service.run_import(record.repository_id, None, tmp_path)
    service.request_import("ada", record.repository_id, "no-such-branch")
    failed = service.run_import(record.repository_id, "no-such-branch", tmp_path)
    assert failed.status == "failed" and "no-such-branch" in (failed.reason or "")
    # the repository still answers at its last good snapshot
    context = UserRepositories(AllowedRoots(), service.store).resolve(
        {"repository": record.repository_id}, "ada", required=True
    )
    assert context["repository"]["snapshot"] == failed.snapshots[-1].sha256


def test_an_import_already_running_is_a_conflict(service, git_repo: Path):
    record, _ = service.register("ada", url=f"file://{git_repo}")
    with pytest.raises(RepositoryConflict, match="already importing"):
        service.request_import("ada", record.repository_id)


def test_only_an_operator_shares_and_everyone_reads_a_shared_repository(service, git_repo: Path, tmp_path: Path):
    with pytest.raises(PermissionError):
        service.register("ada", url=f"file://{git_repo}", shared=True)
    record, _ = service.register("op", url=f"file://{git_repo}", shared=True, operator=True)
    assert record.owner == SHARED_OWNER
    service.run_import(record.repository_id, None, tmp_path)
    assert [r.repository_id for r in service.list("bob")] == [record.repository_id]
    context = UserRepositories(AllowedRoots(), service.store).resolve(
        {"repository": record.repository_id}, "bob", required=True
    )
    assert context["repository"]["owner"] == SHARED_OWNER
    with pytest.raises(PermissionError):
        service.delete("bob", record.repository_id)
    service.delete("op", record.repository_id, operator=True)
    assert service.snapshots.objects == {}


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({}, "either url"),
        ({"url": "https://github.com/a/b.git", "upload": {"format": "zip", "size_bytes": 10}}, "either url"),
        ({"url": "https://github.com/a/b.git", "ref": "../x"}, "ref must be"),
        ({"url": "https://github.com/a/b.git", "name": "a/b"}, "name must be"),
        ({"upload": {"format": "rar", "size_bytes": 10}}, "upload.format"),
        ({"upload": {"format": "zip", "size_bytes": 0}}, "size_bytes"),
        ({"upload": {"format": "zip", "size_bytes": 10**12}}, "size_bytes"),
        ({"upload": {"format": "zip", "size_bytes": True}}, "size_bytes"),
    ],
)
def test_bad_registrations_are_refused_and_store_nothing(service, fields: dict, why: str):
    with pytest.raises(RepositoryRequestError, match=why):
        service.register("ada", **fields)
    assert service.list("ada") == [] and service.imports.requests == []


# -- uploads --------------------------------------------------------------------------------------


def test_an_uploaded_archive_becomes_a_snapshot(service, tmp_path: Path):
    data = tar_gz({"shop-main/tax.py": b"def compute_tax(x):\n    return x\n"})
    record, upload = service.register("ada", upload={"format": "tar.gz", "size_bytes": len(data)})
    assert record.status == "awaiting_upload" and upload and upload["method"] == "PUT"
    with pytest.raises(RepositoryConflict, match="no archive was uploaded"):
        service.request_import("ada", record.repository_id)
    service.snapshots.receive(upload["url"], data)
    service.request_import("ada", record.repository_id)
    imported = service.run_import(record.repository_id, None, tmp_path)
    assert imported.status == "ready" and imported.snapshots[0].files == 1
    assert not imported.snapshots[0].history  # an archive has no git history to keep


@pytest.mark.parametrize(
    "files",
    [
        {"../../etc/cron.d/x": b"* * * * * root sh\n"},
        {"/etc/passwd": b"root::0:0\n"},
    ],
)
def test_a_hostile_upload_fails_with_its_reason_and_writes_no_snapshot(service, tmp_path: Path, files: dict):
    data = tar_gz(files)
    record, upload = service.register("ada", upload={"format": "tar.gz", "size_bytes": len(data)})
    service.snapshots.receive(upload["url"], data)
    service.request_import("ada", record.repository_id)
    failed = service.run_import(record.repository_id, None, tmp_path)
    assert failed.status == "failed" and failed.reason
    assert not [key for key in service.snapshots.objects if key.startswith("repositories/")]


def test_a_corrupt_upload_fails_with_a_reason(service, tmp_path: Path):
    record, upload = service.register("ada", upload={"format": "zip", "size_bytes": 9})
    service.snapshots.receive(upload["url"], b"not a zip")
    service.request_import("ada", record.repository_id)
    assert service.run_import(record.repository_id, None, tmp_path).status == "failed"


# -- materialization --------------------------------------------------------------------------------


def test_a_snapshot_is_unpacked_once_per_container_and_read_only_by_its_user(service, git_repo: Path, tmp_path: Path):
    record, _ = service.register("ada", url=f"file://{git_repo}")
    snapshot = service.run_import(record.repository_id, None, tmp_path).snapshots[0]
    ref = RepositoryRef(kind="snapshot", name="shop", id=record.repository_id, owner="ada", snapshot=snapshot.sha256)
    workspaces = RepositoryWorkspaces(
        AllowedRoots(), tmp_path / "cache", snapshots=service.snapshots, extract=extract_snapshot
    )
    root = workspaces.root_for(ref, "ada")
    assert (root / "tax.py").read_text().startswith("def compute_tax")
    assert workspaces.last and workspaces.last.cold
    assert workspaces.root_for(ref, "ada") == root and not workspaces.last.cold  # warm: no download
    assert workspaces.roots.contains(root)
    with pytest.raises(WorkspaceRefused):
        workspaces.root_for(ref, "bob")
    # a deleted repository cannot be unpacked anew
    service.delete("ada", record.repository_id)
    cold = RepositoryWorkspaces(
        AllowedRoots(), tmp_path / "cache2", snapshots=service.snapshots, extract=extract_snapshot
    )
    with pytest.raises(NotFound):
        cold.root_for(ref, "ada")


def test_a_git_import_keeps_its_history_beside_the_snapshot_for_a_git_mcp_server(
    service, git_repo: Path, tmp_path: Path
):
    # Given a repository whose file changed in a second commit, imported from git
    (git_repo / "tax.py").write_text("def compute_tax(amount):\n    return amount * 0.25\n")
    author = b"Bea <bea@example.com>"
    porcelain.add(str(git_repo), [str(git_repo / "tax.py")])
    porcelain.commit(str(git_repo), message=b"raise the tax rate: the 2026 budget", author=author, committer=author)
    record, _ = service.register("ada", url=f"file://{git_repo}")
    snapshot = service.run_import(record.repository_id, None, tmp_path).snapshots[0]
    ref = UserRepositories(AllowedRoots(), service.store).resolve(
        {"repository": record.repository_id}, "ada", required=True
    )
    assert ref["repository"]["history"] is True
    # When a stage's container materializes it
    workspaces = RepositoryWorkspaces(
        AllowedRoots(), tmp_path / "cache", snapshots=service.snapshots, extract=extract_snapshot
    )
    root = workspaces.root_for(RepositoryRef.model_validate(ref["repository"]), "ada")
    # Then the tree is the snapshot's, the code tools' view unchanged, with its history as `.git`
    assert (root / "tax.py").read_text().endswith("0.25\n") and (root / ".git" / "HEAD").is_file()
    # and the real git MCP server reads the history: who changed the line, when and why
    with gateway() as mcp:
        server = git_server(REAL_GIT, {"git_log": "read", "git_show": "read"})
        tools = ToolCatalog(mcp_tools("code_analysis", [server], mcp.lock([server])))
        run = ToolExecutor(catalog=tools, agent=READER, roots=workspaces.roots, env=ToolEnv("m", "u", str, mcp))
        log = run.execute("git__git_log", {"repo_path": str(root)})
        show = run.execute("git__git_show", {"repo_path": str(root), "revision": snapshot.commit})
    assert log.status == "success" and show.status == "success", (log.error, show.error)
    assert log.data["text"].index("raise the tax rate") < log.data["text"].index("first")
    assert "-    return amount * 0.2\n+    return amount * 0.25" in show.data["text"]
    assert "Author: Bea <bea@example.com>" in show.data["text"]
