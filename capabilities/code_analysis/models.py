"""What the models answer (the `...Output` models) and what each stage returns.

Where a stage adds to its model's answer (the planner its goal and attempt, the synthesizer
the findings of every goal so far), the stage's output is a model of its own: the model is
never asked for what the code decides.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Survey(_Out):
    """Perception: the question, and the shape of the repository it is about."""

    normalized_query: str
    repository: str
    file_count: int
    python_files: int
    top_dirs: list[str]


IntentType = Literal["locate", "explain", "trace", "overview"]


class IntentOutput(_Out):
    intent_type: IntentType = "explain"
    goals: list[str] = Field(min_length=1, max_length=5)
    search_terms: list[str] = Field(default_factory=list, max_length=12)
    clarification_needed: bool = False
    clarification_question: str | None = None


class PlanStep(_Out):
    tool: str
    params: dict[str, Any] = Field(default_factory=dict)
    why: str = ""


class PlanOutput(_Out):
    goal: str
    steps: list[PlanStep] = Field(min_length=1, max_length=12)
    reasoning: str = ""


class Plan(PlanOutput):
    """The planner's output: the steps, for the goal the code chose (not the model), and which
    plan for that goal this is (1, then 2 after a REPLAN)."""

    attempt: int = Field(ge=1)


class ToolRun(_Out):
    """One tool call of the traverser, as it went."""

    tool: str
    params: dict[str, Any]
    why: str
    status: str
    error: str | None
    data: dict[str, Any] | None
    citations: list[str]


class TermSearch(_Out):
    """A word of the goal that no tool result held, searched for again over every text file."""

    term: str
    mentions: int
    searched: str  # what was searched, as a gap says it


class Traversal(_Out):
    goal: str
    results: list[ToolRun]
    succeeded: int
    failed: int
    term_searches: list[TermSearch] = Field(default_factory=list)


class Finding(_Out):
    claim: str = Field(min_length=1, max_length=1000)
    citations: list[str] = Field(min_length=1, description="'file:line' references taken from the evidence")


class SynthesisOutput(_Out):
    summary: str
    findings: list[Finding] = Field(default_factory=list, max_length=12)
    gaps: list[str] = Field(default_factory=list)


class GoalFindings(_Out):
    """What the synthesizer found for one goal."""

    goal: str
    summary: str
    findings: list[Finding]
    gaps: list[str]


class Synthesis(SynthesisOutput):
    """The synthesizer's output: this goal's findings, and every goal's so far (a goal planned
    again replaces its earlier entry), which the critic and the integration read."""

    goal: str
    stages: list[GoalFindings]
    dropped: list[str] = Field(default_factory=list, description="findings or gaps the code refused, and why")


class CriticOutput(_Out):
    """A verdict only: the critic adds no findings and no citations."""

    decision: Literal["COMPLETE", "NEXT_STAGE", "REPLAN"]
    verdict: str
    remaining_goals: list[str] = Field(default_factory=list)


class Answer(_Out):
    """The mission's result: the cited answer, and what it was made of."""

    answer: str
    goals: list[str]
    findings: list[Finding]
    citations: list[str]
    partial: bool
