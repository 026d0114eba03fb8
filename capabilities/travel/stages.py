"""Stage hooks of the travel mission (see capability.toml for the graph).

Every model answer is checked against what the coordinators really found: a plan may only
name known coordinators and sources, a reflection and an itinerary only option ids the
workers returned. Costs and versions are computed here, never taken from the model.
"""

from __future__ import annotations

import json
from typing import Any

from capabilities.travel.itinerary import cost, layout, render
from capabilities.travel.models import Itinerary, Refinement, Reflection, TripPlan
from capabilities.travel.policy import goal_text
from capabilities.travel.ranking import merge, rank
from capabilities.travel.state import (
    CONFIDENCE_FLOOR,
    COORDINATORS,
    MAX_RUNS,
    ORDER,
    advance,
    coverage_confidence,
    label,
    latest,
    picked,
    ready,
    trip_query,
)
from missions.core.capability import StageContext, StageDefinitionError, StageHooks
from missions.core.envelope import InterruptKind

APPROVE = {"approve", "approved", "yes", "y", "ok", "accept", "looks good"}
SEARCH_AGAIN, CONTINUE = "search again", "continue"
MAX_CLARIFICATIONS = 2


def _messages(ctx: StageContext, data: dict[str, Any]) -> list[dict[str, str]]:
    """The config's system prompt, then the goal and this stage's data as JSON lines."""
    if ctx.system_prompt is None:
        raise StageDefinitionError(f"stage '{ctx.agent.name}' has no prompt in capability.toml")
    lines = [f"Goal: {goal_text(ctx.envelope)}"]
    lines += [f"{k}: {json.dumps(v, default=str, ensure_ascii=False)}" for k, v in data.items()]
    return [{"role": "system", "content": ctx.system_prompt}, {"role": "user", "content": "\n".join(lines)[:24_000]}]


def _compact(option: dict[str, Any]) -> dict[str, Any]:
    return {"id": option["id"], "label": label(option), "score": option.get("score")}


# --------------------------------------------------------------------------- planning


class Planner(StageHooks):
    """Decompose the goal into coordinators with dependencies; the plan is the `plan` artifact."""

    output_model = TripPlan

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        context = {k: v for k, v in ctx.envelope.context.items() if k != "simulate_failures"}
        known = {
            c.name: {"workers": [f"{s}:{q}" if q else s for _, s, q in c.workers], "usually_after": list(c.depends_on)}
            for c in COORDINATORS.values()
        }
        return _messages(ctx, {"context": context, "known_coordinators": known})

    def post(self, ctx: StageContext) -> dict[str, Any]:
        plan = ctx.llm_output
        if not isinstance(plan, TripPlan) or not plan.destination:
            asked = sum(1 for a in ctx.envelope.answers if a["kind"] == "clarification")
            if asked < MAX_CLARIFICATIONS:
                question = plan.clarification_question if isinstance(plan, TripPlan) else None
                ctx.ask(InterruptKind.CLARIFICATION, question or "Where would you like to go, and for how many days?")
            return {"planned": False, "reason": "no destination after clarification"}
        coordinators = _coordinators(plan)
        trip = plan.model_dump(include={"destination", "origin", "month", "year", "days", "travelers", "budget_usd"})
        trip["interests"] = plan.interests
        document = {
            "trip": trip,
            "coordinators": [{"name": n, **c} for n, c in coordinators.items()],
            "contingencies": plan.contingencies,
            "markdown": _plan_markdown(trip, coordinators, plan.contingencies),
        }
        artifact = ctx.save_artifact("plan", document)
        state = {
            "seq": 1,
            "trip": trip,
            "order": list(coordinators),
            "coordinators": {n: {**c, "status": "pending", "runs": 0} for n, c in coordinators.items()},
            "findings": {},
            "adjustments": {},
            "feedback": [],
            "choices": [],
            "drafts": 0,
        }
        return {"planned": True, "plan": artifact.name, "coordinators": list(coordinators), "state": state}


