"""Schemathesis against the dev server: property-based requests generated from the published OpenAPI
document, over real HTTP, checked for server errors and for responses the document does not describe.

Four phases: the schema's examples (which create a mission, a repository, a schedule, an agent
version), its coverage cases and random fuzzing of each operation on its own (both reuse the ids the
run saw in responses), then the stateful phase, which follows the document's links (missions.app.api.
links) from each response that gives an id to the operations taking it. DELETE /me runs last, alone.
The run counts the operations that answered at least one 2xx (from its HAR reports, tests.support.
fuzz_coverage); UNREACHABLE names those a bounded run does not always reach, and why.

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
    deeper: int = 10  # more cases for each of DEEPER


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
# The operations that act on what a mission did (its checkpoints, its question, its documents): fuzzed
# alone they take the ids the run saw in earlier responses, so a few more cases each find one that exists.
DEEPER = (
    "POST /missions/{mission_id}/fork",
    "POST /missions/{mission_id}/interrupts/{interrupt_id}",
    "GET /missions/{mission_id}/artifact",
)
REALISTIC = {
    "POST /missions": {"body.capability": ("capabilities", 0.5), "body.goal": ("goals", 0.5)},
    "POST /missions/{mission_id}/interrupts/{interrupt_id}": {"body.text": ("answers", 0.8)},
    "GET /missions/{mission_id}/artifact": {"query.path": ("documents", 0.5)},
    **{f"GET /metrics/{what}": {"query.capability": ("capabilities", 0.5)} for what in ("missions", "tools", "usage")},
}
# The operations a bounded run cannot bring to a 2xx every time, and why; the links lead to each (they
# are sent, and refused with a 4xx, or answered when the run draws the right state), and the suite
# drives each to a 2xx elsewhere.
UNREACHABLE = {
    "POST /missions/{mission_id}/pause": "only a running mission pauses, and the offline model runs a "
    "mission's stages in milliseconds: by the next request it waits for its user or ended (409); "
    "tests/e2e/test_pause_resume_e2e.py holds a stage to pause it",
    "POST /missions/{mission_id}/resume": "only a paused mission resumes (see pause)",
    "POST /repositories/{repository_id}/imports": "imports an archive PUT to a presigned storage URL, outside "
    "the API (409 before), or a git repository again (none is reachable here); "
    "tests/e2e/test_repositories_http.py uploads one",
    "POST /missions/{mission_id}/interrupts/{interrupt_id}": "needs a question still waiting and an answer "
    "that fits it (a clarification's text, an approval, one of a choice's options): GET /inbox and "
    "GET /missions/{mission_id} link to it, and the run draws a fitting answer only sometimes; "
    "tests/e2e/test_dev_server.py answers one",
    "POST /missions/{mission_id}/fork": "needs a checkpoint's id, which only GET .../checkpoints gives (it "
    "links to the fork), and the run follows that chain only sometimes; tests/e2e/test_dev_server.py forks one",
    "GET /missions/{mission_id}/artifact": "needs a mission that wrote a document (offline, a travel mission "
    "whose goal names a city its data covers) read by its name: GET .../artifacts links to it, and the run "
    "draws that mission and name only sometimes; tests/e2e/cli/test_travel_e2e.py reads one",
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
    for operation in dict.fromkeys([*REALISTIC, *DEEPER]):
        entry = [f'[[operations]]\ninclude-name = "{operation}"']
        if operation in REALISTIC:
            bound = [
                f'"{k}" = {{ dictionary = "{name}", probability = {p} }}'
                for k, (name, p) in REALISTIC[operation].items()
            ]
            entry.append(f"parameters = {{ {', '.join(bound)} }}")
        if operation in DEEPER:
            entry.append(f"phases.fuzzing.generation.max-examples = {budget.max_examples + budget.deeper}")
        lines.append("\n".join(entry) + "\n")
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
            examples = fuzz_setup.prepare(cloud, fuzz_setup.Client(server.url, AUTHORIZATION), repository)
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
    for operation in result.coverage.unreached:
        print(f"  {operation}: {UNREACHABLE.get(str(operation), 'NOT EXPECTED')}")
    unexpected = [op for op in result.coverage.unreached if str(op) not in UNREACHABLE]
    return result.returncode or (1 if unexpected or result.coverage.server_errors else 0)


if __name__ == "__main__":
    raise SystemExit(main())
