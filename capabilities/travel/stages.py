"""The travel stages, typed (see capability.toml for the graph).

The trip's state (state.TripState) is the mission's: the stages that change it replace it with
ctx.update_state. Every model answer is checked against what the coordinators really found: a
plan may only name known coordinators and sources, a reflection and an itinerary only option ids
the workers returned. Costs and versions are computed here, never taken from the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from capabilities.travel.connectors import Restaurant
from capabilities.travel.itinerary import cost, layout, render
from capabilities.travel.models import (
    Assessed,
    Chosen,
    Dined,
    DiningShortlist,
    Drafted,
    DraftRef,
    Itinerary,
    Learnings,
    Outcome,
    Planned,
    Question,
    Refinement,
    Reflected,
    Reflection,
    Replanned,
    Reviewed,
    Supervised,
    TripPlan,
    WorkerResult,
    WorkItem,
)
from capabilities.travel.ranking import merge, rank
from capabilities.travel.state import (
    CONFIDENCE_FLOOR,
    COORDINATORS,
    MAX_RUNS,
    ORDER,
    Choice,
    Finding,
    LastDraft,
    Round,
    Run,
    Trip,
    TripState,
    Tuning,
    coverage_confidence,
    label,
)
from missions.core import approvals
from missions.core.capability.registry import Ctx, stage
from missions.core.errors import DelegationFailed
from missions.core.mission.envelope import InterruptKind

SEARCH_AGAIN, CONTINUE = "search again", "continue"
MAX_CLARIFICATIONS = 2
DINNER_CEILING_USD = 60.0  # per person, for the dining sub-mission; "cheaper" feedback lowers it
DINNER_RADIUS_KM = 8.0
WHERE = "Where would you like to go, and for how many days?"


def _compact(option: dict[str, Any]) -> dict[str, Any]:
    return {"id": option["id"], "label": label(option), "score": option.get("score")}


def pending_notes(ctx: Ctx, state: TripState) -> list[dict[str, str]]:
    """Notes the traveler sent while the mission ran (missions.core.mission.notes) that no round applied yet."""
    applied = state.applied_notes()
    return [
        {"note_id": str(n["note_id"]), "text": str(n["text"])}
        for n in ctx.context.get("notes") or []
        if isinstance(n, dict) and n.get("note_id") and n["note_id"] not in applied
    ]


def goal_text(goal: str, clarifications: Sequence[str]) -> str:
    """The goal and the clarifications the traveler gave."""
    return " ".join([goal, *[text for text in clarifications if text]]).strip()


# --------------------------------------------------------------------------- planning


@stage
def planner(ctx: Ctx) -> Planned:
    """Decompose the goal into coordinators with dependencies; the plan is the `plan` artifact."""
    known = {
        c.name: {
            # a delegated coordinator has no workers for the plan to name: its sub-mission does the research
            **({"done_by": f"a {c.delegate_to} sub-mission"} if c.delegate_to else {}),
            **({"workers": [f"{s}:{q}" if q else s for _, s, q in c.workers]} if c.workers else {}),
            "usually_after": list(c.depends_on),
        }
        for c in COORDINATORS.values()
    }
    defaults = {key: ctx.context.get(key) for key in ("origin", "days", "travelers")}
    said: list[str] = []  # one model call per round; a resumed attempt replays the rounds before it
    plan = ctx.think(TripPlan, goal_and_clarifications=ctx.goal, defaults=defaults, known_coordinators=known)
    while not plan.destination and len(said) < MAX_CLARIFICATIONS:
        said.append(ctx.ask(InterruptKind.CLARIFICATION, plan.clarification_question or WHERE).text or "")
        plan = ctx.think(
            TripPlan, goal_and_clarifications=goal_text(ctx.goal, said), defaults=defaults, known_coordinators=known
        )
    if not plan.destination:
        return Planned(planned=False, reason="no destination after clarification")
    runs = _coordinators(plan)
    trip = Trip.model_validate(plan.model_dump(include=set(Trip.model_fields)))
    planned = [{"name": name, **run.model_dump(mode="json", exclude={"status", "runs"})} for name, run in runs.items()]
    document = {
        "trip": trip.model_dump(),
        "coordinators": planned,
        "contingencies": plan.contingencies,
        "markdown": _plan_markdown(trip, runs, plan.contingencies),
    }
    artifact = ctx.save_artifact("plan", document)
    ctx.update_state(TripState(trip=trip, order=list(runs), coordinators=runs))
    return Planned(planned=True, plan=artifact.name, coordinators=list(runs))


def _coordinators(plan: TripPlan) -> dict[str, Run]:
    """The model's decomposition, kept only where it names known coordinators, workers and
    dependencies; a cyclic plan falls back to the usual order. Returned in a runnable order."""
    given = {c.name: c for c in plan.coordinators if c.name in COORDINATORS}
    result: dict[str, Run] = {}
    for name in given or COORDINATORS:
        known, asked = COORDINATORS[name], given.get(name)
        wanted = set(asked.workers) if asked else set()
        workers = [w for w in known.workers if (f"{w[1]}:{w[2]}" if w[2] else w[1]) in wanted]
        deps = [d for d in (asked.depends_on if asked else known.depends_on) if d in (given or COORDINATORS)]
        result[name] = Run(
            goal=(asked.goal if asked else "") or f"{name} for the trip",
            depends_on=list(dict.fromkeys(d for d in deps if d != name)),
            workers=workers or list(known.workers),
        )
    order = _topological(result)
    if order is None:  # a cycle: the usual dependencies, among the coordinators planned
        for name, run in result.items():
            run.depends_on = [d for d in COORDINATORS[name].depends_on if d in result]
        order = _topological(result) or list(result)
    return {name: result[name] for name in order}


def _topological(runs: dict[str, Run]) -> list[str] | None:
    order: list[str] = []
    pending = sorted(runs, key=ORDER.index)
    while pending:
        runnable = [n for n in pending if all(d in order for d in runs[n].depends_on)]
        if not runnable:
            return None
        order.append(runnable[0])
        pending.remove(runnable[0])
    return order


def _plan_markdown(trip: Trip, runs: dict[str, Run], contingencies: list[str]) -> str:
    lines = [
        f"# Plan: {trip.days} days in {trip.destination} ({trip.month}), {trip.travelers} traveler(s)",
        f"From {trip.origin}" + (f", budget ${trip.budget_usd:,.0f}" if trip.budget_usd else ""),
        "",
        "## Coordinators",
    ]
    for name, run in runs.items():
        after = f" (after {', '.join(run.depends_on)})" if run.depends_on else ""
        delegate = COORDINATORS[name].delegate_to
        workers = ", ".join(f"{s}:{q}" if q else s for _, s, q in run.workers)
        doer = f"a {delegate} sub-mission" if delegate else f"workers: {workers}"
        lines.append(f"- **{name}**{after}: {run.goal} — {doer}")
    lines += ["", "## Contingencies", *[f"- {c}" for c in contingencies]]
    return "\n".join(lines)


# --------------------------------------------------------------------------- supervision and research


@stage
def supervisor(ctx: Ctx, state: TripState) -> Supervised:
    """Start every ready coordinator: one work item per worker; none ready means draft. A note the traveler
    sent meanwhile goes to replan first, so the coordinators it is about run (again) with it."""
    notes = pending_notes(ctx, state)
    if notes:
        return Supervised(next="replan", running=[], notes=[n["text"] for n in notes])
    names = state.ready()
    if not names:
        not_done = [n for n in state.order if state.coordinators[n].status != "done"]
        return Supervised(next="synthesis", running=[], not_done=not_done)
    searched = [name for name in names if not COORDINATORS[name].delegate_to]
    if not searched:  # only the delegated coordinator (restaurants) is ready: its sub-mission does the research
        run = state.coordinators[names[0]]
        run.status, run.runs = "running", run.runs + 1
        ctx.update_state(state)
        return Supervised(next="dinners", running=names[:1])
    items = []
    for name in searched:
        run = state.coordinators[name]
        run.status, run.runs = "running", run.runs + 1
        items += [WorkItem(coordinator=name, kind=k, source=s, query=q).model_dump() for k, s, q in run.workers]
    ctx.fan_out(items)
    ctx.update_state(state)
    return Supervised(next="workers", running=searched, workers=len(items))


@stage
def workers(ctx: Ctx, item: dict[str, Any], state: TripState) -> WorkerResult:
    """One source searched through the tool (a failed source is reported, not raised)."""
    work = WorkItem.model_validate(item)
    failures = int((ctx.context.get("simulate_failures") or {}).get(work.source, 0))
    query = {**work.model_dump(exclude={"coordinator"}), **asdict(state.trip.query()), "simulate_failures": failures}
    result = ctx.tools.execute("travel.search", query)
    data = result.data or {}
    failed = {"source": f"{work.kind}:{work.source}", "ok": False, "count": 0, "error": result.error, "attempts": 0}
    return WorkerResult(**work.model_dump(), report=data.get("report") or failed, items=data.get("items", []))


def dinner_request(state: TripState) -> tuple[str, dict[str, Any]]:
    """What the dining sub-mission is asked: a dinner for every night but the last, in the destination, as
    the traveler's feedback tuned it (vegetarian, cheaper), as a shortlist rather than a question."""
    trip, tuning = state.trip, state.tuning("restaurants")
    nights = max(1, trip.days - 1)
    diets = [d for d in ("vegetarian", "vegan") if d in tuning.get("require", [])]
    goal = f"Dinner for {trip.travelers} in {trip.destination}" + (f", {' and '.join(diets)}" if diets else "")
    context = {
        "city": trip.destination,
        "shortlist": nights,
        "price_ceiling_per_person": DINNER_CEILING_USD * (0.6 if tuning.get("cheaper") else 1.0),
        "max_distance_km": DINNER_RADIUS_KM,
    }
    return f"{goal}: {nights} dinner(s) on a {trip.days}-day trip", context


