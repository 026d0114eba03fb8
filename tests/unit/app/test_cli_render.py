"""What `missions run` prints of a mission's timeline: a stage that hands work to a sub-mission is not shown
as waiting for the user, and the sub-mission's start and end are lines of their own."""

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
