"""fitness_coach: a weekly workout and meal plan, made in parallel, accepted or adjusted by the user.

capability.toml holds the pipeline, prompts, bounds and triggers; this module the output models and hooks.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from capabilities.fitness_coach.policy import adjustments, offline_policy
from missions.core.capability import StageContext, StageHooks
from missions.core.envelope import InterruptKind

DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
REST = "Rest: walk 30 min"
YES = {"accept", "accepted", "yes", "y", "ok", "approve", "looks good"}


class Assessment(BaseModel):
    level: Literal["beginner", "intermediate", "advanced"]
    days_per_week: int = Field(ge=2, le=6)
    minutes_per_session: int = Field(ge=15, le=120)
    equipment: list[str]
    focus: Literal["strength", "fat_loss", "endurance", "general"]
    dietary_restrictions: list[str]
    summary: str


class Session(BaseModel):
    day: Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    title: str
    exercises: list[str]


class WorkoutPlan(BaseModel):
    sessions: list[Session]
    progression: str


class Meal(BaseModel):
    meal: str
    options: list[str] = Field(min_length=1)


class NutritionPlan(BaseModel):
    daily_target: str
    meals: list[Meal]
    guidelines: list[str]


class Assess(StageHooks):
    output_model = Assessment

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        """The config's prompt, plus what the user asked to change when shown an earlier plan."""
        messages = super().prompt(ctx)
        if changes := adjustments(ctx.envelope):
            messages[-1]["content"] += "\nAdjustments, oldest first: " + json.dumps(changes)
        return messages


class Planner(StageHooks):
    """workout and nutrition: the assessment is their brief (they run side by side, so neither sees the other)."""

    def __init__(self, output_model: type[BaseModel]):
        self.output_model = output_model

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        messages = super().prompt(ctx)
        messages[-1]["content"] += "\nAssessment: " + json.dumps(ctx.output_of("assess"))
        return messages


class Synthesize(StageHooks):
    """Plain code, no model: one row per weekday, the session (or rest) and that day's meals."""

    def post(self, ctx: StageContext) -> dict[str, Any]:
        profile, nutrition = ctx.output_of("assess"), ctx.output_of("nutrition")
        sessions = {s["day"]: s for s in ctx.output_of("workout")["sessions"]}
        week = []
        for index, day in enumerate(DAYS):
            session = sessions.get(day)
            training = f"{session['title']}: {'; '.join(session['exercises'])}" if session else REST
            meals = {m["meal"]: m["options"][index % len(m["options"])] for m in nutrition["meals"]}
            week.append({"day": day, "workout": training, "meals": meals})
        return {
            "summary": f"Your week ({profile['summary']}): {len(sessions)} sessions, {nutrition['daily_target']}.",
            "week": week,
            "progression": ctx.output_of("workout")["progression"],
            "guidelines": nutrition["guidelines"],
        }


class Present(StageHooks):
    """Ask once per plan; the answer comes back here (agent_review_resume_stage) and routes."""

    def pre(self, ctx: StageContext) -> None:
        if ctx.resume is None:
            plan = ctx.output_of("synthesize")
            days = ", ".join(f"{d['day']} {d['workout'].split(':')[0]}" for d in plan["week"] if d["workout"] != REST)
            question = f"{plan['summary']} Training: {days}. Accept this plan, or tell me what to change?"
            ctx.ask(InterruptKind.AGENT_REVIEW, question, options=["accept", "adjust"], data={"week": plan["week"]})

    def post(self, ctx: StageContext) -> dict[str, Any]:
        assert ctx.resume is not None  # pre() asked otherwise
        said = (ctx.resume.text or ctx.resume.decision or "").strip()
        if ctx.resume.approved or said.lower() in YES:
            return {"decision": "accept"}
        return {"decision": "adjust", "adjustment": said}


class Complete(StageHooks):
    """The answer; also runs on the failure path (no model there), with whatever plan exists."""

    def post(self, ctx: StageContext) -> dict[str, Any]:
        plan = ctx.output_of("synthesize")
        rows = [f"{d['day']}: {d['workout']} | " + "; ".join(d["meals"].values()) for d in plan.get("week", [])]
        return {
            "answer": "\n".join([plan.get("summary", "No plan was made."), *rows]),
            "accepted": ctx.output_of("present").get("decision") == "accept",
            "plan": plan,
        }


HOOKS = {
    "assess": Assess(),
    "workout": Planner(WorkoutPlan),
    "nutrition": Planner(NutritionPlan),
    "synthesize": Synthesize(),
    "present": Present(),
    "complete": Complete(),
}

__all__ = ["HOOKS", "offline_policy"]
