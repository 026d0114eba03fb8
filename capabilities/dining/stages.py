"""The dining stages: plan -> [maps | reviews | reservations] -> aggregate -> rank -> present -> complete.

Three LLM calls: the planner reads the goal, the ranker writes one line per option (the order
is the composite score's, never the model's), and the last stage writes the summary. Everything
that decides what the user is offered is code, so preferences and failures act the same with
any model.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from capabilities.dining.connectors import RestaurantListing, merge_listings
from capabilities.dining.criteria import GoalCriteria, plan_criteria, read_goal
from capabilities.dining.ranking import TOP_N, WEIGHTS, apply_filters, card, one_line, rank
from capabilities.dining.tools import listings_of, tool_id
from missions.core.capability import StageContext, StageDefinitionError, StageHooks
from missions.core.connectors import call_source, with_simulated_failures
from missions.core.envelope import InterruptKind

SOURCE_STAGES = ("maps", "reviews", "reservations")  # each stage is named after its source
NONE = "none"  # the option that declines every restaurant
FACTS = "Facts (JSON):\n"


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class OptionNote(_Out):
    id: str
    note: str = Field(max_length=300)


class RankNotes(_Out):
    """The ranker model's answer: a short note per option it was shown (it adds no options)."""

    notes: list[OptionNote] = Field(default_factory=list, max_length=TOP_N)


class Summary(_Out):
    summary: str = Field(min_length=1, max_length=2000)


def facts_prompt(ctx: StageContext, facts: dict[str, Any]) -> list[dict[str, str]]:
    """The config's system prompt, then the goal and the stage's facts as JSON (what the model may use)."""
    if ctx.system_prompt is None:
        raise StageDefinitionError(f"stage '{ctx.agent.name}' has no prompt in capability.toml")
    body = json.dumps(facts, sort_keys=True, default=str)
    return [
        {"role": "system", "content": ctx.system_prompt},
        {"role": "user", "content": f"Goal: {ctx.goal}\n{FACTS}{body}"},
    ]


def criteria_of(ctx: StageContext) -> dict[str, Any]:
    return ctx.output_of("plan").get("criteria") or {}


class Plan(StageHooks):
    output_model = GoalCriteria

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        today = ctx.envelope.context.get("today")  # lets a model resolve "tonight" when the caller says
        return facts_prompt(ctx, {"today": today} if today else {})

    def post(self, ctx: StageContext) -> dict[str, Any]:
        goal = ctx.llm_output if isinstance(ctx.llm_output, GoalCriteria) else read_goal(ctx.goal)
        preferences = ctx.envelope.context.get("preferences") or {}
        criteria, applied = plan_criteria(goal, preferences, ctx.envelope.context)
        return {"criteria": criteria, "from_goal": goal.model_dump(), "applied_preferences": applied}


class SourceSearch(StageHooks):
    """One source, in parallel with the others; a failure (after retries) is reported, not raised."""

    def __init__(self, source: str):
        self.source = source

    def act(self, ctx: StageContext) -> None:
        criteria = criteria_of(ctx)
        params = {
            "cuisine": criteria.get("cuisine"),
            "day": criteria.get("day"),
            "time": criteria.get("time", "19:30"),
            "party_size": criteria.get("party_size", 2),
            "radius_km": criteria.get("max_distance_km", 5.0),
        }
        assert ctx.tools is not None

        def once() -> list[RestaurantListing]:
            return listings_of(ctx.tools.execute(tool_id(self.source), params))

        result = call_source(self.source, with_simulated_failures(ctx.envelope.context, self.source, once))
        if not result.ok:
            ctx.envelope.record_error(ctx.agent.name, "source_failed", f"{self.source}: {result.error}")
        ctx.scratch["result"] = result

    def post(self, ctx: StageContext) -> dict[str, Any]:
        result = ctx.scratch["result"]
        return {"report": result.report(), "listings": [listing.to_dict() for listing in result.items]}


class Aggregate(StageHooks):
    """Joins the sources: one record per restaurant, then the criteria's filters."""

    def post(self, ctx: StageContext) -> dict[str, Any]:
        reports, listings = [], []
        for source in SOURCE_STAGES:
            output = ctx.output_of(source)
            reports.append(
                output.get("report") or {"source": source, "ok": False, "count": 0, "error": "no answer", "attempts": 0}
            )
            listings += [RestaurantListing.from_dict(item) for item in output.get("listings", [])]
        merged = merge_listings(listings)
        candidates, removed, notes = apply_filters([r.to_dict() for r in merged], criteria_of(ctx))
        return {
            "sources": reports,
            "failed_sources": [r["source"] for r in reports if not r["ok"]],
            "listings": len(listings),
            "unique": len(merged),
            "duplicates_merged": len(listings) - len(merged),
            "removed": removed,
            "notes": notes,
            "candidates": candidates,
        }