@stage
def dinners(ctx: Ctx, state: TripState) -> Dined:
    """The restaurants coordinator, delegated: a `dining` sub-mission (its own mission, linked to this one)
    searches and ranks; its shortlist is this trip's dinners. A sub-mission that fails or is refused leaves
    the trip without dinners and says why, rather than failing the trip."""
    name, delegate = "restaurants", COORDINATORS["restaurants"].delegate_to or "dining"
    goal, context = dinner_request(state)
    failed: str | None = None
    try:
        found = ctx.delegate(delegate, goal, DiningShortlist, context=context)
    except DelegationFailed as exc:
        found, failed = DiningShortlist(), f"{exc.status}: {exc.reason}"
    options = [Restaurant.from_dining(o).to_dict() for o in found.options]
    reports = [{**r, "source": f"{delegate}:{r.get('source')}"} for r in found.sources if isinstance(r, dict)] or [
        {"source": delegate, "ok": failed is None, "count": len(options), "error": failed, "attempts": 1}
    ]
    artifact = ctx.save_artifact(
        f"research/{name}",
        {
            "coordinator": name,
            "run": state.coordinators[name].runs,
            "delegated_to": delegate,
            "goal": goal,
            "context": context,
            "sources": reports,
            "options": options,
            "failed": failed,
            "summary": found.answer,
        },
    )
    picks = [o["id"] for o in options[: max(1, state.trip.days - 1)]]
    answered = sum(1 for r in reports if r.get("ok")) / len(reports)
    state.findings[name] = Finding(
        options=options,
        picks=picks,
        confidence=round(0.9 * answered + 0.1, 2) if options else 0.0,
        concerns=[f"the {delegate} sub-mission {failed}"] if failed else [],
        reports=reports,
        research=artifact.name,
    )
    state.coordinators[name].status = "done"
    ctx.update_state(state)
    return Dined(delegated_to=delegate, goal=goal, options=len(options), picks=picks, failed=failed)