def _coordinators(plan: TripPlan) -> dict[str, dict[str, Any]]:
    """The model's decomposition, kept only where it names known coordinators, workers and
    dependencies; a cyclic plan falls back to the usual order. Returned in a runnable order."""
    chosen = {c.name: c for c in plan.coordinators if c.name in COORDINATORS} or {name: None for name in COORDINATORS}
    result: dict[str, dict[str, Any]] = {}
    for name, given in chosen.items():
        known = COORDINATORS[name]
        wanted = set(given.workers) if given else set()
        workers = [list(w) for w in known.workers if (f"{w[1]}:{w[2]}" if w[2] else w[1]) in wanted]
        deps = [d for d in (given.depends_on if given else known.depends_on) if d in chosen and d != name]
        result[name] = {
            "goal": (given.goal if given else "") or f"{name} for the trip",
            "depends_on": list(dict.fromkeys(deps)),
            "workers": workers or [list(w) for w in known.workers],
        }
    order = _topological(result)
    if order is None:  # a cycle: the usual dependencies, among the coordinators planned
        for name, entry in result.items():
            entry["depends_on"] = [d for d in COORDINATORS[name].depends_on if d in result]
        order = _topological(result) or list(result)
    return {name: result[name] for name in order}


def _topological(coordinators: dict[str, dict[str, Any]]) -> list[str] | None:
    order: list[str] = []
    pending = sorted(coordinators, key=lambda n: ORDER.index(n))
    while pending:
        runnable = [n for n in pending if all(d in order for d in coordinators[n]["depends_on"])]
        if not runnable:
            return None
        order.append(runnable[0])
        pending.remove(runnable[0])
    return order


def _plan_markdown(trip: dict[str, Any], coordinators: dict[str, dict[str, Any]], contingencies: list[str]) -> str:
    lines = [
        f"# Plan: {trip['days']} days in {trip['destination']} ({trip['month']}), {trip['travelers']} traveler(s)",
        f"From {trip['origin']}" + (f", budget ${trip['budget_usd']:,.0f}" if trip.get("budget_usd") else ""),
        "",
        "## Coordinators",
    ]
    for name, c in coordinators.items():
        after = f" (after {', '.join(c['depends_on'])})" if c["depends_on"] else ""
        workers = ", ".join(f"{s}:{q}" if q else s for _, s, q in c["workers"])
        lines.append(f"- **{name}**{after}: {c['goal']} — workers: {workers}")
    lines += ["", "## Contingencies", *[f"- {c}" for c in contingencies]]
    return "\n".join(lines)


# --------------------------------------------------------------------------- supervision


class Supervisor(StageHooks):
    """Start every ready coordinator: one work item per worker; none ready means draft."""

    def post(self, ctx: StageContext) -> dict[str, Any]:
        state = advance(latest(ctx.envelope))
        names = ready(state)
        if not names:
            ctx.envelope.work_items = None
            not_done = [n for n in state.get("order", []) if state["coordinators"][n]["status"] != "done"]
            return {"state": state, "next": "synthesis", "running": [], "not_done": not_done}
        items = []
        for name in names:
            coordinator = state["coordinators"][name]
            coordinator["status"] = "running"
            coordinator["runs"] += 1
            items += [{"coordinator": name, "kind": k, "source": s, "query": q} for k, s, q in coordinator["workers"]]
        ctx.envelope.work_items = items
        return {"state": state, "next": "workers", "running": names, "workers": len(items)}


