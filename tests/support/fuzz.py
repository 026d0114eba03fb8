"""Schemathesis against the dev server: property-based requests generated from the published OpenAPI
document, over real HTTP, checked for server errors and for responses the document does not describe.

`make test` runs a bounded, seeded run (tests/e2e/test_fuzz.py, 10 examples an operation after the
schema's own examples and its coverage phase); `make fuzz` a longer one with workers:

    python -m tests.support.fuzz --max-examples 300 --workers 2 [--seed N]

Both fail on a 5xx, an undocumented status, content type or header, or a body that violates its schema.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261124
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


def command(url: str, *, max_examples: int, workers: int, seed: int, report: Path) -> list[str]:
    schemathesis = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
    return [
        schemathesis,
        "run",
        f"{url}/openapi.json",
        "--checks",
        ",".join(CHECKS),
        "--max-examples",
        str(max_examples),
        "--seed",
        str(seed),
        "--workers",
        str(workers),
        "--generation-database",
        "none",
        "--phases",
        "examples,coverage,fuzzing",
        "--header",
        "Authorization: Bearer dev:fuzzer",
        "--request-timeout",
        "60",
        "--no-color",
        "--report",
        "junit",
        "--report-junit-path",
        str(report),
    ]


def run(max_examples: int, workers: int, seed: int = SEED, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """Serve the API on 127.0.0.1 over a fresh emulation, and fuzz it."""
    with tempfile.TemporaryDirectory(prefix="missions-fuzz-") as scratch:
        settings = {"repo_roots": [str(ROOT)]}
        with LocalCloud(settings=settings) as cloud, DevServer(cloud, port=0) as server:
            report = Path(scratch) / "junit.xml"
            argv = command(server.url, max_examples=max_examples, workers=workers, seed=seed, report=report)
            return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-examples", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    result = run(args.max_examples, args.workers, args.seed)
    print(result.stdout)
    print(result.stderr, file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())
