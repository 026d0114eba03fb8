"""Schemathesis against the dev server: property-based requests generated from the published OpenAPI
document, over real HTTP, checked for server errors and for responses the document does not describe.

Four phases: the schema's examples, its coverage cases, random fuzzing of each operation on its own,
then the stateful phase, which follows the document's links (missions.app.api.links) from the response
that created a mission, repository, schedule or agent version to the operations taking its id. The run
reports how many operations answered at least one 2xx (read from its HAR report, tests.support.
fuzz_coverage): the operations only a created id opens are reached through the links, not by luck.

`make test` runs a bounded, seeded run (tests/e2e/test_fuzz.py); `make fuzz` a longer one with workers:

    python -m tests.support.fuzz --max-examples 300 --workers 2 [--seed N]

Both fail on a 5xx, an undocumented status, content type or header, or a body that violates its schema.
The fuzzer is `dev:fuzzer`, an operator (named in the emulation's settings), so the operators' routes
(agent versions, every user's metrics) are fuzzed past their 403.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.support import fuzz_coverage
from tests.support.fuzz_coverage import Coverage

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261124
USER = "fuzzer"
AUTHORIZATION = f"Bearer dev:{USER}"
DOCUMENT = "/openapi.json"
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


@dataclass(frozen=True)
class Budget:
    """How much each phase generates: `max_examples` cases an operation when fuzzing it alone, and
    `scenarios` chains of at most `steps` calls along the links in the stateful phase."""

    max_examples: int
    scenarios: int
    steps: int = 8


def config(budget: Budget) -> str:
    """schemathesis.toml: the stateful phase follows the document's own links only (no inferred ones), so
    what it reaches is what the links lead to."""
    return f"""
[phases.fuzzing.generation]
max-examples = {budget.max_examples}

[phases.stateful]
max-steps = {budget.steps}
inference.algorithms = []

[phases.stateful.generation]
max-examples = {budget.scenarios}
"""


PHASES = ("examples", "coverage", "fuzzing", "stateful")


def command(
    url: str, *, config_file: Path, workers: int, seed: int, reports: Path, phases: tuple[str, ...] = PHASES
) -> list[str]:
    schemathesis = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
    return [
        schemathesis,
        "--config-file",
        str(config_file),
        "run",
        f"{url}{DOCUMENT}",
        "--checks",
        ",".join(CHECKS),
        "--seed",
        str(seed),
        "--workers",
        str(workers),
        "--generation-database",
        "none",
        "--phases",
        ",".join(phases),
        "--header",
        f"Authorization: {AUTHORIZATION}",
        "--request-timeout",
        "60",
        "--no-color",
        "--report",
        "junit,har",
        "--report-junit-path",
        str(reports / "junit.xml"),
        "--report-har-path",
        str(reports / "run.har"),
    ]


@dataclass
class Result:
    process: subprocess.CompletedProcess[str]
    coverage: Coverage

    @property
    def returncode(self) -> int:
        return self.process.returncode

    @property
    def output(self) -> str:
        return self.process.stdout + self.process.stderr


def _document(url: str) -> dict[str, object]:
    """The document schemathesis loads (it does not test the operation it loads it from: this is that
    operation's request, counted with the run's)."""
    request = urllib.request.Request(f"{url}{DOCUMENT}", headers={"Authorization": AUTHORIZATION})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def run(budget: Budget, workers: int, seed: int = SEED, timeout: float = 1800, reports: Path | None = None) -> Result:
    """Serve the API on 127.0.0.1 over a fresh emulation, and fuzz it; `reports` keeps the run's reports
    (JUnit, HAR: every request and response) in that folder."""
    with tempfile.TemporaryDirectory(prefix="missions-fuzz-") as scratch:
        reports = reports or Path(scratch)
        reports.mkdir(parents=True, exist_ok=True)
        config_file = reports / "schemathesis.toml"
        config_file.write_text(config(budget))
        settings = {"repo_roots": [str(ROOT)], "operators": [USER]}
        with LocalCloud(settings=settings) as cloud, DevServer(cloud, port=0) as server:
            document = _document(server.url)
            argv = command(server.url, config_file=config_file, workers=workers, seed=seed, reports=reports)
            process = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        har = json.loads((reports / "run.har").read_text()) if (reports / "run.har").exists() else {}
        coverage = fuzz_coverage.coverage(document, har)
        coverage.record("get", DOCUMENT, 200)
        return Result(process, coverage)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-examples", type=int, default=300, help="cases an operation, fuzzed alone")
    parser.add_argument("--scenarios", type=int, default=0, help="stateful chains (default: 2 x max-examples)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--reports", type=Path, help="keep the JUnit and HAR reports in this folder")
    args = parser.parse_args()
    budget = Budget(args.max_examples, args.scenarios or 2 * args.max_examples)
    result = run(budget, args.workers, args.seed, reports=args.reports)
    print(result.process.stdout)
    print(result.process.stderr, file=sys.stderr)
    print(result.coverage.summary())
    return result.returncode or (1 if result.coverage.unreached or result.coverage.server_errors else 0)


if __name__ == "__main__":
    raise SystemExit(main())