class Workers(StageHooks):
    """Per item: one source searched through the tool. Join: merge, rank and save research/<coordinator>."""

    def act(self, ctx: StageContext) -> None:
        assert ctx.tools is not None and isinstance(ctx.item, dict)
        trip = trip_query(latest(ctx.envelope))
        item = ctx.item
        failures = (ctx.envelope.context.get("simulate_failures") or {}).get(item["source"], 0)
        ctx.scratch["result"] = ctx.tools.execute(
            "travel.search",
            {
                "kind": item["kind"],
                "source": item["source"],
                "query": item["query"],
                "destination": trip.destination,
                "origin": trip.origin,
                "month": trip.month,
                "days": trip.days,
                "travelers": trip.travelers,
                "simulate_failures": int(failures),
            },
        )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        if ctx.item_results is not None:
            return self._join(ctx)
        result = ctx.scratch["result"]
        data = result.data or {}
        source = f"{ctx.item['kind']}:{ctx.item['source']}"
        report = data.get("report") or {"source": source, "ok": False, "count": 0, "error": result.error, "attempts": 0}
        return {**ctx.item, "report": report, "items": data.get("items", [])}

    def _join(self, ctx: StageContext) -> dict[str, Any]:
        state = latest(ctx.envelope)
        preferences = ctx.envelope.context.get("preferences") or {}
        grouped: dict[str, list[dict[str, Any]]] = {}
        for result in ctx.item_results or []:
            grouped.setdefault(result["coordinator"], []).append(result)
        areas = [h["area"] for h in picked(state, "hotels")] + [a["area"] for a in picked(state, "activities")]
        found = {}
        for name, results in grouped.items():
            ranked = rank(
                name,
                merge(results),
                trip=state["trip"],
                adjustment=state["adjustments"].get(name, {}),
                preferences=preferences if isinstance(preferences, dict) else {},
                previous=picked(state, name),
                context={"areas": areas},
            )
            reports = [r["report"] for r in results]
            artifact = ctx.save_artifact(
                f"research/{name}",
                {
                    "coordinator": name,
                    "run": state["coordinators"][name]["runs"],
                    "trip": state["trip"],
                    "adjustment": state["adjustments"].get(name, {}),
                    "sources": reports,
                    "options": ranked.options,
                    "picks": ranked.picks,
                    "tie": ranked.tie,
                },
            )
            found[name] = {
                "options": ranked.options,
                "picks": ranked.picks,
                "tie": ranked.tie,
                "reports": reports,
                "research": artifact.name,
            }
        return {"coordinators": found}


class Reflect(StageHooks):
    """Judge each coordinator's research; a tie or low confidence becomes a question for `choose`."""

    output_model = Reflection

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        state = latest(ctx.envelope)
        research = {
            name: {
                "options": [_compact(o) for o in result["options"]],
                "ranked_picks": result["picks"],
                "possible_tie": result["tie"],
                "sources": result["reports"],
            }
            for name, result in ctx.output_of("workers").get("coordinators", {}).items()
        }
        return _messages(
            ctx, {"trip": state.get("trip"), "adjustments": state.get("adjustments"), "research": research}
        )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        state = advance(latest(ctx.envelope))
        given = {a.coordinator: a for a in ctx.llm_output.assessments} if isinstance(ctx.llm_output, Reflection) else {}
        questions, assessed = [], []
        for name, result in ctx.output_of("workers").get("coordinators", {}).items():
            single = COORDINATORS[name].single
            ids = [o["id"] for o in result["options"]]
            verdict = given.get(name)
            picks = [p for p in dict.fromkeys(verdict.picks if verdict else []) if p in ids] or result["picks"]
            tie = [t for t in dict.fromkeys(verdict.tie if verdict else []) if t in ids] if single else []
            confidence = verdict.confidence if verdict else coverage_confidence(result, single)
            state["findings"][name] = {
                "options": result["options"],
                "picks": picks[:1] if single else picks,
                "confidence": confidence,
                "concerns": verdict.concerns if verdict else [],
                "reports": result["reports"],
                "research": result["research"],
                "chosen_by": "agent",
            }
            question = _question(state, name, tie, confidence)
            if question and not questions:  # one question at a time; others keep the agent's picks
                questions.append(question)
                state["coordinators"][name]["status"] = "awaiting"
            else:
                state["coordinators"][name]["status"] = "done"
            assessed.append({"coordinator": name, "confidence": confidence, "picks": picks, "tie": tie})
        question = questions[0] if questions else None
        return {"state": state, "needs_user": question is not None, "question": question, "assessments": assessed}


