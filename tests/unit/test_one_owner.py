"""One owner per concept, checked on the source: a mission's status changes only through the lifecycle,
and a mission starts only through the launcher (which always goes through the dispatcher)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "shared" / "missions"


def _callers(pattern: str) -> set[str]:
    """Files of the runtime, its handlers and the capabilities that call what `pattern` matches."""
    found = set()
    for folder in (RUNTIME, ROOT / "functions", ROOT / "capabilities"):
        for path in folder.rglob("*.py"):
            if re.search(pattern, path.read_text()):
                found.add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize(
    ("what", "pattern", "owners"),
    [
        ("a status change", r"\.transition\(", {"shared/missions/service/lifecycle.py"}),
        ("an execution start", r"executions\.start\(", {"shared/missions/service/launcher.py"}),
        ("a dispatch", r"dispatcher\.submit\(", {"shared/missions/service/launcher.py"}),
        (
            "a Step Functions StartExecution",
            r"\.start_execution\(",
            # the adapter of the Executions port, and the emulation delivering EventBridge targets
            {"shared/missions/adapters/stepfunctions.py", "shared/missions/local/moto/events.py"},
        ),
    ],
)
def test_only_its_owner_does_it(what: str, pattern: str, owners: set[str]):
    # Given every module of the runtime, handlers and capabilities / When we look for who does it
    # Then only its owner does
    assert _callers(pattern) == owners, f"{what} outside its owner"


def test_no_status_is_written_by_a_plain_update():
    # Given the stores' update method, which refuses a status (see the store conformance suite)
    # When we look for updates that name one / Then there are none
    assert _callers(r"missions\.update\([^)]*\bstatus=") == set()
