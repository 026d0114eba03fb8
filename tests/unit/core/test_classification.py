"""Complexity classification (seed 004) and capability selection on a table of example goals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.adapters.llm.scripted import ScriptedProvider
from missions.core.capability.classification import (
    GoalAnalysis,
    classify_complexity,
    level_of,
    offline_goal_analysis,
    select_by_keywords,
)

EXAMPLES = [
    ("Buy AirPods Pro at the best price", 1),
    ("Find the cheapest 4K monitor from a trusted retailer", 1),
    ("Where is max_agent_hops enforced in this repository?", 1),
    ("Find a vegetarian restaurant for dinner tonight near me", 2),
    ("Book a table for two at an Italian place tonight", 2),
    ("Compare gyms nearby and build me a workout and nutrition plan", 2),
    ("Get concert tickets for Saturday and find dinner near the venue", 2),
    ("Plan a 5-day trip to Tokyo in April: flights, hotel, museums and a day trip", 3),
    ("Plan my wedding over the next three months: venue, catering, invitations, music", 3),
    ("Book flights to Lisbon, then a hotel near the old town once the dates are fixed", 3),
    ("Draft a blog post about our launch and let me review it", 3),
]


@pytest.mark.parametrize(("goal", "level"), EXAMPLES)
def test_offline_classification_of_example_goals(goal, level):
    result = classify_complexity(goal, ScriptedProvider(offline_goal_analysis), source="offline")
    assert result.level == level, result.analysis


@pytest.mark.parametrize(
    ("analysis", "level"),
    [
        (GoalAnalysis(subgoals=1, dependencies="none", external_services=1, planning="none"), 1),
        (GoalAnalysis(subgoals=2, dependencies="none", external_services=0, planning="none"), 1),
        (GoalAnalysis(subgoals=3, dependencies="parallel", external_services=3, planning="single"), 2),
        (GoalAnalysis(subgoals=6, dependencies="parallel", external_services=3, planning="single"), 3),
        (GoalAnalysis(subgoals=2, dependencies="sequential", external_services=2, planning="single"), 3),
        (GoalAnalysis(subgoals=2, dependencies="none", external_services=1, planning="hierarchical"), 3),
        (GoalAnalysis(subgoals=1, dependencies="none", external_services=0, planning="none", review_loop=True), 3),
    ],
)
def test_the_seed_decision_tree(analysis, level):
    assert level_of(analysis) == level


analyses = st.builds(
    GoalAnalysis,
    subgoals=st.integers(1, 50),
    dependencies=st.sampled_from(["none", "parallel", "sequential"]),
    external_services=st.integers(0, 20),
    planning=st.sampled_from(["none", "single", "hierarchical"]),
    review_loop=st.booleans(),
)


@given(analyses, st.integers(1, 10))
def test_more_work_never_makes_a_goal_simpler(analysis, extra):
    # adding subgoals or services can only keep or raise the level
    harder = analysis.model_copy(
        update={
            "subgoals": min(50, analysis.subgoals + extra),
            "external_services": min(20, analysis.external_services + extra),
        }
    )
    assert level_of(harder) >= level_of(analysis)


CAPABILITIES = [
    ("shopping", ["buy", "price", "cheapest", "deal"]),
    ("dining", ["restaurant", "dinner", "lunch", "table for"]),
    ("travel", ["trip", "flight", "hotel", "itinerary"]),
    ("code_analysis", ["code", "repository", "function", "class"]),
]


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        ("Buy a kettle under 40 euros", "shopping"),
        ("Find a restaurant for dinner on Friday", "dining"),
        ("Plan a trip to Rome with a hotel near the center", "travel"),
        ("Which function parses the config in this repository?", "code_analysis"),
        ("Cheapest flight and hotel for a trip to Rome", "travel"),  # three travel words beat one shopping word
        ("Tell me a joke", None),  # nothing matches: the API then asks the LLM, offline it asks the user
        ("Recode the classifier", None),  # whole words only: 'recode' is not 'code', 'classifier' not 'class'
    ],
)
def test_capability_selection_by_keywords(goal, expected):
    assert select_by_keywords(goal, CAPABILITIES) == expected
