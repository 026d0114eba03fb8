"""`missions repos`: register, list and delete the repositories missions may read on an API."""

from __future__ import annotations

import os
import time
from typing import Any

import typer

from missions.client import ApiClient

from .._console import fail, one_line, out
from .._target import JsonOption, Target, path, targeted

app = typer.Typer(no_args_is_help=True, help="Register, list and delete repositories missions may read.")


def _archive_of(source: str, scratch: str) -> tuple[str, str]:
    """(path, format) of what to upload: an archive as it is, or a directory packed as a snapshot is."""
    from pathlib import Path

    given = Path(source).expanduser()
    if given.is_dir():
        from missions.service.repositories.archive import ArchiveRejected, snapshot_from_directory

        try:
            return str(snapshot_from_directory(given, Path(scratch) / "upload.tar.gz").path), "tar.gz"
        except ArchiveRejected as exc:
            fail(f"{source}: {exc}")
    if given.name.endswith((".tar.gz", ".tgz")):
        return str(given), "tar.gz"
    if given.name.endswith(".zip"):
        return str(given), "zip"
    fail(f"{source}: not a git URL, a directory, a .tar.gz or a .zip")


@app.command("add")
@targeted()
def add(
    source: str = typer.Argument(..., help="A git URL (https://...), a directory, or a .tar.gz / .zip archive."),
    name: str | None = typer.Option(None, "--name", help="How the repository is listed."),
    ref: str | None = typer.Option(None, "--ref", help="Git branch, tag or commit (default: the remote HEAD)."),
    shared: bool = typer.Option(False, "--shared", help="Operators: readable by every user."),
    wait: float = typer.Option(300.0, "--wait", min=0.0, help="Seconds to wait for the import (0: do not wait)."),
    *,
    target: Target,
) -> None:
    """Register a repository from a git URL, or upload a directory or archive; prints its id when ready."""
    import tempfile

    api = target.api()
    named = {"name": name} if name else {}
    with tempfile.TemporaryDirectory() as scratch, one_line():
        if source.startswith(("https://", "http://", "file://")):
            body: dict[str, Any] = {"url": source, "shared": shared, **named, **({"ref": ref} if ref else {})}
            record = api.call("POST", "/repositories", body, ok=(202,))
        else:
            archive, fmt = _archive_of(source, scratch)
            size = os.path.getsize(archive)
            body = {"upload": {"format": fmt, "size_bytes": size}, "shared": shared, **named}
            record = api.call("POST", "/repositories", body, ok=(201,))
            with open(archive, "rb") as handle:
                api.upload(record["upload"]["url"], handle.read())
            record = api.call("POST", path("repositories", record["repository_id"], "imports"), {}, ok=(202,))
        record = _wait_for_import(api, record, wait)
    out.print(_repository_line(record), highlight=False)
    if record["status"] == "failed":
        raise typer.Exit(1)


def _wait_for_import(api: ApiClient, record: dict[str, Any], wait: float) -> dict[str, Any]:
    deadline = time.monotonic() + wait
    while record["status"] == "importing" and time.monotonic() < deadline:
        time.sleep(0.5)
        record = api.call("GET", path("repositories", record["repository_id"]))
    return record


def _repository_line(record: dict[str, Any]) -> str:
    current = (record.get("snapshots") or [{}])[-1]
    version = (current.get("commit") or current.get("sha256") or "")[:12]
    detail = record.get("reason") or (f"{current.get('files', 0)} files, {version}" if current else "")
    shared = " (shared)" if record.get("shared") else ""
    return f"{record['repository_id']}  {record['name']}{shared}  {record['status']}  {detail}".rstrip()


@app.command("list")
@targeted()
def list_repositories(as_json: JsonOption = False, *, target: Target) -> None:
    """Your repositories and the shared ones."""
    with one_line():
        found = target.api().call("GET", "/repositories")["repositories"]
    if as_json:
        out.print_json(data=found)
        return
    for record in found:
        out.print(_repository_line(record), highlight=False)


@app.command("rm")
@targeted()
def rm(repository_id: str = typer.Argument(..., help="The repository's id."), *, target: Target) -> None:
    """Delete a repository and its snapshots."""
    with one_line():
        target.api().call("DELETE", path("repositories", repository_id), ok=(204,))
    out.print(f"deleted {repository_id}")
