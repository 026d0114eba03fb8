"""Schemathesis against the dev server: property-based requests generated from the published OpenAPI
document, over real HTTP, checked for server errors and for responses the document does not describe.

Four phases: the schema's examples (which create a mission, a repository, a schedule, an agent
version), its coverage cases and random fuzzing of each operation on its own (both reuse the ids the
run saw in responses), then the stateful phase, which follows the document's links (missions.app.api.
links) from each response that gives an id to the operations taking it. DELETE /me runs last, alone.
The run counts the operations that answered at least one 2xx (from its HAR reports, tests.support.
fuzz_coverage): every one does. Those acting on what random data cannot make (a running mission, a
question waiting, a checkpoint, a git repository) get it from a set-up before the run (tests.support.
fuzz_setup), and an example naming it in the document schemathesis reads.

`make test` runs a bounded, seeded run (tests/e2e/test_fuzz.py); `make fuzz` a longer one with workers,
and prints the count:

    python -m tests.support.fuzz --max-examples 300 --scenarios 600 --workers 2 [--seed N] [--reports DIR]

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

from missions.core.capability import registry
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.support import fuzz_coverage, fuzz_setup
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
    `scenarios` chains of at most `steps` calls along the links in the stateful phase; the coverage
    phase sends each path the methods it does not have, all of them or only `unexpected_methods`."""

    max_examples: int
    scenarios: int
    steps: int = 8
    unexpected_methods: tuple[str, ...] | None = None


# What a user knows and random data does not: an installed capability, a goal it can take (one that
# answers, one it asks about first, one that writes a plan to read), an answer to a question, the name
# of a document a mission writes. The share of generated values that come from these; the rest stay random.
DICTIONARIES = {
    "capabilities": ["code_analysis", "travel"],
    "goals": [
        "Where is compute_tax defined?",
        "Can you look into this?",
        "Plan a 5-day Paris trip for May 2026, budget $3000, 2 travelers",
    ],
    "answers": ["compute_tax in billing.py", "Paris"],
    "documents": ["plan"],
}
REALISTIC = {
    "POST /missions": {"body.capability": ("capabilities", 0.5), "body.goal": ("goals", 0.5)},
    "POST /missions/{mission_id}/interrupts/{interrupt_id}": {"body.text": ("answers", 0.8)},
    "GET /missions/{mission_id}/artifact": {"query.path": ("documents", 0.5)},
    **{f"GET /metrics/{what}": {"query.capability": ("capabilities", 0.5)} for what in ("missions", "tools", "usage")},
}
# Erases everything of the fuzzer's: in the main run it would delete what the examples created before
# the later phases use their ids (schemathesis reuses the ids it saw in responses), so it runs last, alone.
ERASE = "DELETE /me"


def config(budget: Budget) -> str:
    """schemathesis.toml: the stateful phase follows the document's own links only (no inferred ones), so
    what it reaches is what the links lead to."""
    lines = [f"[phases.fuzzing.generation]\nmax-examples = {budget.max_examples}\n"]
    if budget.unexpected_methods is not None:
        lines.append(f"[phases.coverage]\nunexpected-methods = {json.dumps(list(budget.unexpected_methods))}\n")
    lines.append(
        f"[phases.stateful]\nmax-steps = {budget.steps}\ninference.algorithms = []\n\n"
        f"[phases.stateful.generation]\nmax-examples = {budget.scenarios}\n"
    )
    lines += [f"[dictionaries.{name}]\nvalues = {json.dumps(values)}\n" for name, values in DICTIONARIES.items()]
    for operation, parameters in REALISTIC.items():
        bound = [f'"{k}" = {{ dictionary = "{name}", probability = {p} }}' for k, (name, p) in parameters.items()]
        lines.append(f'[[operations]]\ninclude-name = "{operation}"\nparameters = {{ {", ".join(bound)} }}\n')
    lines.append(f'[[operations]]\ninclude-name = "{ERASE}"\nenabled = false\n')
    return "\n".join(lines)


