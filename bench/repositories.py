"""Repository imports and materialization, on this repository, against baselines from the same run.

- import: `snapshot_from_git` (dulwich clone of this checkout + validated, normalized snapshot) vs
  `git archive HEAD | gzip` by the git binary (the cheapest way to get the same files packed);
- materialization: the first stage of a warm container unpacking the snapshot (download from the
  store + checked extraction) vs a plain `tarfile.extractall(filter="data")` of the same archive;
  and the warm path (already unpacked) as a fraction of the cold one.
What it measures: the runner's own code on this machine's disk, with an in-memory snapshot store
(no S3 latency): a lower bound for a Lambda, whose /tmp and S3 download are slower.
"""

from __future__ import annotations

import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 3


def _median_seconds(action: Callable[[], object], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run() -> dict[str, float]:
    from missions.adapters.memory.repositories import MemorySnapshotStore
    from missions.core.mission.refs import RepositoryRef, snapshot_key
    from missions.core.roots import AllowedRoots
    from missions.service.repositories.archive import GitSnapshot, extract_snapshot, snapshot_from_git
    from missions.service.repositories.workspace import RepositoryWorkspaces

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        counter = iter(range(1_000))

        def import_once() -> GitSnapshot:
            n = next(counter)
            return snapshot_from_git(f"file://{ROOT}", None, work / f"s{n}.tar.gz", work / f"clone{n}")

        made = import_once()
        import_s = _median_seconds(import_once)

        def git_archive() -> None:
            with open(work / "git-archive.tar.gz", "wb") as out:
                archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", "HEAD"], stdout=subprocess.PIPE)
                subprocess.run(["gzip", "-c"], stdin=archive.stdout, stdout=out, check=True)
                archive.wait()

        baseline_import_s = _median_seconds(git_archive)

        snapshots = MemorySnapshotStore()
        ref = RepositoryRef(
            kind="snapshot", name="missions", id="r_bench", owner="bench", snapshot=made.snapshot.sha256
        )
        snapshots.upload(snapshot_key("bench", "r_bench", made.snapshot.sha256), made.snapshot.path)

        def cold() -> None:
            cache = work / f"cache{next(counter)}"
            RepositoryWorkspaces(AllowedRoots(), cache, snapshots=snapshots, extract=extract_snapshot).root_for(
                ref, "bench"
            )

        cold_s = _median_seconds(cold)
        warm_workspaces = RepositoryWorkspaces(
            AllowedRoots(), work / "warm", snapshots=snapshots, extract=extract_snapshot
        )
        warm_workspaces.root_for(ref, "bench")
        warm_s = _median_seconds(lambda: warm_workspaces.root_for(ref, "bench"), runs=50)

        def plain_extract() -> None:
            target = work / f"plain{next(counter)}"
            with tarfile.open(made.snapshot.path) as archive:
                archive.extractall(target, filter="data")

        plain_s = _median_seconds(plain_extract)
    return {
        "files": made.snapshot.files,
        "unpacked_mb": round(made.snapshot.total_bytes / 1e6, 2),
        "snapshot_kb": round(made.snapshot.archive_bytes / 1024, 1),
        "import_s": round(import_s, 3),
        "git_archive_s": round(baseline_import_s, 3),
        "import_ratio_to_git_archive": round(import_s / baseline_import_s, 2),
        "materialize_cold_s": round(cold_s, 3),
        "plain_extract_s": round(plain_s, 3),
        "cold_ratio_to_plain_extract": round(cold_s / plain_s, 2),
        "materialize_warm_ms": round(warm_s * 1000, 3),
        "warm_fraction_of_cold": round(warm_s / cold_s, 5),
    }


def rows(figures: dict[str, float]) -> list[tuple[str, str]]:
    return [
        (
            "repository import (this repo, dulwich + checks)",
            f"{figures['import_s']} s = {figures['import_ratio_to_git_archive']}x `git archive | gzip` "
            f"({figures['git_archive_s']} s); {figures['files']} files, {figures['unpacked_mb']} MB unpacked, "
            f"snapshot {figures['snapshot_kb']} KB",
        ),
        (
            "first stage: materialize snapshot cold / warm",
            f"{figures['materialize_cold_s']} s ({figures['cold_ratio_to_plain_extract']}x a plain extract) / "
            f"{figures['materialize_warm_ms']} ms ({figures['warm_fraction_of_cold']} of cold)",
        ),
    ]
