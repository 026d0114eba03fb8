"""What `missions run` prints of a mission's timeline: a stage that hands work to a sub-mission is not shown
as waiting for the user, and the sub-mission's start and end are lines of their own; `missions cost` prints a
capability's predicted cost."""

from __future__ import annotations

import pytest

from missions.cli._render import render
from missions.core.mission.events import Event, EventType


def shown(capsys: pytest.CaptureFixture[str], *events: Event) -> list[str]:
    for event in events:
        render(event)
    return capsys.readouterr().out.splitlines()


def test_a_delegation_is_a_hand_over_with_its_sub_missions_start_and_end(capsys: pytest.CaptureFixture[str]):
    # Given a stage that delegated, its sub-mission started, then ended
    raised = Event(
        type=EventType.INTERRUPT_RAISED,
        mission_id="m_1",
        stage="dinners",
        payload={"interrupt_id": "i_1", "kind": "delegation", "question": "Dinner for 2 in Rome"},
    )
    started = Event(
        type=EventType.DELEGATION_STARTED,
        mission_id="m_1",
        stage="dinners",
        payload={"child": "m_2", "capability": "dining", "status": "started"},
    )
    ended = Event(
        type=EventType.DELEGATION_ENDED,
        mission_id="m_1",
        stage="dinners",
        payload={"child": "m_2", "capability": "dining", "status": "completed", "reason": "completed"},
    )
    # When the CLI prints them / Then nothing says the user is waited for; the hand-over and its end show
    lines = shown(capsys, raised, started, ended)
    assert not any("waiting for you" in line for line in lines)
    assert lines[0].startswith("⇢ handing over: Dinner for 2 in Rome")
    assert "dining sub-mission m_2 started" in lines[1] and "✓ dining sub-mission m_2: completed" in lines[2]


def test_a_question_still_says_the_user_is_waited_for(capsys: pytest.CaptureFixture[str]):
    raised = Event(
        type=EventType.INTERRUPT_RAISED,
        mission_id="m_1",
        stage="present",
        payload={"interrupt_id": "i_1", "kind": "choice", "question": "Which one?"},
    )
    assert shown(capsys, raised) == ["⏸ waiting for you: Which one?"]


def test_missions_cost_prints_the_lines_the_totals_and_the_assumptions():
    from typer.testing import CliRunner

    from missions.cli import app

    # When a user asks what a code_analysis mission will cost
    result = CliRunner().invoke(app, ["cost", "code_analysis"], terminal_width=200)
    # Then the billing lines, the totals per mission and per 1,000, the range and the assumptions are printed
    assert result.exit_code == 0, result.output
    for said in ("dynamodb_writes", "step_functions", "total per mission", "total per 1,000 missions", "assumptions:"):
        assert said in result.output
    assert "typical path (11 stage runs)" in result.output and "range per mission: min" in result.output


def test_missions_cost_json_and_an_unknown_capability():
    import json

    from typer.testing import CliRunner

    from missions.cli import app

    result = CliRunner().invoke(app, ["cost", "shopping", "--json"])
    found = json.loads(result.output)
    assert result.exit_code == 0 and found["capability"] == "shopping" and found["dollars_per_mission"] > 0
    assert set(found["range"]) == {"min", "typical", "max"}
    # Given a capability that is not installed / Then one line says so, and the exit code is not 0
    missing = CliRunner().invoke(app, ["cost", "nope"])
    assert missing.exit_code != 0 and "nope" in missing.output and len(missing.output.strip().splitlines()) == 1
