"""Which capability fits a goal, and how complex the goal is (seed 004: 1 simple, 2 coordinated,
3 complex).

The level follows seed 004's decision tree over an analysis of the goal (subgoals,
dependencies, external services, planning depth). The LLM produces the analysis; offline, a
deterministic reading of the goal does (`offline_goal_analysis`), good enough for the
examples in tests/unit/core/test_classification.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from missions.core.llm.provider import LLMProvider, LLMRequest


class GoalAnalysis(BaseModel):
    subgoals: int = Field(ge=1, le=50)  # distinct steps the goal needs
    dependencies: Literal["none", "parallel", "sequential"]  # how the steps relate
    external_services: int = Field(ge=0, le=20)  # distinct outside services to consult
    planning: Literal["none", "single", "hierarchical"]  # depth of planning before acting
    review_loop: bool = False  # the user will want drafts to review and refine


class Classification(BaseModel):
    level: Literal[1, 2, 3]
    analysis: GoalAnalysis
    source: Literal["llm", "offline"]


def level_of(analysis: GoalAnalysis) -> Literal[1, 2, 3]:
    """Seed 004's decision tree."""
    if analysis.review_loop or analysis.planning == "hierarchical" or analysis.dependencies == "sequential":
        return 3
    if analysis.subgoals <= 2 and analysis.planning == "none" and analysis.external_services <= 1:
        return 1
    if analysis.subgoals <= 5 and analysis.external_services <= 3:
        return 2
    return 3


def classify_complexity(goal: str, llm: LLMProvider, *, source: Literal["llm", "offline"]) -> Classification:
    request = LLMRequest(
        stage="classify_complexity",
        role="classifier",
        output_model=GoalAnalysis,
        messages=[
            {
                "role": "system",
                "content": (
                    "Analyse the user's goal for a mission agent. Count the distinct steps it needs (subgoals), say "
                    "whether they are independent, can run in parallel, or depend on each other in sequence, count "
                    "the outside services to consult (search engines, booking sites, stores...), the depth of planning "
                    "needed (none, single level, hierarchical), and whether the user will want drafts to review."
                ),
            },
            {"role": "user", "content": goal},
        ],
        hints={"goal": goal},
    )
    analysis = llm.complete(request).output
    assert isinstance(analysis, GoalAnalysis)
    return Classification(level=level_of(analysis), analysis=analysis, source=source)


def classify_offline(goal: str) -> Classification:
    """The deterministic reading, without a model (offline runs, or when the model fails)."""
    request = LLMRequest(
        stage="classify_complexity", role="classifier", output_model=GoalAnalysis, messages=[], hints={"goal": goal}
    )
    return Classification(
        level=level_of(analysis := offline_goal_analysis(request)), analysis=analysis, source="offline"
    )


# --------------------------------------------------------------------------- offline reading

SERVICES = {
    "flights": r"flights?|fly|airline|plane",
    "hotels": r"hotels?|stay|accommodation|airbnb|lodging",
    "restaurants": r"restaurants?|dinner|lunch|brunch|dining|eat out|table for",
    "stores": r"buy|cheapest|best price|retailers?|deal|order|purchase",
    "activities": r"museums?|tours?|activit(?:y|ies)|day trip|hik(?:e|ing)|sightseeing",
    "events": r"concerts?|tickets?|shows?|festival|events?",
    "venues": r"venue|catering|florist|photographer",
    "training": r"workout|training plan|gym|nutrition|meal plan",
}
HIERARCHICAL = (
    r"\btrip\b|itinerary|vacation|holiday|wedding|relocat|move to|over the next|\d+[- ]days?\b|weeks?\b|months?\b"
)
SEQUENTIAL = r"\bthen\b|\bafter\b|\bbefore\b|\bonce\b|depends on"
PLANNING = r"\bplan\b|schedule|compare|recommend|options|organi[sz]e|build me"
REVIEW = r"\bdraft|\breview|\brefine|\biterate"


def offline_goal_analysis(request: LLMRequest) -> GoalAnalysis:
    """A deterministic reading of the goal for offline runs (the real model does better)."""
    goal = str(request.hints.get("goal") or _last_user_message(request)).lower()
    services = [name for name, pattern in SERVICES.items() if re.search(pattern, goal)]
    parts = [p for p in re.split(r",|;|:|\band\b|\bthen\b|\bplus\b", goal) if p.strip()]
    subgoals = max(1, len(parts)) + max(0, len(services) - 1)
    hierarchical = re.search(HIERARCHICAL, goal) is not None
    planning = (
        "hierarchical" if hierarchical else "single" if re.search(PLANNING, goal) or len(services) > 1 else "none"
    )
    if re.search(SEQUENTIAL, goal) or (hierarchical and len(services) >= 2):
        dependencies = "sequential"
    elif len(services) >= 2 or "restaurants" in services or re.search(r"\bcompare\b|\boptions\b", goal):
        dependencies = "parallel"
    else:
        dependencies = "none"
    if "restaurants" in services:  # several review and booking sources are consulted for one search
        planning = "single" if planning == "none" else planning
    return GoalAnalysis(
        subgoals=min(subgoals, 50),
        dependencies=dependencies,  # type: ignore[arg-type]
        external_services=min(len(services), 20),
        planning=planning,  # type: ignore[arg-type]
        review_loop=re.search(REVIEW, goal) is not None,
    )


def _last_user_message(request: LLMRequest) -> str:
    return next((m.get("content", "") for m in reversed(request.messages) if m.get("role") == "user"), "")


# --------------------------------------------------------------------------- capability selection


def select_by_keywords(goal: str, capabilities: Iterable[tuple[str, Iterable[str]]]) -> str | None:
    """The capability whose keywords the goal mentions most (whole words; ties: the more specific)."""
    lowered = goal.lower()
    scored = []
    for name, keywords in capabilities:
        hits = [
            word for word in {w.lower() for w in keywords} if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", lowered)
        ]
        if hits:
            scored.append((len(hits), sum(len(h) for h in hits), name))
    return max(scored)[2] if scored else None
