"""The lifecycle users see (seed 004) from a mission's status and its running stage's phase."""

import pytest

from missions.core import capability as registry
from missions.ports.store import LIFECYCLE, MissionRecord, lifecycle_of


@pytest.mark.parametrize(
    ("status", "stage", "phase", "expected"),
    [
        ("created", None, None, "created"),
        ("queued", None, None, "created"),
        ("running", None, None, "planning"),
        ("running", "intent", "planning", "planning"),
        ("running", "traverser", "executing", "executing"),
        ("running", "critic", "reflecting", "reflecting"),
        ("interrupted", "critic", "reflecting", "interrupted"),
        ("completed", "integration", "executing", "completed"),
        ("failed", "planner", "planning", "failed"),
        ("archived", "integration", "executing", "archived"),
    ],
)
def test_lifecycle_of(status, stage, phase, expected):
    record = MissionRecord(
        mission_id="m", user_id="u", capability="c", goal="g", status=status, stage=stage, phase=phase
    )
    assert lifecycle_of(record) == expected
    assert expected in LIFECYCLE


def test_code_analysis_stages_name_the_phases_users_see():
    phases = {agent.name: agent.phase for agent in registry.load("code_analysis").pipeline.agents}
    assert phases["planner"] == "planning" and phases["critic"] == "reflecting"
    assert phases["traverser"] in (None, "executing")
