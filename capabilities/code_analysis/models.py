"""Structured outputs of the LLM stages (what the model must return)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class IntentOutput(_Out):
    intent_type: Literal["locate", "explain", "trace", "overview"] = "explain"
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


class Finding(_Out):
    claim: str = Field(min_length=1, max_length=1000)
    citations: list[str] = Field(min_length=1, description="'file:line' references taken from the evidence")


class SynthesisOutput(_Out):
    summary: str
    findings: list[Finding] = Field(default_factory=list, max_length=12)
    gaps: list[str] = Field(default_factory=list)


class CriticOutput(_Out):
    """A verdict only: the critic adds no findings and no citations."""

    decision: Literal["COMPLETE", "NEXT_STAGE", "REPLAN"]
    verdict: str
    remaining_goals: list[str] = Field(default_factory=list)
