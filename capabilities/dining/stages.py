"""The dining stages: plan -> [maps | reviews | reservations] -> aggregate -> rank -> present -> complete.

Three LLM calls: the planner reads the goal, the ranker writes one line per option (the order
is the composite score's, never the model's), and the last stage writes the summary. Everything
that decides what the user is offered is code, so preferences and failures act the same with
any model.

A mission that delegates to dining (travel's dinners) names the `city` in the context, and may ask
for a `shortlist` of N options instead of a choice: then no question is asked and the output's
`options` are the best N, for the mission that asked to use.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from capabilities.dining.connectors import RestaurantListing, merge_listings
from capabilities.dining.criteria import GoalCriteria, plan_criteria
from capabilities.dining.ranking import MAX_SHORTLIST, TOP_N, WEIGHTS, apply_filters, card, one_line
from capabilities.dining.ranking import rank as by_score
from capabilities.dining.tools import listings_of, tool_id
from missions.core.capability.connectors import call_source, with_simulated_failures
from missions.core.capability.registry import Ctx, stage

SOURCE_STAGES = ("maps", "reviews", "reservations")  # each stage is named after its source
NONE = "none"  # the option that declines every restaurant


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class OptionNote(_Out):
    id: str
    note: str = Field(max_length=300)


class RankNotes(_Out):
    """The ranker model's answer: a short note per option it was shown (it adds no options)."""

    notes: list[OptionNote] = Field(default_factory=list, max_length=MAX_SHORTLIST)


class Summary(_Out):
    summary: str = Field(min_length=1, max_length=2000)


class Planned(_Out):
    criteria: dict[str, Any]
    from_goal: GoalCriteria
    applied_preferences: list[str]


class Listings(_Out):
    """One source's answer: its report (ok, count, error, attempts) and what it listed."""

    report: dict[str, Any]
    listings: list[dict[str, Any]]


class Aggregated(_Out):
    sources: list[dict[str, Any]]
    failed_sources: list[str]
    listings: int
    unique: int
    duplicates_merged: int
    removed: dict[str, int]
    notes: list[str]
    candidates: list[dict[str, Any]]


class Ranked(_Out):
    weights: dict[str, Any]
    considered: int
    top: list[dict[str, Any]]
    runners_up: list[dict[str, Any]]


class Presented(_Out):
    asked: bool
    reason: str


class Outcome(_Out):
    """The final output: the summary (`answer`) and the facts it was written from."""

    answer: str
    criteria: dict[str, Any]
    applied_preferences: list[str]
    options: list[dict[str, Any]]
    chosen: dict[str, Any] | None
    declined: bool
    sources: list[dict[str, Any]]
    failed_sources: list[str]
    duplicates_merged: int
    notes: list[str]
    ended_early: str | None


@stage
def plan(ctx: Ctx) -> Planned:
    """The model reads the goal; code applies the stored preferences and the context."""
    today = ctx.context.get("today")  # lets a model resolve "tonight" when the caller says
    goal = ctx.think(GoalCriteria, **({"today": today} if today else {}))
    criteria, applied = plan_criteria(goal, dict(ctx.context.get("preferences") or {}), dict(ctx.context))
    return Planned(criteria=criteria, from_goal=goal, applied_preferences=applied)


def _search(ctx: Ctx, plan: Planned, source: str) -> Listings:
    """One source, in parallel with the others; a failure (after retries) is reported, not raised."""
    criteria = plan.criteria
    params = {
        "cuisine": criteria.get("cuisine"),
        "day": criteria.get("day"),
        "time": criteria.get("time", "19:30"),
        "party_size": criteria.get("party_size", 2),
        "radius_km": criteria.get("max_distance_km", 5.0),
        "city": ctx.context.get("city") or None,
    }

    def once() -> list[RestaurantListing]:
        return listings_of(ctx.tools.execute(tool_id(source), params))

    result = call_source(source, with_simulated_failures(dict(ctx.context), source, once))
    if not result.ok:
        ctx.report("source_failed", f"{source}: {result.error}")
    return Listings(report=result.report(), listings=[listing.to_dict() for listing in result.items])


@stage
def maps(ctx: Ctx, plan: Planned) -> Listings:
    return _search(ctx, plan, "maps")


@stage
def reviews(ctx: Ctx, plan: Planned) -> Listings:
    return _search(ctx, plan, "reviews")


