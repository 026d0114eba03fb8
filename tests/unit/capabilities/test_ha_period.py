"""home_assistant reads the analysis window from the request, the follow-up's own words first."""

from __future__ import annotations

import pytest

from capabilities.home_assistant.stages import FOLLOW_UP, _period


@pytest.mark.parametrize(
    ("texts", "window"),
    [
        (("Analyze my energy usage today",), (24, 0)),
        (("how much yesterday?",), (24, 24)),
        (("and last week?", "Analyze my energy usage today (follow-up: and last week?)"), (168, 0)),
        (("and the week before?",), (168, 168)),
        (("what about this month",), (744, 0)),
        (("and?", "Analyze my energy usage today (follow-up: and?)"), (24, 0)),  # nothing new: the turn's own
        (("Analyze my energy usage",), (168, 0)),  # nothing named: a week
    ],
)
def test_the_window_is_the_one_the_follow_up_names_else_the_one_before(texts: tuple[str, ...], window: tuple[int, int]):
    assert _period(*texts) == window


@pytest.mark.parametrize(
    ("goal", "follows"),
    [
        ("and last week?", True),
        ("what about the kitchen", True),
        ("last month?", True),
        ("Analyze my energy usage today", False),
        ("Turn off the kitchen lights", False),
    ],
)
def test_a_follow_up_is_told_from_a_new_request(goal: str, follows: bool):
    assert bool(FOLLOW_UP.search(goal)) is follows