def _question(state: dict[str, Any], name: str, tie: list[str], confidence: float) -> dict[str, Any] | None:
    """Low confidence first (choosing between options is moot if the search itself failed), then a tie."""
    finding = state["findings"][name]
    by_id = {o["id"]: o for o in finding["options"]}
    if confidence < CONFIDENCE_FLOOR:
        failed = [r["source"] for r in finding["reports"] if not r["ok"]]
        options = [CONTINUE, SEARCH_AGAIN] if state["coordinators"][name]["runs"] < MAX_RUNS else [CONTINUE]
        return {
            "coordinator": name,
            "reason": "low_confidence",
            "text": (
                f"I am not confident about {name} (confidence {confidence:.2f}"
                + (f"; failed: {', '.join(failed)}" if failed else "")
                + f"; {len(finding['options'])} option(s) found). Continue with what I found, or search again?"
            ),
            "options": options,
            "ids": {},
            "details": [_compact(o) for o in finding["options"]],
        }
    if len(tie) >= 2:
        labels = {label(by_id[i]): i for i in tie}
        return {
            "coordinator": name,
            "reason": "tie",
            "text": f"These {name} are equally good: " + " or ".join(labels) + ". Which do you prefer?",
            "options": list(labels),
            "ids": labels,
            "details": [by_id[i] for i in tie],
        }
    return None


class Choose(StageHooks):
    """Ask the question reflect raised (CHOICE); the answer settles that coordinator."""

    def pre(self, ctx: StageContext) -> None:
        question = ctx.output_of("reflect").get("question")
        if ctx.resume is None and question:
            ctx.ask(
                InterruptKind.CHOICE,
                question["text"],
                options=question["options"],
                data={
                    "coordinator": question["coordinator"],
                    "reason": question["reason"],
                    "options": question["details"],
                },
            )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        state = advance(latest(ctx.envelope))
        question = ctx.output_of("reflect").get("question") or {}
        name = question.get("coordinator")
        if name not in state.get("coordinators", {}):
            return {"state": state, "coordinator": None}
        answer = ctx.resume.decision if ctx.resume else None
        finding = state["findings"][name]
        status = "done"
        if question["reason"] == "tie":
            chosen = question["ids"].get(answer) or finding["picks"][0]
            finding.update(picks=[chosen], chosen_by="traveler")
            state["choices"].append(
                {
                    "coordinator": name,
                    "picked": chosen,
                    "label": answer,
                    "over": [i for i in question["ids"].values() if i != chosen],
                }
            )
        elif answer == SEARCH_AGAIN:
            status = "redo"
        state["coordinators"][name]["status"] = status
        return {"state": state, "coordinator": name, "answer": answer, "status": status}


# --------------------------------------------------------------------------- drafts and review


class Synthesis(StageHooks):
    """Write drafts/itinerary_v(N+1) from what the coordinators settled."""

    output_model = Itinerary

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        state = latest(ctx.envelope)
        selected = {name: [_compact(o) for o in picked(state, name)] for name in state.get("order", [])}
        previous = state.get("last_draft")
        return _messages(
            ctx,
            {
                "trip": state.get("trip"),
                "selected": selected,
                "feedback_so_far": state.get("feedback"),
                "previous_draft_days": previous and previous["days"],
            },
        )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        state = advance(latest(ctx.envelope))
        allowed = {o["id"] for name in ("activities", "restaurants") for o in picked(state, name)}
        written = ctx.llm_output if isinstance(ctx.llm_output, Itinerary) else None
        days, unknown = [], []
        for day in written.days if written else []:
            unknown += [i for i in day.items if i not in allowed]
            days.append({**day.model_dump(), "items": [i for i in day.items if i in allowed]})
        if unknown:
            ctx.envelope.record_error("synthesis", "unknown_option", f"dropped ids no coordinator found: {unknown}")
        if not any(day["items"] for day in days):
            days = layout(state)  # nothing usable from the model: the plain layout
        draft = {
            "title": written.title if written else f"{state['trip']['days']} days in {state['trip']['destination']}",
            "summary": written.summary if written else "",
            "days": days,
            "changes": written.changes if written else [],
            "version": state.get("drafts", 0) + 1,
            "trip": state["trip"],
            "cost": cost(state, days),
        }
        draft["markdown"] = render(state, draft)
        artifact = ctx.save_artifact("drafts/itinerary", draft)
        state["drafts"] = artifact.version
        state["last_draft"] = {"name": artifact.name, "version": artifact.version, "days": days}
        total, budget = draft["cost"]["total"], state["trip"].get("budget_usd")
        return {
            "state": state,
            "draft": {"name": artifact.name, "path": artifact.path, "version": artifact.version},
            "summary": draft["summary"],
            "total_usd": total,
            "over_budget": bool(budget and total > budget),
            "changes": draft["changes"],
        }