@stage
def reservations(ctx: Ctx, plan: Planned) -> Listings:
    return _search(ctx, plan, "reservations")


@stage
def aggregate(
    plan: Planned, maps: Listings | None, reviews: Listings | None, reservations: Listings | None
) -> Aggregated:
    """Joins the sources: one record per restaurant, then the criteria's filters."""
    reports: list[dict[str, Any]] = []
    listings: list[RestaurantListing] = []
    for source, output in zip(SOURCE_STAGES, (maps, reviews, reservations), strict=True):
        missing = {"source": source, "ok": False, "count": 0, "error": "no answer", "attempts": 0}
        reports.append(output.report if output else missing)
        listings += [RestaurantListing.from_dict(item) for item in (output.listings if output else [])]
    merged = merge_listings(listings)
    candidates, removed, notes = apply_filters([r.to_dict() for r in merged], plan.criteria)
    return Aggregated(
        sources=reports,
        failed_sources=[r["source"] for r in reports if not r["ok"]],
        listings=len(listings),
        unique=len(merged),
        duplicates_merged=len(listings) - len(merged),
        removed=removed,
        notes=notes,
        candidates=candidates,
    )


def shortlist(context: dict[str, Any]) -> int | None:
    """How many options the mission that delegated wants without a question (context `shortlist`), or None."""
    wanted = context.get("shortlist")
    if isinstance(wanted, bool) or not isinstance(wanted, int | float) or wanted < 1:
        return None
    return min(int(wanted), MAX_SHORTLIST)


@stage
def rank(ctx: Ctx, plan: Planned, aggregate: Aggregated) -> Ranked:
    """Code orders by the composite score; the model writes a note on each of the top options."""
    criteria = plan.criteria
    ranked = by_score(aggregate.candidates, criteria)
    count = shortlist(dict(ctx.context)) or TOP_N
    top = [card(r, criteria) for r in ranked[:count]]
    said = ctx.think(RankNotes, criteria=criteria, options=top, weights=WEIGHTS).notes
    notes = {n.id: n.note for n in said}  # notes on ids it was not shown are dropped
    return Ranked(
        weights=WEIGHTS,
        considered=len(ranked),
        top=[card({**r, "note": notes.get(r["id"])}, criteria) for r in ranked[:count]],
        runners_up=[{"id": r["id"], "score": r["score"]} for r in ranked[count : count + 5]],
    )


@stage
def present(ctx: Ctx, rank: Ranked) -> Presented:
    """Asks the user to choose (the answer resumes at `complete`); with nothing to offer it says so. A
    shortlist asked for by the mission that delegated is its to use: no question."""
    if shortlist(dict(ctx.context)) is not None:
        return Presented(asked=False, reason=f"a shortlist of {len(rank.top)} for the mission that asked")
    if rank.top:
        ctx.choose("Which restaurant would you like?", rank.top, one_line, decline=NONE)
    return Presented(asked=False, reason="no restaurant fits the criteria")


def outcome_facts(ctx: Ctx, plan: Planned | None, aggregate: Aggregated | None, rank: Ranked | None) -> dict[str, Any]:
    """What the mission found and what the user chose: the final output and the summary's only source."""
    options = rank.top if rank else []
    decision = ctx.answer.decision if ctx.answer is not None else None
    return {
        "criteria": plan.criteria if plan else {},
        "applied_preferences": plan.applied_preferences if plan else [],
        "options": options,
        "chosen": next((o for o in options if o["id"] == decision), None),
        "declined": decision == NONE,
        "sources": aggregate.sources if aggregate else [],
        "failed_sources": aggregate.failed_sources if aggregate else [],
        "duplicates_merged": aggregate.duplicates_merged if aggregate else 0,
        "notes": aggregate.notes if aggregate else [],
        # why the mission stopped short: a failure path, or a bound routing straight to this stage
        "ended_early": (ctx.failure.get("reason") if ctx.failure else None) or ctx.terminal_reason,
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


@stage
def complete(ctx: Ctx, plan: Planned | None, aggregate: Aggregated | None, rank: Ranked | None) -> Outcome:
    """Records the choice and summarizes (the model writes it; on the failure path, plain code does)."""
    facts = outcome_facts(ctx, plan, aggregate, rank)
    summary = ctx.think(Summary, facts=facts).summary if ctx.failure is None else describe(facts)
    return Outcome(answer=summary, **facts)