class Rank(StageHooks):
    output_model = RankNotes

    def pre(self, ctx: StageContext) -> None:
        ctx.scratch["ranked"] = rank(ctx.output_of("aggregate").get("candidates") or [], criteria_of(ctx))

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        criteria = criteria_of(ctx)
        top = [card(r, criteria) for r in ctx.scratch["ranked"][:TOP_N]]
        return facts_prompt(ctx, {"criteria": criteria, "options": top, "weights": WEIGHTS})

    def post(self, ctx: StageContext) -> dict[str, Any]:
        criteria, ranked = criteria_of(ctx), ctx.scratch["ranked"]
        said = ctx.llm_output.notes if isinstance(ctx.llm_output, RankNotes) else []
        notes = {n.id: n.note for n in said}  # notes on ids it was not shown are dropped
        return {
            "weights": WEIGHTS,
            "considered": len(ranked),
            "top": [card({**r, "note": notes.get(r["id"])}, criteria) for r in ranked[:TOP_N]],
            "runners_up": [{"id": r["id"], "score": r["score"]} for r in ranked[TOP_N : TOP_N + 5]],
        }


class Present(StageHooks):
    """Asks the user to choose; with nothing to offer it says so and moves on."""

    def pre(self, ctx: StageContext) -> None:
        top = ctx.output_of("rank").get("top") or []
        if top:
            lines = "\n".join(f"{i}. {one_line(option)}" for i, option in enumerate(top, 1))
            ctx.ask(
                InterruptKind.CHOICE,
                f"Which restaurant would you like?\n{lines}\nAnswer with its number or id, or '{NONE}'.",
                options=[option["id"] for option in top] + [NONE],
                data={"options": top},
            )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        return {"asked": False, "reason": "no restaurant fits the criteria"}


def outcome_facts(ctx: StageContext) -> dict[str, Any]:
    """What the mission found and what the user chose: the final output and the summary's only source."""
    options = ctx.output_of("rank").get("top") or []
    aggregate = ctx.output_of("aggregate")
    decision = ctx.resume.decision if ctx.resume is not None else None
    failure = ctx.scratch.get("failure")
    return {
        "criteria": criteria_of(ctx),
        "applied_preferences": ctx.output_of("plan").get("applied_preferences", []),
        "options": options,
        "chosen": next((o for o in options if o["id"] == decision), None),
        "declined": decision == NONE,
        "sources": aggregate.get("sources", []),
        "failed_sources": aggregate.get("failed_sources", []),
        "duplicates_merged": aggregate.get("duplicates_merged", 0),
        "notes": aggregate.get("notes", []),
        # why the mission stopped short: a failure path, or a bound routing straight to this stage
        "ended_early": (failure or {}).get("reason") or ctx.envelope.terminal_reason,
    }


def describe(facts: dict[str, Any]) -> str:
    """The summary in plain words, from the facts alone (the offline model and the failure path)."""
    criteria = facts.get("criteria") or {}
    wanted = " ".join(
        str(part)
        for part in (
            criteria.get("cuisine") or "any cuisine",
            criteria.get("day") or ("weeknight" if criteria.get("weeknight") else ""),
            f"at {criteria.get('time')}" if criteria.get("time") else "",
            f"for {criteria.get('party_size')}" if criteria.get("party_size") else "",
        )
        if part
    )
    limits = f"up to ${criteria.get('max_price_per_person')}/person within {criteria.get('max_distance_km', 0):g} km"
    diets = criteria.get("dietary_required", []) + criteria.get("dietary_preferred", [])
    if diets:
        limits += f", {', '.join(diets)} options"
    chosen, options = facts.get("chosen"), facts.get("options") or []
    if chosen:
        text = f"You chose {one_line(chosen)}. Picked from {len(options)} option(s) for {wanted}, {limits}."
    elif facts.get("declined"):
        text = f"You chose none of the {len(options)} option(s) for {wanted}, {limits}."
    elif facts.get("ended_early") and options:
        names = ", ".join(o["name"] for o in options)
        text = f"No choice was made before the mission ended ({facts['ended_early']}); the options were {names}."
    elif facts.get("ended_early"):
        text = f"The mission ended ({facts['ended_early']}) before any restaurant could be offered."
    elif options:
        text = f"Options for {wanted}, {limits}: " + "; ".join(one_line(o) for o in options) + "."
    else:
        text = f"No restaurant fits {wanted}, {limits}."
    if facts.get("failed_sources"):
        failed = {r["source"]: r.get("error") for r in facts.get("sources", []) if not r.get("ok")}
        text += " Sources that failed: " + "; ".join(f"{s} ({e})" for s, e in failed.items()) + "."
    if facts.get("applied_preferences"):
        text += " Your preferences applied: " + "; ".join(facts["applied_preferences"]) + "."
    return text


class Complete(StageHooks):
    output_model = Summary

    def pre(self, ctx: StageContext) -> None:
        ctx.scratch["facts"] = outcome_facts(ctx)

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        return facts_prompt(ctx, ctx.scratch["facts"])

    def post(self, ctx: StageContext) -> dict[str, Any]:
        facts = ctx.scratch.get("facts") or outcome_facts(ctx)
        answer = ctx.llm_output.summary if isinstance(ctx.llm_output, Summary) else describe(facts)
        return {"answer": answer, **facts}