PHASES = ("examples", "coverage", "fuzzing", "stateful")


def command(
    url: str,
    *,
    document: Path,
    config_file: Path,
    workers: int,
    seed: int,
    reports: Path,
    phases: tuple[str, ...] = PHASES,
    only: str | None = None,
) -> list[str]:
    """The schemathesis run; `only` an operation's name (`METHOD /path`): that one alone, its reports
    named for it."""
    schemathesis = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
    name = "erase" if only else "run"
    return [
        schemathesis,
        *(["--config-file", str(config_file)] if not only else []),
        "run",
        str(document),
        "--url",
        url,
        *(["--include-name", only] if only else []),
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
        *(["--max-examples", "2"] if only else []),
        "--header",
        f"Authorization: {AUTHORIZATION}",
        "--request-timeout",
        "60",
        "--no-color",
        "--report",
        "junit,har",
        "--report-junit-path",
        str(reports / f"{name}.xml"),
        "--report-har-path",
        str(reports / f"{name}.har"),
    ]


@dataclass
class Result:
    """The main run and the erasing one, and what they reached together."""

    processes: list[subprocess.CompletedProcess[str]]
    coverage: Coverage

    @property
    def returncode(self) -> int:
        return max(p.returncode for p in self.processes)

    @property
    def output(self) -> str:
        return "".join(p.stdout + p.stderr for p in self.processes)


def _document(url: str) -> dict[str, object]:
    """The document schemathesis loads (it does not test the operation it loads it from: this is that
    operation's request, counted with the run's)."""
    request = urllib.request.Request(f"{url}{DOCUMENT}", headers={"Authorization": AUTHORIZATION})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def run(budget: Budget, workers: int, seed: int = SEED, timeout: float = 1800, reports: Path | None = None) -> Result:
    """Serve the API on 127.0.0.1 over a fresh emulation, and fuzz it; then erase the fuzzer's account
    (ERASE), alone. `reports` keeps the runs' reports (JUnit, HAR: every request and response)."""
    with tempfile.TemporaryDirectory(prefix="missions-fuzz-") as scratch:
        reports = reports or Path(scratch)
        reports.mkdir(parents=True, exist_ok=True)
        config_file = reports / "schemathesis.toml"
        config_file.write_text(config(budget))
        repository = fuzz_setup.git_repository(Path(scratch) / "repository")
        settings = {"repo_roots": [str(ROOT), str(repository)], "operators": [USER]}
        known = registry.Registry().including(*fuzz_setup.CAPABILITIES)
        processes = []
        with (
            LocalCloud(known.available(), registry=known, settings=settings) as cloud,
            DevServer(cloud, port=0) as server,
        ):
            document = _document(server.url)
            examples = fuzz_setup.prepare(fuzz_setup.Client(server.url, AUTHORIZATION), repository)
            examined = reports / "openapi.json"
            examined.write_text(json.dumps(examples.into(document)))
            with fuzz_setup.released_once_paused(cloud, examples):
                for only, phases in ((None, PHASES), (ERASE, PHASES[:3])):
                    argv = command(
                        server.url,
                        document=examined,
                        config_file=config_file,
                        workers=workers,
                        seed=seed,
                        reports=reports,
                        phases=phases,
                        only=only,
                    )
                    processes.append(subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout))
        entries = [
            entry
            for name in ("run.har", "erase.har")
            if (reports / name).exists()
            for entry in json.loads((reports / name).read_text())["log"]["entries"]
        ]
        coverage = fuzz_coverage.coverage(document, {"log": {"entries": entries}})
        coverage.record("get", DOCUMENT, 200)
        return Result(processes, coverage)


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
    for process in result.processes:
        print(process.stdout)
        print(process.stderr, file=sys.stderr)
    print(result.coverage.summary())
    return result.returncode or (1 if result.coverage.unreached or result.coverage.server_errors else 0)


if __name__ == "__main__":
    raise SystemExit(main())