class Review(StageHooks):
    """Show the draft (AGENT_REVIEW); the answer comes back here and routes: approve or revise."""

    def pre(self, ctx: StageContext) -> None:
        if ctx.resume is not None:
            return
        drafted = ctx.output_of("synthesis")
        draft = drafted["draft"]
        over = " (over budget)" if drafted.get("over_budget") else ""
        question = (
            f"{draft['name']} is ready: {drafted['summary']} Estimated total ${drafted['total_usd']:,.0f}{over}. "
            "Approve it, or tell me what to change (e.g. 'cheaper hotel', 'too many museums, add a day trip')."
        )
        ctx.ask(
            InterruptKind.AGENT_REVIEW,
            question,
            options=["approve", "revise"],
            data={"artifact": draft, "total_usd": drafted["total_usd"], "changes": drafted.get("changes", [])},
        )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        draft = ctx.output_of("synthesis").get("draft")
        answer = ctx.resume
        if answer is None:  # only reachable if a draft was never shown
            return {"decision": "approve", "draft": draft, "comment": ""}
        text = (answer.text or "").strip()
        decision = (answer.decision or "").strip()
        if answer.approved or (answer.approved is None and decision.lower() in APPROVE):
            return {"decision": "approve", "draft": draft, "comment": text}
        return {"decision": "revise", "draft": draft, "feedback": text or decision}


class Replan(StageHooks):
    """Map the feedback to the coordinators it affects; mark only those for redo."""

    output_model = Refinement

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        state = latest(ctx.envelope)
        current = {name: [label(o) for o in picked(state, name)] for name in state.get("order", [])}
        return _messages(
            ctx,
            {
                "feedback": ctx.output_of("review").get("feedback", ""),
                "coordinators_and_current_picks": current,
                "adjustments_so_far": state.get("adjustments"),
            },
        )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        state = advance(latest(ctx.envelope))
        refinement = ctx.llm_output if isinstance(ctx.llm_output, Refinement) else None
        planned = state.get("order", [])
        redo = [n for n in dict.fromkeys(refinement.redo if refinement else []) if n in planned]
        for adjustment in refinement.adjustments if refinement else []:
            if adjustment.coordinator in redo:
                _fold(state["adjustments"].setdefault(adjustment.coordinator, {}), adjustment.model_dump())
        for name in redo:
            state["coordinators"][name]["status"] = "redo"
        understood = refinement.understood if refinement else ""
        feedback = ctx.output_of("review").get("feedback", "")
        state["feedback"].append(
            {
                "round": len(state["feedback"]) + 1,
                "text": feedback,
                "redo": redo,
                "understood": understood,
                "draft": (state.get("last_draft") or {}).get("name"),
            }
        )
        return {"state": state, "redo": redo, "understood": understood}


def _fold(current: dict[str, Any], new: dict[str, Any]) -> None:
    """Adjustments accumulate over rounds; the newest word wins ('more museums' undoes 'fewer')."""
    current["cheaper"] = bool(current.get("cheaper") or new.get("cheaper"))
    for key, opposite in (("fewer", "more"), ("more", "fewer")):
        added = new.get(key, [])
        current[opposite] = [c for c in current.get(opposite, []) if c not in added]
        current[key] = list(dict.fromkeys([*current.get(key, []), *added]))
    current["require"] = list(dict.fromkeys([*current.get("require", []), *new.get("require", [])]))
    if new.get("note"):
        current.setdefault("notes", []).append(new["note"])


