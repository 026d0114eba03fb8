"""The shopping stages, typed: execute -> present -> complete (seed 004, Level 1).

Two LLM calls: `execute` reads the goal into a product query, `complete` writes the summary.
Which offers the user sees is decided in code (preferences, stock, budget), so a learned
preference acts the same whichever model runs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from capabilities.shopping.connectors import Offer
from capabilities.shopping.query import MAX_OPTIONS, ProductQuery, choose_options, constraints
from capabilities.shopping.tools import SEARCH, SOURCE, offers_of
from missions.core.capability.connectors import call_source, with_simulated_failures
from missions.core.capability.registry import Ctx, stage

NONE = "none"  # the option that declines every offer


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    summary: str = Field(min_length=1, max_length=2000)


def option_card(offer: Offer) -> dict[str, Any]:
    """What the user sees of one offer; `id` (the seller) is what a choice names."""
    return {
        "id": offer.seller,
        "seller": offer.seller_name,
        "product": offer.product,
        "category": offer.category,
        "total": offer.total,
        "price": offer.price,
        "shipping_cost": offer.shipping_cost,
        "shipping_days": offer.shipping_days,
        "rating": offer.rating,
        "rating_count": offer.rating_count,
        "trusted": offer.trusted,
        "condition": offer.condition,
    }


def one_line(option: dict[str, Any]) -> str:
    """'Amazon: $349.00 delivered in 2 days, seller rated 4.6 (trusted)'."""
    trust = "trusted" if option["trusted"] else "marketplace seller"
    return (
        f"{option['seller']}: ${option['total']:.2f} delivered in {option['shipping_days']} days, "
        f"seller rated {option['rating']:.1f} ({trust})"
    )


class Found(BaseModel):
    """What `execute` found: the query, the offers kept (as the user sees them) and why others went."""

    query: ProductQuery
    product: str | None
    constraints: dict[str, Any]
    applied_preferences: list[str]
    source: dict[str, Any]
    found: int
    removed: dict[str, int]
    options: list[dict[str, Any]]


class Presented(BaseModel):
    asked: bool
    reason: str


class Outcome(BaseModel):
    """The final output: the summary (`answer`) and the facts it was written from."""

    answer: str
    product: str | None
    query: dict[str, Any] | None
    constraints: dict[str, Any] | None
    applied_preferences: list[str]
    options: list[dict[str, Any]]
    chosen: dict[str, Any] | None
    declined: bool
    source: dict[str, Any] | None
    found: int
    removed: dict[str, int]
    ended_early: str | None


@stage
def execute(ctx: Ctx) -> Found:
    """Reads the goal (the model), asks the price-comparison service, filters by the stored preferences."""
    query = ctx.think(ProductQuery)

    def once() -> list[Offer]:
        return offers_of(ctx.tools.execute(SEARCH, {"query": query.product}))

    result = call_source(SOURCE, with_simulated_failures(dict(ctx.context), SOURCE, once))
    if not result.ok:
        ctx.report("source_failed", f"{SOURCE}: {result.error}")
    rules, applied = constraints(query, dict(ctx.context.get("preferences") or {}))
    kept, removed = choose_options(result.items, rules)
    limit = int(ctx.context.get("max_options") or MAX_OPTIONS)
    return Found(
        query=query,
        product=result.items[0].product if result.items else None,
        constraints=rules,
        applied_preferences=applied,
        source=result.report(),
        found=len(result.items),
        removed=removed,
        options=[option_card(offer) for offer in kept[:limit]],
    )


@stage
def present(ctx: Ctx, execute: Found) -> Presented:
    """Asks the user to choose (the answer resumes at `complete`); with nothing to offer it says so."""
    if execute.options:
        ctx.choose(f"Which offer for {execute.product} would you like?", execute.options, one_line, decline=NONE)
    return Presented(asked=False, reason="no offer fits")


@stage
def complete(ctx: Ctx, execute: Found | None) -> Outcome:
    """Records the choice and summarizes (the model writes it; on the failure path, plain code does)."""
    facts = outcome_facts(ctx, execute)
    summary = ctx.think(Summary, facts=facts).summary if ctx.failure is None else describe(facts)
    return Outcome(answer=summary, **facts)


def outcome_facts(ctx: Ctx, execute: Found | None) -> dict[str, Any]:
    """What the mission found and what the user chose: the final output and the summary's only source."""
    options = execute.options if execute else []
    decision = ctx.answer.decision if ctx.answer is not None else None
    return {
        "product": execute.product if execute else None,
        "query": execute.query.model_dump() if execute else None,
        "constraints": execute.constraints if execute else None,
        "applied_preferences": execute.applied_preferences if execute else [],
        "options": options,
        "chosen": next((o for o in options if o["id"] == decision), None),
        "declined": decision == NONE,
        "source": execute.source if execute else None,
        "found": execute.found if execute else 0,
        "removed": execute.removed if execute else {},
        # why the mission stopped short: a failure path, or a bound routing straight to this stage
        "ended_early": (ctx.failure.get("reason") if ctx.failure else None) or ctx.terminal_reason,
    }


def describe(facts: dict[str, Any]) -> str:
    """The summary in plain words, from the facts alone (the offline model and the failure path)."""
    product = facts.get("product") or (facts.get("query") or {}).get("product") or "that product"
    chosen, options = facts.get("chosen"), facts.get("options") or []
    source = facts.get("source") or {}
    if source and not source.get("ok"):
        text = f"The price comparison service could not be reached ({source.get('error')}), so there are no offers."
    elif chosen:
        cheapest = min(o["total"] for o in options)
        best = " (the best price)" if chosen["total"] <= cheapest else ""
        text = f"You chose {one_line(chosen)}{best} for {product}."
    elif facts.get("declined"):
        text = f"You chose none of the {len(options)} offer(s) for {product}."
    elif facts.get("ended_early") and options:
        text = f"No offer was chosen before the mission ended ({facts['ended_early']}) for {product}."
    elif facts.get("ended_early"):
        text = f"The mission ended ({facts['ended_early']}) before any offer could be found."
    elif options:
        text = f"Offers for {product}: " + "; ".join(one_line(o) for o in options) + "."
    elif facts.get("found"):
        text = f"None of the {facts['found']} offer(s) for {product} fit: {_removed(facts.get('removed') or {})}."
    else:
        text = f"No seller offers {product}."
    if facts.get("applied_preferences"):
        text += " Your preferences applied: " + "; ".join(facts["applied_preferences"]) + "."
    return text


def _removed(removed: dict[str, int]) -> str:
    return ", ".join(f"{count} {reason.replace('_', ' ')}" for reason, count in sorted(removed.items()))