@dataclass(frozen=True)
class Research:
    """A coordinator's ranked shortlist from its workers, saved as research/<coordinator>."""

    options: list[dict[str, Any]]
    picks: list[str]
    tie: list[str]
    reports: list[dict[str, Any]]
    artifact: str


def _research(ctx: Ctx, state: TripState, items: list[WorkerResult]) -> dict[str, Research]:
    """The join of the workers: merge each coordinator's results, rank them, save the research."""
    preferences = ctx.context.get("preferences") or {}
    grouped: dict[str, list[WorkerResult]] = {}
    for result in items:
        grouped.setdefault(result.coordinator, []).append(result)
    found = {}
    for name, results in grouped.items():
        ranked = rank(
            name,
            merge([r.model_dump() for r in results]),
            trip=state.trip.model_dump(),
            adjustment=state.tuning(name),
            preferences=dict(preferences) if isinstance(preferences, dict) else {},
            previous=state.picked(name),
        )
        reports = [r.report for r in results]
        artifact = ctx.save_artifact(
            f"research/{name}",
            {
                "coordinator": name,
                "run": state.coordinators[name].runs,
                "trip": state.trip.model_dump(),
                "adjustment": state.tuning(name),
                "sources": reports,
                **asdict(ranked),  # options, picks, tie
            },
        )
        found[name] = Research(ranked.options, ranked.picks, ranked.tie, reports, artifact.name)
    return found


