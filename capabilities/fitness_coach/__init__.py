"""fitness_coach: a weekly plan, made in parallel and accepted or adjusted (capability.toml: the rest)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

from missions.core import approvals
from missions.core.capability.registry import Ctx, stage
from missions.core.mission.envelope import InterruptKind

Day = Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
REST = "Rest: walk 30 min"


class Assessment(BaseModel):
    level: Literal["beginner", "intermediate", "advanced"]
    days_per_week: int = Field(ge=2, le=6)
    minutes_per_session: int = Field(ge=15, le=120)
    equipment: list[str]
    focus: Literal["strength", "fat_loss", "endurance", "general"]
    dietary_restrictions: list[str]
    summary: str


class Session(BaseModel):
    day: Day
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


class DayPlan(BaseModel):
    day: Day
    workout: str
    meals: dict[str, str]


class Plan(BaseModel):
    summary: str
    week: list[DayPlan]
    progression: str
    guidelines: list[str]


class Review(BaseModel):
    decision: Literal["accept", "adjust"]
    adjustment: str = ""


class Answer(BaseModel):
    answer: str
    accepted: bool
    plan: Plan | None


@stage
def assess(ctx: Ctx) -> Assessment:
    """The intake: the goal, the stored profile (context) and every adjustment asked for so far."""
    changes = [a["response"]["text"] for a in ctx.answers if a["kind"] == "agent_review" and a["response"].get("text")]
    return ctx.think(Assessment, adjustments_oldest_first=changes)


@stage
def workout(ctx: Ctx, assess: Assessment) -> WorkoutPlan:
    return ctx.think(WorkoutPlan, assessment=assess)


@stage
def nutrition(ctx: Ctx, assess: Assessment) -> NutritionPlan:
    return ctx.think(NutritionPlan, assessment=assess)


@stage
def synthesize(assess: Assessment, workout: WorkoutPlan, nutrition: NutritionPlan) -> Plan:
    """No model: one row per weekday, the session (or rest) and that day's meals."""
    sessions = {session.day: session for session in workout.sessions}
    week = [
        DayPlan(
            day=day,
            workout=f"{s.title}: {'; '.join(s.exercises)}" if (s := sessions.get(day)) else REST,
            meals={m.meal: m.options[index % len(m.options)] for m in nutrition.meals},
        )
        for index, day in enumerate(get_args(Day))
    ]
    summary = f"Your week ({assess.summary}): {len(sessions)} sessions, {nutrition.daily_target}."
    return Plan(summary=summary, week=week, progression=workout.progression, guidelines=nutrition.guidelines)


@stage
def present(ctx: Ctx, synthesize: Plan) -> Review:
    """Ask once per plan (the answer comes back here: resume.agent_review); a change goes back to assess."""
    days = ", ".join(f"{d.day} {d.workout.split(':')[0]}" for d in synthesize.week if d.workout != REST)
    answer = ctx.ask(
        InterruptKind.AGENT_REVIEW,
        f"{synthesize.summary} Training: {days}. Accept this plan, or tell me what to change?",
        options=["accept", "adjust"],
        data={"week": [day.model_dump() for day in synthesize.week]},
    )
    said = (answer.text or answer.decision or "").strip()
    if answer.approved or approvals.verdict(said) is True:
        return Review(decision="accept")
    return Review(decision="adjust", adjustment=said)


@stage
def complete(synthesize: Plan | None, present: Review | None) -> Answer:
    """Also the failure path's final stage: then no plan may exist."""
    if synthesize is None:
        return Answer(answer="No plan was made.", accepted=False, plan=None)
    rows = [f"{d.day}: {d.workout} | " + "; ".join(d.meals.values()) for d in synthesize.week]
    accepted = present is not None and present.decision == "accept"
    return Answer(answer="\n".join([synthesize.summary, *rows]), accepted=accepted, plan=synthesize)
