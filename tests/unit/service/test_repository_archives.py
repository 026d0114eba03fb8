"""Hostile archives and repositories never become snapshots; good ones become the same snapshot however packed."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest
from dulwich import porcelain

from missions.service.repositories.archive import (
    ArchiveRejected,
    SnapshotLimits,
    extract_snapshot,
    snapshot_from_archive,
    snapshot_from_directory,
    snapshot_from_git,
)

TREE = {"pkg/tax.py": b"def compute_tax(x):\n    return x * 0.2\n", "README.md": b"# shop\n", "run.sh": b"#!/bin/sh\n"}


def tar_gz(path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                archive.addfile(entry)
            else:
                name, data = entry
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
                archive.addfile(info, io.BytesIO(data))
    return path


def special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


def zip_file(path: Path, entries: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | (0o755 if name.endswith(".sh") else 0o644)) << 16
            archive.writestr(info, data, zipfile.ZIP_DEFLATED)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for name, data in TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "run.sh").chmod(0o755)
    return root


# -- good input -----------------------------------------------------------------------------------------


def test_a_tar_a_zip_and_a_directory_of_the_same_tree_are_the_same_snapshot(tmp_path: Path, tree: Path):
    # Given the same files packed three ways (the tar wrapped in a GitHub-style top folder)
    packed = tar_gz(tmp_path / "a.tar.gz", [(f"shop-main/{n}", d) for n, d in TREE.items()])
    zipped = zip_file(tmp_path / "a.zip", TREE)
    # When each becomes a snapshot
    from_tar = snapshot_from_archive(packed, "tar.gz", tmp_path / "1.tar.gz")
    from_zip = snapshot_from_archive(zipped, "zip", tmp_path / "2.tar.gz")
    from_dir = snapshot_from_directory(tree, tmp_path / "3.tar.gz")
    again = snapshot_from_directory(tree, tmp_path / "4.tar.gz")
    # Then their content hashes are equal, and deterministic
    assert from_tar.sha256 == from_zip.sha256 == from_dir.sha256 == again.sha256
    assert (from_dir.files, from_dir.total_bytes) == (3, sum(len(d) for d in TREE.values()))


def test_a_snapshot_unpacks_to_the_same_files_once_and_atomically(tmp_path: Path, tree: Path):
    (tree / "pkg" / "link.py").symlink_to("tax.py")  # a link that stays inside is kept
    snapshot = snapshot_from_directory(tree, tmp_path / "s.tar.gz")
    target = tmp_path / "out"
    extract_snapshot(snapshot.path, target)
    for name, data in TREE.items():
        assert (target / name).read_bytes() == data
    assert (target / "pkg" / "link.py").is_symlink() and (target / "pkg" / "link.py").read_bytes() == TREE["pkg/tax.py"]
    assert (target / "run.sh").stat().st_mode & 0o111
    (target / "marker").write_text("kept")
    extract_snapshot(snapshot.path, target)  # already there: nothing is redone
    assert (target / "marker").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out-")] == []


# -- hostile archives: one of each kind --------------------------------------------------------------------


HOSTILE_TARS = {
    "absolute path": [("/etc/cron.d/evil", b"x")],
    "dot-dot path": [("../../etc/cron.d/evil", b"x")],
    "dot-dot inside": [("src/../../evil", b"x")],
    "windows path": [("C:\\evil.txt", b"x")],
    "symlink to /etc": [special("etc", tarfile.SYMTYPE, "/etc/passwd")],
    "symlink escaping": [("a/b.py", b"x"), special("a/out", tarfile.SYMTYPE, "../../../etc/shadow")],
    "hard link out": [special("passwd", tarfile.LNKTYPE, "/etc/passwd")],
    "character device": [special("tty", tarfile.CHRTYPE)],
    "block device": [special("disk", tarfile.BLKTYPE)],
    "fifo": [special("pipe", tarfile.FIFOTYPE)],
    "duplicate names": [("a.py", b"1"), ("a.py", b"2")],
    "file and directory": [("a", b"1"), ("a/b.py", b"2")],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_TARS))
def test_a_hostile_tar_is_refused_with_a_reason_and_writes_nothing(tmp_path: Path, kind: str):
    archive = tar_gz(tmp_path / "h.tar.gz", HOSTILE_TARS[kind])
    with pytest.raises(ArchiveRejected) as refused:
        snapshot_from_archive(archive, "tar.gz", tmp_path / "out.tar.gz")
    assert str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "out.tar.gz").exists()


@pytest.mark.parametrize(
    ("entries", "links"),
    [({"../evil.py": b"x"}, None), ({"/abs.py": b"x"}, None), ({"ok.py": b"x"}, {"out": "../../etc/passwd"})],
)
def test_a_hostile_zip_is_refused(tmp_path: Path, entries, links):
    with pytest.raises(ArchiveRejected):
        snapshot_from_archive(zip_file(tmp_path / "h.zip", entries, links), "zip", tmp_path / "out.tar.gz")


def test_limits_on_files_file_size_total_and_archive_size(tmp_path: Path):
    many = tar_gz(tmp_path / "many.tar.gz", [(f"f{i}.py", b"x") for i in range(6)])
    with pytest.raises(ArchiveRejected, match="more than 5 files"):
        snapshot_from_archive(many, "tar.gz", tmp_path / "o1.tar.gz", SnapshotLimits(max_files=5))
    big = tar_gz(tmp_path / "big.tar.gz", [("big.bin", b"a" * 2000)])
    with pytest.raises(ArchiveRejected, match="larger than 1000 bytes"):
        snapshot_from_archive(big, "tar.gz", tmp_path / "o2.tar.gz", SnapshotLimits(max_file_bytes=1000))
    total = tar_gz(tmp_path / "total.tar.gz", [(f"f{i}", b"a" * 600) for i in range(3)])
    with pytest.raises(ArchiveRejected, match="unpacks to more than"):
        snapshot_from_archive(total, "tar.gz", tmp_path / "o3.tar.gz", SnapshotLimits(max_total_bytes=1500))
    with pytest.raises(ArchiveRejected, match="the limit is 10"):
        snapshot_from_archive(total, "tar.gz", tmp_path / "o4.tar.gz", SnapshotLimits(max_archive_bytes=10))


def test_a_decompression_bomb_is_refused_while_it_expands(tmp_path: Path):
    # Given 8 MB of zeros that compress to a few KB
    bomb = tar_gz(tmp_path / "bomb.tar.gz", [("zeros.bin", bytes(8 * 2**20))])
    assert bomb.stat().st_size < 64 * 1024
    with pytest.raises(ArchiveRejected, match="decompression bomb"):
        snapshot_from_archive(bomb, "tar.gz", tmp_path / "o.tar.gz", SnapshotLimits(max_ratio=20))


def test_a_zip_whose_headers_lie_about_sizes_is_stopped_by_the_bytes_counted(tmp_path: Path):
    # Given a zip whose entry claims 10 bytes but holds 4 MB (headers patched after writing)
    path = zip_file(tmp_path / "liar.zip", {"data.bin": bytes(4 * 2**20)})
    raw = bytearray(path.read_bytes())
    real = (4 * 2**20).to_bytes(4, "little")
    fake = (10).to_bytes(4, "little")
    patched = bytes(raw).replace(real, fake)
    assert patched != bytes(raw)
    path.write_bytes(patched)
    # Then reading stops at the limit instead of trusting the header (or the zip is refused as corrupt)
    with pytest.raises(ArchiveRejected):
        snapshot_from_archive(path, "zip", tmp_path / "o.tar.gz", SnapshotLimits(max_file_bytes=1000))


@pytest.mark.parametrize(
    ("data", "fmt"), [(b"\x1f\x8b\x08\x00garbage", "tar.gz"), (b"PK\x03\x04nope", "zip"), (b"", "zip")]
)
def test_corrupt_archives_are_refused_as_such(tmp_path: Path, data: bytes, fmt: str):
    (tmp_path / "c").write_bytes(data)
    with pytest.raises(ArchiveRejected):
        snapshot_from_archive(tmp_path / "c", fmt, tmp_path / "o.tar.gz")  # type: ignore[arg-type]


def test_an_empty_archive_is_refused(tmp_path: Path):
    with pytest.raises(ArchiveRejected, match="no files"):
        snapshot_from_archive(tar_gz(tmp_path / "e.tar.gz", []), "tar.gz", tmp_path / "o.tar.gz")


def test_extraction_checks_a_hand_written_hostile_snapshot_again(tmp_path: Path):
    # Given a "snapshot" that did not come from the importer (a tampered object)
    forged = tar_gz(tmp_path / "forged.tar.gz", [("ok.py", b"x"), ("../escape.py", b"x")])
    with pytest.raises(ArchiveRejected):
        extract_snapshot(forged, tmp_path / "ws" / "abc")
    assert not (tmp_path / "ws" / "abc").exists() and not (tmp_path / "escape.py").exists()
    assert list((tmp_path / "ws").iterdir()) == []  # no half-made target, no staging left behind


def test_a_directory_with_a_link_out_is_refused(tmp_path: Path, tree: Path):
    (tree / "leak").symlink_to("/etc/passwd")
    with pytest.raises(ArchiveRejected, match="link out"):
        snapshot_from_directory(tree, tmp_path / "o.tar.gz")


# -- git --------------------------------------------------------------------------------------------------


AUTHOR = b"A <a@example.com>"


@pytest.fixture
def git_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    root.mkdir()
    repo = porcelain.init(str(root))
    (root / "a.py").write_text("v1\n")
    porcelain.add(repo, [str(root / "a.py")])
    first = porcelain.commit(repo, message=b"one", author=AUTHOR, committer=AUTHOR).decode()
    porcelain.tag_create(repo, b"v1", author=AUTHOR, message=b"release", annotated=True)
    porcelain.branch_create(repo, b"old")
    (root / "a.py").write_text("v2\n")
    (root / "b.py").write_text("new\n")
    porcelain.add(repo, [str(root / "a.py"), str(root / "b.py")])
    second = porcelain.commit(repo, message=b"two", author=AUTHOR, committer=AUTHOR).decode()
    return root, {"first": first, "second": second}


@pytest.mark.parametrize(
    ("ref", "commit", "files"),
    [(None, "second", 2), ("old", "first", 1), ("v1", "first", 1), ("FIRST", "first", 1), ("FIRST7", "first", 1)],
)
def test_git_refs_resolve_to_their_commits(tmp_path: Path, git_repo, ref, commit, files):
    root, commits = git_repo
    asked = {"FIRST": commits["first"], "FIRST7": commits["first"][:7]}.get(ref or "", ref)
    made = snapshot_from_git(f"file://{root}", asked, tmp_path / "s.tar.gz", tmp_path / "w")
    assert made.commit == commits[commit] and made.snapshot.files == files
    extract_snapshot(made.snapshot.path, tmp_path / "x")
    assert (tmp_path / "x" / "a.py").read_text() == ("v2\n" if commit == "second" else "v1\n")
    assert made.ref == (asked or "master") or ref is None


def test_a_git_repository_by_plain_path_is_the_same_snapshot(tmp_path: Path, git_repo):
    root, _ = git_repo
    by_url = snapshot_from_git(f"file://{root}", None, tmp_path / "1.tar.gz", tmp_path / "w1")
    by_path = snapshot_from_git(str(root), None, tmp_path / "2.tar.gz", tmp_path / "w2")
    assert by_url.snapshot.sha256 == by_path.snapshot.sha256


def test_an_unknown_ref_names_the_refs_there_are(tmp_path: Path, git_repo):
    root, _ = git_repo
    with pytest.raises(ArchiveRejected, match="unknown ref 'nope'.*old.*v1"):
        snapshot_from_git(f"file://{root}", "nope", tmp_path / "s.tar.gz", tmp_path / "w")


def test_a_repository_with_a_link_out_is_refused(tmp_path: Path, git_repo):
    root, _ = git_repo
    (root / "leak").symlink_to("/etc/passwd")
    repo = porcelain.open_repo(str(root))
    porcelain.add(repo, [str(root / "leak")])
    porcelain.commit(repo, message=b"leak", author=AUTHOR, committer=AUTHOR)
    with pytest.raises(ArchiveRejected, match="link out"):
        snapshot_from_git(f"file://{root}", None, tmp_path / "s.tar.gz", tmp_path / "w")


@pytest.mark.parametrize("url", ["ftp://example.com/x.git", "git@github.com:a/b.git", "file:///no/such/repo"])
def test_what_cannot_be_fetched_is_refused_in_one_line(tmp_path: Path, url: str):
    with pytest.raises(ArchiveRejected) as refused:
        snapshot_from_git(url, None, tmp_path / "s.tar.gz", tmp_path / "w")
    assert "\n" not in str(refused.value)


def test_credentials_never_appear_in_a_refusal(tmp_path: Path):
    with pytest.raises(ArchiveRejected) as refused:
        snapshot_from_git("http://user:hunter2@127.0.0.1:9/x.git", None, tmp_path / "s.tar.gz", tmp_path / "w")
    assert "hunter2" not in str(refused.value)


def test_a_redirect_is_not_followed(tmp_path: Path):
    # Given a git host that answers with a redirect (to where the URL check never looked)
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ArchiveRejected, match="302"):
            snapshot_from_git(
                f"http://127.0.0.1:{server.server_port}/repo.git", None, tmp_path / "s.tar.gz", tmp_path / "w"
            )
    finally:
        server.shutdown()