@stage
def reflect(ctx: Ctx, state: TripState, items: list[WorkerResult]) -> Reflected:
    """Judge each coordinator's research; a tie or low confidence becomes a question for `choose`."""
    found = _research(ctx, state, items)
    research = {
        name: {
            "options": [_compact(o) for o in r.options],
            "ranked_picks": r.picks,
            "possible_tie": r.tie,
            "sources": r.reports,
        }
        for name, r in found.items()
    }
    judged = ctx.think(Reflection, trip=state.trip, adjustments=state.adjustments, research=research)
    given = {a.coordinator: a for a in judged.assessments}
    question: Question | None = None
    assessed = []
    for name, r in found.items():
        single = COORDINATORS[name].single
        ids = [o["id"] for o in r.options]
        verdict = given.get(name)
        picks = [p for p in dict.fromkeys(verdict.picks if verdict else []) if p in ids] or r.picks
        tie = [t for t in dict.fromkeys(verdict.tie if verdict else []) if t in ids] if single else []
        confidence = verdict.confidence if verdict else coverage_confidence(r.reports, len(ids), len(r.picks), single)
        state.findings[name] = Finding(
            options=r.options,
            picks=picks[:1] if single else picks,
            confidence=confidence,
            concerns=verdict.concerns if verdict else [],
            reports=r.reports,
            research=r.artifact,
        )
        asking = _question(state, name, tie, confidence) if question is None else None
        question = question or asking  # one question at a time; others keep the agent's picks
        state.coordinators[name].status = "awaiting" if asking else "done"
        assessed.append(Assessed(coordinator=name, confidence=confidence, picks=picks, tie=tie))
    ctx.update_state(state)
    return Reflected(needs_user=question is not None, question=question, assessments=assessed)


def _question(state: TripState, name: str, tie: list[str], confidence: float) -> Question | None:
    """Low confidence first (choosing between options is moot if the search itself failed), then a tie."""
    finding = state.findings[name]
    by_id = {o["id"]: o for o in finding.options}
    if confidence < CONFIDENCE_FLOOR:
        failed = [r["source"] for r in finding.reports if not r["ok"]]
        return Question(
            coordinator=name,
            reason="low_confidence",
            text=(
                f"I am not confident about {name} (confidence {confidence:.2f}"
                + (f"; failed: {', '.join(failed)}" if failed else "")
                + f"; {len(finding.options)} option(s) found). Continue with what I found, or search again?"
            ),
            options=[CONTINUE, SEARCH_AGAIN] if state.coordinators[name].runs < MAX_RUNS else [CONTINUE],
            ids={},
            details=[_compact(o) for o in finding.options],
        )
    if len(tie) >= 2:
        labels = {label(by_id[i]): i for i in tie}
        return Question(
            coordinator=name,
            reason="tie",
            text=f"These {name} are equally good: " + " or ".join(labels) + ". Which do you prefer?",
            options=list(labels),
            ids=labels,
            details=[by_id[i] for i in tie],
        )
    return None


@stage
def choose(ctx: Ctx, state: TripState, reflect: Reflected) -> Chosen:
    """Ask the question reflect raised (CHOICE); the answer settles that coordinator."""
    question = reflect.question
    if question is None or question.coordinator not in state.coordinators:
        return Chosen()
    data = {"coordinator": question.coordinator, "reason": question.reason, "options": question.details}
    answer = ctx.ask(InterruptKind.CHOICE, question.text, options=question.options, data=data).decision
    name, finding = question.coordinator, state.findings[question.coordinator]
    if question.reason == "tie":
        chosen = question.ids.get(answer or "") or finding.picks[0]
        finding.picks, finding.chosen_by = [chosen], "traveler"
        over = [i for i in question.ids.values() if i != chosen]
        state.choices.append(Choice(coordinator=name, picked=chosen, label=answer, over=over))
    run = state.coordinators[name]
    run.status = "redo" if question.reason != "tie" and answer == SEARCH_AGAIN else "done"
    ctx.update_state(state)
    return Chosen(coordinator=name, answer=answer, status=run.status)


# --------------------------------------------------------------------------- drafts and review


