"""The shopping stages: execute -> present -> complete (seed 004, Level 1).

Two LLM calls: `execute` reads the goal into a product query, `complete` writes the summary.
Which offers the user sees is decided in code (preferences, stock, budget), so a learned
preference acts the same whichever model runs.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from capabilities.shopping.connectors import Offer
from capabilities.shopping.query import MAX_OPTIONS, ProductQuery, choose_options, constraints, read_goal
from capabilities.shopping.tools import SEARCH, SOURCE, offers_of
from missions.core.capability import StageContext, StageDefinitionError, StageHooks
from missions.core.connectors import call_source, with_simulated_failures
from missions.core.envelope import InterruptKind

NONE = "none"  # the option that declines every offer
FACTS = "Facts (JSON):\n"


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

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


class Execute(StageHooks):
    """Reads the goal (LLM), asks the price-comparison service, filters by the stored preferences."""

    output_model = ProductQuery

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        return facts_prompt(ctx, {})

    def act(self, ctx: StageContext) -> None:
        query = ctx.llm_output if isinstance(ctx.llm_output, ProductQuery) else read_goal(ctx.goal)
        assert ctx.tools is not None

        def once() -> list[Offer]:
            return offers_of(ctx.tools.execute(SEARCH, {"query": query.product}))

        result = call_source(SOURCE, with_simulated_failures(ctx.envelope.context, SOURCE, once))
        if not result.ok:
            ctx.envelope.record_error(ctx.agent.name, "source_failed", f"{SOURCE}: {result.error}")
        ctx.scratch.update(query=query, result=result)

    def post(self, ctx: StageContext) -> dict[str, Any]:
        query, result = ctx.scratch["query"], ctx.scratch["result"]
        rules, applied = constraints(query, ctx.envelope.context.get("preferences") or {})
        kept, removed = choose_options(result.items, rules)
        limit = int(ctx.envelope.context.get("max_options") or MAX_OPTIONS)
        return {
            "query": query.model_dump(),
            "product": result.items[0].product if result.items else None,
            "constraints": rules,
            "applied_preferences": applied,
            "source": result.report(),
            "found": len(result.items),
            "removed": removed,
            "options": [option_card(offer) for offer in kept[:limit]],
        }


class Present(StageHooks):
    """Asks the user to choose; with nothing to offer it says so and moves on."""

    def pre(self, ctx: StageContext) -> None:
        options = ctx.output_of("execute").get("options") or []
        if options:
            lines = "\n".join(f"{i}. {one_line(option)}" for i, option in enumerate(options, 1))
            product = ctx.output_of("execute").get("product")
            ctx.ask(
                InterruptKind.CHOICE,
                f"Which offer for {product} would you like?\n{lines}\nAnswer with its number or id, or '{NONE}'.",
                options=[option["id"] for option in options] + [NONE],
                data={"options": options},
            )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        return {"asked": False, "reason": "no offer fits"}


def outcome_facts(ctx: StageContext) -> dict[str, Any]:
    """What the mission found and what the user chose: the final output and the summary's only source."""
    execute = ctx.output_of("execute")
    options = execute.get("options") or []
    decision = ctx.resume.decision if ctx.resume is not None else None
    return {
        "product": execute.get("product"),
        "query": execute.get("query"),
        "constraints": execute.get("constraints"),
        "applied_preferences": execute.get("applied_preferences", []),
        "options": options,
        "chosen": next((o for o in options if o["id"] == decision), None),
        "declined": decision == NONE,
        "source": execute.get("source"),
        "found": execute.get("found", 0),
        "removed": execute.get("removed", {}),
        # why the mission stopped short: a failure path, or a bound routing straight to this stage
        "ended_early": (ctx.scratch.get("failure") or {}).get("reason") or ctx.envelope.terminal_reason,
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