# --------------------------------------------------------------------------- the end


class Complete(StageHooks):
    """The final itinerary (approved, or the latest draft when a limit ended the reviews) and learnings."""

    def post(self, ctx: StageContext) -> dict[str, Any]:
        envelope = ctx.envelope
        state = latest(envelope)
        approved = ctx.output_of("review").get("decision") == "approve" and envelope.terminal_reason is None
        learned = learnings(state, approved)
        last = state.get("last_draft")
        if not last or ctx.artifacts is None:
            if not state:  # the planner gave up: say so rather than "completed"
                envelope.terminal_reason = envelope.terminal_reason or "no_destination"
            reason = "I could not tell where you want to go." if not state else "no itinerary was drafted."
            return {"answer": f"No itinerary: {reason}", "approved": False, "final": None, "learnings": learned}
        draft = ctx.artifacts.get(envelope.mission_id, "drafts/itinerary", last["version"]).content
        limit = envelope.terminal_reason or ""
        final = None
        notes = []
        if approved or limit.startswith(("edge_limit:", "max_")):
            status = "approved" if approved else f"not approved: {limit}"
            final = ctx.save_artifact("final", {**draft, "status": status, "from": last["name"]}).name
        if limit.startswith("edge_limit:"):
            notes.append(f"The review limit was reached: {last['name']} is the final version.")
        elif limit:
            notes.append(f"The mission stopped early ({limit}): {last['name']} is the latest draft.")
        review = ctx.output_of("review")
        if limit and review.get("decision") == "revise":  # a review is always of the latest draft
            notes.append(f'Your last request ("{review.get("feedback", "")}") was not applied.')
        if "failure" in ctx.scratch:  # the failure path: whatever went wrong, the latest draft is still worth having
            reason = ctx.scratch["failure"].get("reason", "an error")
            notes.append(f"The mission ended on {reason}: {last['name']} is the latest draft.")
        answer = "\n\n".join([draft["markdown"], *notes])
        failed = sorted({r["source"] for f in state.get("findings", {}).values() for r in f["reports"] if not r["ok"]})
        return {
            "answer": answer,
            "approved": approved,
            "final": final,
            "draft": last["name"],
            "total_usd": draft["cost"]["total"],
            "failed_sources": failed,
            "learnings": learned,
        }


def learnings(state: dict[str, Any], approved: bool) -> dict[str, Any]:
    """What the traveler liked (kept as first proposed, or chose) and changed, for the feedback
    mechanism to turn into preferences."""
    redone = {name for round_ in state.get("feedback", []) for name in round_["redo"]}
    liked = [
        f"{name}: " + "; ".join(label(o) for o in picked(state, name))
        for name in state.get("order", [])
        if name not in redone and picked(state, name)
    ]
    liked += [
        f"chose {c['label']}" + (f" over {', '.join(c['over'])}" if c["over"] else "") for c in state.get("choices", [])
    ]
    changed = [
        f'round {r["round"]}: "{r["text"]}" -> {r["understood"] or "no change understood"}'
        f" (re-ran {', '.join(r['redo']) or 'nothing'})"
        for r in state.get("feedback", [])
    ]
    adjustments = state.get("adjustments", {})
    preferences: dict[str, Any] = {}
    likes = sorted({c for a in adjustments.values() for c in a.get("more", [])})
    fewer = sorted({c for a in adjustments.values() for c in a.get("fewer", [])})
    if likes:
        preferences["likes"] = likes
    if fewer:
        preferences["less_of"] = fewer
    if any(a.get("cheaper") for a in adjustments.values()):
        preferences["budget"] = "lower"
    requires = {r for a in adjustments.values() for r in a.get("require", [])}
    if "vegetarian" in requires:
        preferences["dietary_restrictions"] = ["vegetarian"]
    if "direct" in requires:
        preferences["direct_flights"] = True
    return {
        "approved": approved,
        "drafts": state.get("drafts", 0),
        "rounds": len(state.get("feedback", [])),
        "liked": liked,
        "changed": changed,
        "preferences": preferences,
    }