@stage
def synthesis(ctx: Ctx, state: TripState) -> Drafted:
    """Write drafts/itinerary_v(N+1) from what the coordinators settled."""
    last = state.last_draft
    by_id = state.options()
    names = {i: by_id.get(i, {}).get("name", i) for day in last.days for i in day.items} if last else {}
    previous = {"days": last.days, "names": names} if last else None
    written = ctx.think(
        Itinerary,
        trip=state.trip,
        selected={name: state.picked(name) for name in state.order},
        feedback_so_far=state.feedback,
        previous_draft=previous,
    )
    allowed = {o["id"] for name in ("activities", "restaurants") for o in state.picked(name)}
    unknown = [i for day in written.days for i in day.items if i not in allowed]
    days = [day.model_copy(update={"items": [i for i in day.items if i in allowed]}) for day in written.days]
    if unknown:
        ctx.report("unknown_option", f"dropped ids no coordinator found: {unknown}")
    if not any(day.items for day in days):  # nothing usable from the model: the plain layout
        days = layout(state.trip.days, state.picked("activities"), state.picked("restaurants"))
    draft: dict[str, Any] = {
        "title": written.title,
        "summary": written.summary,
        "days": [day.model_dump() for day in days],
        "changes": written.changes,
        "version": state.drafts + 1,
        "trip": state.trip.model_dump(),
        "cost": cost(state, days),
    }
    draft["markdown"] = render(state, draft)
    artifact = ctx.save_artifact("drafts/itinerary", draft)
    state.drafts = artifact.version
    state.last_draft = LastDraft(name=artifact.name, version=artifact.version, days=days)
    ctx.update_state(state)
    total, budget = draft["cost"]["total"], state.trip.budget_usd
    return Drafted(
        draft=DraftRef(name=artifact.name, path=artifact.path, version=artifact.version),
        summary=written.summary,
        total_usd=total,
        over_budget=bool(budget and total > budget),
        changes=written.changes,
    )


@stage
def review(ctx: Ctx, state: TripState, synthesis: Drafted) -> Reviewed:
    """Show the draft (AGENT_REVIEW); the answer comes back here and routes: approve or revise. A draft that
    notes sent while it was written do not reflect yet is revised before the traveler is asked."""
    draft = synthesis.draft
    if ctx.answer is None and pending_notes(ctx, state):  # resumed with the answer: that is what counts
        return Reviewed(decision="revise", draft=draft, by_notes=True)
    over = " (over budget)" if synthesis.over_budget else ""
    answer = ctx.ask(
        InterruptKind.AGENT_REVIEW,
        f"{draft.name} is ready: {synthesis.summary} Estimated total ${synthesis.total_usd:,.0f}{over}. "
        "Approve it, or tell me what to change (e.g. 'cheaper hotel', 'too many museums, add a day trip').",
        options=["approve", "revise"],
        data={"artifact": draft.model_dump(), "total_usd": synthesis.total_usd, "changes": synthesis.changes},
    )
    text, decision = (answer.text or "").strip(), (answer.decision or "").strip()
    if answer.approved or (answer.approved is None and approvals.verdict(decision) is True):
        return Reviewed(decision="approve", draft=draft, comment=text)
    return Reviewed(decision="revise", draft=draft, feedback=text or decision)


@stage
def replan(ctx: Ctx, state: TripState, review: Reviewed | None) -> Replanned:
    """Map the feedback (the traveler's review of the latest draft, the notes they sent meanwhile, or both)
    to the coordinators it affects; mark only those for redo."""
    reviewed = (
        review is not None
        and review.decision == "revise"
        and not review.by_notes
        and not state.review_applied(review.draft.name)
    )
    notes = pending_notes(ctx, state)
    said = [review.feedback] if reviewed and review is not None and review.feedback else []
    feedback = "; ".join([*said, *(n["text"] for n in notes)])
    refinement = ctx.think(
        Refinement,
        feedback=feedback,
        coordinators_and_current_picks={name: [label(o) for o in state.picked(name)] for name in state.order},
        adjustments_so_far=state.adjustments,
    )
    redo = [n for n in dict.fromkeys(refinement.redo) if n in state.order]
    for adjustment in refinement.adjustments:
        if adjustment.coordinator in redo:
            name = adjustment.coordinator
            state.adjustments[name] = state.adjustments.get(name, Tuning()).fold(adjustment)
    for name in redo:
        state.coordinators[name].status = "redo"
    state.feedback.append(
        Round(
            round=len(state.feedback) + 1,
            text=feedback,
            redo=redo,
            understood=refinement.understood,
            draft=state.last_draft.name if state.last_draft else None,
            reviewed=reviewed,
            notes=[n["note_id"] for n in notes],
        )
    )
    ctx.update_state(state)
    return Replanned(redo=redo, understood=refinement.understood, notes=[n["text"] for n in notes])


# --------------------------------------------------------------------------- the end


@stage
def complete(ctx: Ctx, state: TripState | None, review: Reviewed | None) -> Outcome:
    """The final itinerary (approved, or the latest draft when a limit ended the reviews) and learnings.
    Also the failure path's final stage: then there may be no state, or no draft."""
    approved = review is not None and review.decision == "approve" and ctx.terminal_reason is None
    learned = learnings(state, approved)
    last = state.last_draft if state else None
    if state is None or last is None:
        if state is None:  # the planner gave up: say so rather than "completed"
            ctx.end_reason("no_destination")
        reason = "I could not tell where you want to go." if state is None else "no itinerary was drafted."
        return Outcome(answer=f"No itinerary: {reason}", approved=False, final=None, learnings=learned)
    draft = ctx.artifact("drafts/itinerary", last.version)
    limit = ctx.terminal_reason or ""
    final = None
    notes = []
    if approved or limit.startswith(("edge_limit:", "max_")):
        status = "approved" if approved else f"not approved: {limit}"
        final = ctx.save_artifact("final", {**draft, "status": status, "from": last.name}).name
    if limit.startswith("edge_limit:"):
        notes.append(f"The review limit was reached: {last.name} is the final version.")
    elif limit:
        notes.append(f"The mission stopped early ({limit}): {last.name} is the latest draft.")
    if limit and review is not None and review.decision == "revise":  # a review is always of the latest draft
        notes.append(f'Your last request ("{review.feedback or "your notes"}") was not applied.')
    unapplied = [n["text"] for n in pending_notes(ctx, state)]
    if unapplied:  # sent while the last draft waited for review, and the traveler approved it as shown
        notes.append(f"Not applied, as {last.name} was final: your notes {unapplied}.")
    if ctx.failure is not None:  # whatever went wrong, the latest draft is still worth having
        notes.append(f"The mission ended on {ctx.failure.get('reason', 'an error')}: {last.name} is the latest draft.")
    return Outcome(
        answer="\n\n".join([draft["markdown"], *notes]),
        approved=approved,
        final=final,
        draft=last.name,
        total_usd=draft["cost"]["total"],
        failed_sources=sorted(set(state.failed_sources())),
        learnings=learned,
    )


def learnings(state: TripState | None, approved: bool) -> Learnings:
    """What the traveler liked (kept as first proposed, or chose) and changed, for the feedback
    mechanism to turn into preferences."""
    if state is None:
        return Learnings(approved=approved, drafts=0, rounds=0, liked=[], changed=[], preferences={})
    redone = {name for round_ in state.feedback for name in round_.redo}
    liked = [
        f"{name}: " + "; ".join(label(o) for o in state.picked(name))
        for name in state.order
        if name not in redone and state.picked(name)
    ]
    liked += [f"chose {c.label}" + (f" over {', '.join(c.over)}" if c.over else "") for c in state.choices]
    changed = [
        f'round {r.round}: "{r.text}" -> {r.understood or "no change understood"}'
        f" (re-ran {', '.join(r.redo) or 'nothing'})"
        for r in state.feedback
    ]
    tunings = state.adjustments.values()
    preferences: dict[str, Any] = {}
    likes = sorted({c for t in tunings for c in t.more})
    fewer = sorted({c for t in tunings for c in t.fewer})
    if likes:
        preferences["likes"] = likes
    if fewer:
        preferences["less_of"] = fewer
    if any(t.cheaper for t in tunings):
        preferences["budget"] = "lower"
    requires = {r for t in tunings for r in t.require}
    if "vegetarian" in requires:
        preferences["dietary_restrictions"] = ["vegetarian"]
    if "direct" in requires:
        preferences["direct_flights"] = True
    return Learnings(
        approved=approved,
        drafts=state.drafts,
        rounds=len(state.feedback),
        liked=liked,
        changed=changed,
        preferences=preferences,
    )
