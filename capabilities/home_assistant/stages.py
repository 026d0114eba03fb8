"""The home_assistant stages (capability.toml holds the graph):

architect -> answer | team (energy, behavioral, diagnostic in one Parallel state) -> synthesis
          | review (automations) -> team -> synthesis -> proposals -> deploy
          | propose -> proposals -> deploy | control | rollback          -> report
          | dashboard -> dashboard_deploy | dashboard_rollback (dashboards.py) -> report

Every change to the home is a write-risk tool call the user approves, seeing what it changes (the
service call, the automation's diff); an approval runs exactly that call, once.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from capabilities.home_assistant.analysis import not_gathered, specialist
from capabilities.home_assistant.automation import (
    automation_id_for,
    diff,
    referenced,
    semantic_errors,
    structural_errors,
)
from capabilities.home_assistant.dashboards import dashboard_facts, dashboard_report
from capabilities.home_assistant.librarian import HomeCatalog, candidates_for, catalog_summary
from capabilities.home_assistant.models import (
    ArchitectPlan,
    Architecture,
    Controlled,
    DashboardDeployed,
    DashboardProposal,
    DashboardRolledBack,
    Deployed,
    Discussion,
    Findings,
    Insight,
    Proposal,
    Proposals,
    Report,
    Reviewed,
    RolledBack,
    Specialist,
    Synthesis,
)
from capabilities.home_assistant.syntax import spelling_errors, written_for
from capabilities.home_assistant.tools import REFUSED
from missions.core.capability.registry import Ctx, stage
from missions.core.capability.tools import ToolResult

DEPLOYMENTS = "home_assistant.deployments"  # the user's memory: what each deployment replaced
INSIGHTS = "home_assistant.insights"  # the user's memory: insights with their evidence
MAX_CANDIDATES = 60
# a message that continues the conversation's last request rather than making a new one
FOLLOW_UP = re.compile(
    r"^\s*(and|also|what about|how about|same for|now for|then)\b|^\s*\S+(\s+\S+){0,2}\s*\?\s*$", re.I
)
# the analysis window a request names: (hours, hours back from now that it ends); "last week" is the past 7
# days, "the week before" the 7 days before them
PERIODS = (
    (re.compile(r"\b(the )?(week before|previous week)\b"), (168, 168)),
    (re.compile(r"\byesterday\b"), (24, 24)),
    (re.compile(r"\b(today|day)\b"), (24, 0)),
    (re.compile(r"\bmonth\b"), (24 * 31, 0)),
    (re.compile(r"\bweek\b"), (168, 0)),
)


def _period(*texts: str) -> tuple[int, int]:
    """The window the first text that names one asks for (the follow-up's own words first), else a week."""
    for text in texts:
        for pattern, window in PERIODS:
            if pattern.search(text.lower()):
                return window
    return 168, 0


def _request(ctx: Ctx) -> tuple[str, list[str]]:
    """The request as the architect reads it, and the entities a follow-up carries: "and last week?" after
    an energy analysis is that analysis again, over the same entities, for another period (the working
    memory of the conversation: the turn before, and the entities its answer kept in focus)."""
    conversation = ctx.context.get("conversation")
    turns = conversation.get("turns") if isinstance(conversation, dict) else None
    if not turns or not FOLLOW_UP.search(ctx.goal):
        return ctx.goal, []
    assert isinstance(conversation, dict)
    earlier = str(turns[-1].get("goal", ""))
    focus = [str(name) for name in conversation.get("focus") or [] if re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", str(name))]
    return f"{earlier} (follow-up: {ctx.goal.strip()})", focus


def _ok(result: ToolResult) -> dict[str, Any]:
    return result.data if result.status == "success" and isinstance(result.data, dict) else {}


# --------------------------------------------------------------------------- the architect


@stage
def architect(ctx: Ctx, librarian: HomeCatalog | None) -> Architecture:
    """Survey the home, then decide: answer, consult the team, review, propose, act or undo."""
    tools = ctx.tools
    surveyed = tools.execute("ha.overview", {})
    if surveyed.status != "success":  # HA down, token rejected: nothing else can work
        kind = "ha_token_rejected" if "token" in (surveyed.error or "").lower() else "ha_unreachable"
        return Architecture(route="unavailable", now="", problem=surveyed.error, problem_kind=kind)
    home = _ok(surveyed)
    request, carried = _request(ctx)
    candidates = candidates_for(request, home["entities"], librarian, MAX_CANDIDATES)
    deployments = ctx.recall(DEPLOYMENTS) or {}
    plan = ctx.think(
        ArchitectPlan,
        request=request,
        areas=home["areas"],
        domains=home["domains"],
        unavailable=home["unavailable"],
        candidates=candidates,
        deployments=[{"automation_id": k, "alias": v.get("alias")} for k, v in deployments.items()],
        **dashboard_facts(ctx, request),
    )
    known = {e["entity_id"] for e in home["entities"]}
    unknown = [e for e in plan.entities if e not in known]
    if plan.route in ("control", "propose") and (unknown or not plan.entities):
        what = ", ".join(unknown) or "no entity the request names"
        return Architecture(
            **plan.model_dump(exclude={"route"}),
            route="unavailable",
            now=home["now"],
            problem=f"this home has {what}",
            problem_kind="unknown_entity",
        )
    hours, back = _period(ctx.goal, request)
    end = (datetime.fromisoformat(home["now"]) - timedelta(hours=back)).isoformat() if back else None
    kept = [e for e in carried if e in known]
    return Architecture(
        **plan.model_dump(), now=home["now"], request=request, period_hours=hours, period_end=end, carried=kept
    )


# --------------------------------------------------------------------------- the team


def _chosen(architect: Architecture, review: Reviewed | None, name: Specialist) -> bool:
    if review is not None:  # a configuration review: the diagnostic and behavioral views of the automations
        return name in ("diagnostic", "behavioral")
    return architect.route == "team" and name in architect.specialists


@stage
def energy(ctx: Ctx, architect: Architecture, review: Reviewed | None) -> Findings:
    if not _chosen(architect, review, "energy"):
        return Findings(specialist="energy", ran=False)
    home = _ok(ctx.tools.execute("ha.overview", {}))
    meters = [e for e in home["entities"] if e["unit"] in ("kWh", "W")]
    energy_meters = [e["entity_id"] for e in meters if e["unit"] == "kWh"]
    whole = next((e for e in energy_meters if e.endswith(("home_energy", "house_energy"))), None)
    whole = whole or (energy_meters[0] if len(energy_meters) == 1 else None)  # a home with one meter: that one
    power = next((e["entity_id"] for e in meters if e["entity_id"].endswith(("home_power", "house_power"))), None)
    carried = [e for e in energy_meters if e in architect.carried]  # a follow-up: the meters analysed before
    chosen = (carried or energy_meters)[:8] + [p for p in [power] if p]
    window = {"hours": architect.period_hours, **({"end": architect.period_end} if architect.period_end else {})}
    gathered = ctx.tools.execute("ha.statistics", {"entity_ids": chosen, **window})  # any period, not 10 days
    if gathered.status != "success":  # nothing to analyse: say what Home Assistant said, run no script
        return not_gathered(ctx, "energy", "ha.statistics", gathered)
    found = _ok(gathered)
    names = {e["entity_id"]: e for e in meters}
    data = {
        "start": found.get("start"),
        "end": found.get("end"),
        "tariff": float(ctx.context.get("tariff_per_kwh", 0.30)),
        "currency": str(ctx.context.get("currency", "EUR")),
        "whole_home": whole,
        "whole_home_power": power,
        "series": {
            entity: {**series, "unit": names[entity]["unit"], "name": names[entity]["name"]}
            for entity, series in found.get("series", {}).items()
        },
    }
    return specialist(ctx, "energy", architect, data, architect.request or ctx.goal)


@stage
def diagnostic(ctx: Ctx, architect: Architecture, review: Reviewed | None) -> Findings:
    if not _chosen(architect, review, "diagnostic"):
        return Findings(specialist="diagnostic", ran=False)
    tools = ctx.tools
    home = _ok(tools.execute("ha.overview", {}))
    broken = [e for e in home["entities"] if e["state"] == "unavailable"]
    focus = set(architect.entities)
    if focus:  # what the user asked about first, then the rest of what is unavailable
        broken.sort(key=lambda e: e["entity_id"] not in focus)
    log = _ok(tools.execute("ha.error_log", {"limit": 200}))
    lines = log.get("lines", [])
    logged = " ".join(line["text"] for line in lines)
    integrations = sorted(set(re.findall(r"\[homeassistant\.components\.([a-z0-9_]+)", logged)))
    of_integration: dict[str, str] = {}
    for integration in integrations:  # which entities each integration in the log provides
        template = f"{{{{ integration_entities('{integration}') | join(',') }}}}"
        rendered = _ok(tools.execute("ha.template", {"template": template})).get("rendered", "")
        of_integration.update(dict.fromkeys([e for e in rendered.split(",") if e], integration))
    watched = [e["entity_id"] for e in broken[:12]] or ["sun.sun"]
    since = _ok(tools.execute("ha.history", {"entity_ids": watched, "hours": 168}))
    automations = _automation_targets(ctx, home, review)
    data = {
        "now": home["now"],
        "start": since.get("start"),
        "unavailable": [
            {
                "entity_id": e["entity_id"],
                "name": e["name"],
                "integration": of_integration.get(e["entity_id"]),
                "since": (since.get("series", {}).get(e["entity_id"]) or {}).get("unavailable_since")
                or e["last_changed"],
            }
            for e in broken[:12]
        ],
        "error_lines": lines,
        "automations": automations,
    }
    return specialist(ctx, "diagnostic", architect, data, architect.request or ctx.goal)


def _automation_targets(ctx: Ctx, home: dict[str, Any], review: Reviewed | None) -> list[dict[str, Any]]:
    """Each automation, the entities it acts on that are unavailable, and how often it fired this week."""
    states = {e["entity_id"]: e["state"] for e in home["entities"]}
    listed = _ok(ctx.tools.execute("ha.automations", {})).get("automations", [])
    fired: Counter[str] = Counter()
    ids = [a["entity_id"] for a in listed]
    for chunk in [ids[i : i + 12] for i in range(0, len(ids), 12)]:  # each automation's own runs, none cut off
        entries = _ok(ctx.tools.execute("ha.logbook", {"hours": 168, "entity_ids": chunk})).get("entries", [])
        fired.update(e.get("entity_id") for e in entries if str(e.get("message", "")).startswith("triggered"))
    found = []
    for automation in listed:
        if review is not None and review.targets and automation["id"] not in review.targets:
            continue
        config = (review.configs.get(automation["id"]) if review else None) or _ok(
            ctx.tools.execute("ha.automation_config", {"automation_id": automation["id"]})
        ).get("config", {})
        acting = config.get("actions", config.get("action", []))
        targets = sorted(referenced({"actions": acting})[0])  # the entities its actions act on
        found.append(
            {
                "entity_id": automation["entity_id"],
                "id": automation["id"],
                "alias": automation["alias"],
                "fired": fired.get(automation["entity_id"], 0),
                "unavailable_targets": [t for t in targets if states.get(t) == "unavailable"],
            }
        )
    return found


@stage
def behavioral(ctx: Ctx, architect: Architecture, review: Reviewed | None) -> Findings:
    if not _chosen(architect, review, "behavioral"):
        return Findings(specialist="behavioral", ran=False)
    home = _ok(ctx.tools.execute("ha.overview", {}))
    focus = architect.entities or [
        e["entity_id"] for e in home["entities"] if e["entity_id"].split(".")[0] in ("light", "button")
    ]
    window = {"hours": architect.period_hours, **({"end": architect.period_end} if architect.period_end else {})}
    gathered = ctx.tools.execute("ha.history", {"entity_ids": focus[:12], **window})
    if gathered.status != "success":
        return not_gathered(ctx, "behavioral", "ha.history", gathered)
    found = _ok(gathered)
    names = {e["entity_id"]: e["name"] for e in home["entities"]}
    data = {
        "start": found.get("start"),
        "end": found.get("end"),
        "series": {e: {**s, "name": names.get(e)} for e, s in found.get("series", {}).items()},
        "automations": _automation_targets(ctx, home, review) if review is not None else [],
    }
    return specialist(ctx, "behavioral", architect, data, architect.request or ctx.goal)


# --------------------------------------------------------------------------- synthesis and review


@stage
def synthesis(
    ctx: Ctx,
    energy: Findings,
    behavioral: Findings,
    diagnostic: Findings,
    review: Reviewed | None,
    synthesis: Synthesis | None,
) -> Synthesis:
    """Merge the team's insights; only when they disagree, ask the model (one discussion round at most)."""
    team = [f for f in (energy, behavioral, diagnostic) if f.ran]
    insights = [i for f in team for i in f.insights]
    conflicts = _conflicts(insights)
    recommendations = _recommendations(insights)
    round_ = (synthesis.round + 1) if synthesis is not None else 1
    if conflicts:
        said = ctx.think(Discussion, conflicts=conflicts, insights=[i.model_dump() for i in insights])
        recommendations += said.recommendations
        if round_ == 1:
            return Synthesis(
                decision="discuss", insights=insights, conflicts=conflicts, recommendations=recommendations
            )
    fixes = _fixes(ctx, review, insights) if review is not None else []
    return Synthesis(
        failures=[f"the {f.specialist} analysis failed: {f.error}" for f in team if f.error],
        decision="propose" if fixes else "report",
        insights=insights,
        conflicts=conflicts,
        recommendations=list(dict.fromkeys(recommendations)),
        fixes=fixes,
        round=round_,
    )


def _conflicts(insights: list[Insight]) -> list[str]:
    """Two specialists giving the same figure about the same entities more than 10% apart."""
    seen: dict[tuple[str, tuple[str, ...]], Insight] = {}
    found = []
    for insight in insights:
        for name, value in insight.figures.items():
            key = (name, tuple(sorted(insight.entities)))
            other = seen.setdefault(key, insight)
            theirs = other.figures.get(name)
            if (
                other is not insight
                and theirs is not None
                and abs(theirs - value) > 0.1 * max(abs(theirs), abs(value), 1e-9)
            ):
                found.append(
                    f"{name} for {', '.join(key[1])}: {other.specialist} says {theirs}, {insight.specialist} {value}"
                )
    return found


def _recommendations(insights: list[Insight]) -> list[str]:
    said = []
    for insight in insights:
        if insight.specialist == "diagnostic" and "unavailable" in insight.title and "log says" in insight.summary:
            said.append(f"Re-authenticate or reload the integration behind {', '.join(insight.entities)}.")
        elif insight.title.endswith("acts on nothing"):
            said.append(f"Fix or disable {insight.title.removesuffix(' acts on nothing')}: its target is unavailable.")
        elif "standby_w" in insight.figures:
            said.append(f"Look for always-on devices: {insight.figures['standby_w']:.0f} W around the clock.")
    return said


def _fixes(ctx: Ctx, review: Reviewed, insights: list[Insight]) -> list[dict[str, Any]]:
    """For each reviewed automation that acts on nothing: the same automation, disabled until its target is back."""
    fixes = []
    for automation_id, config in review.configs.items():
        if any(config.get("alias") and insight.title == f"{config['alias']} acts on nothing" for insight in insights):
            description = f"{config.get('description') or ''} Disabled: its target is unavailable.".strip()
            fixes.append(
                {"automation_id": automation_id, "config": {**config, "description": description, "enabled": False}}
            )
    return fixes


@stage
def review(ctx: Ctx, architect: Architecture) -> Reviewed:
    """The automations to review (one named, or all) and their configurations as HA holds them."""
    listed = _ok(ctx.tools.execute("ha.automations", {})).get("automations", [])
    targets = [
        a["id"] for a in listed if a["id"] and (not architect.automation_id or a["id"] == architect.automation_id)
    ]
    configs = {
        t: _ok(ctx.tools.execute("ha.automation_config", {"automation_id": t})).get("config", {}) for t in targets
    }
    return Reviewed(targets=targets, configs={k: v for k, v in configs.items() if v})


# --------------------------------------------------------------------------- proposals and changes


@stage
def proposals(ctx: Ctx, architect: Architecture, synthesis: Synthesis | None) -> Proposals:
    """Each proposed automation checked in shape and against this home; only valid ones are offered."""
    tools = ctx.tools
    home = _ok(tools.execute("ha.overview", {}))
    services = _ok(tools.execute("ha.services", {})).get("services", [])
    entities = [e["entity_id"] for e in home["entities"]]
    existing = [a["id"] for a in _ok(tools.execute("ha.automations", {})).get("automations", []) if a["id"]]
    wanted: list[tuple[str | None, dict[str, Any]]] = []
    if architect.route == "propose" and architect.automation is not None:
        wanted.append((None, architect.automation.model_dump(exclude_defaults=False)))
    wanted += [(fix["automation_id"], fix["config"]) for fix in (synthesis.fixes if synthesis else [])]
    version = home.get("version")
    made = []
    for automation_id, config in wanted:
        original = None
        if automation_id is not None:
            original = _ok(tools.execute("ha.automation_config", {"automation_id": automation_id})).get("config")
        identifier = automation_id or automation_id_for(str(config.get("alias", "automation")), existing)
        body = written_for({k: v for k, v in config.items() if k != "id"}, version)
        reasons = (
            structural_errors(body)
            or spelling_errors(body, version)
            or semantic_errors(body, entities, services, home["areas"])
        )
        checked = False
        if not reasons:  # what is approved is what this HA takes: it checks the proposal before anyone is asked
            verdict = tools.execute("ha.validate_automation", {"config": body})
            if verdict.status != "success":
                reasons = [f"Home Assistant could not check it: {verdict.error}"]
            else:
                reasons, checked = list(verdict.data["refusals"]), bool(verdict.data["checked"])
        made.append(
            Proposal(
                automation_id=identifier,
                alias=str(config.get("alias", identifier)),
                config=body,
                original={k: v for k, v in original.items() if k != "id"} if original else None,
                valid=not reasons,
                reasons=reasons,
                diff=diff(original, body, identifier),
                written_for=version,
                checked_by_home_assistant=checked and not reasons,
            )
        )
    return Proposals(ready=any(p.valid for p in made), proposals=made)


@stage
def deploy(ctx: Ctx, proposals: Proposals) -> Deployed:
    """Each valid proposal deployed once the user approves its diff (a no is kept as declined)."""
    results: dict[str, str] = {}
    for proposal in [p for p in proposals.proposals if p.valid]:
        params = {"automation_id": proposal.automation_id, "config": proposal.config, "original": proposal.original}
        done = ctx.tools.execute("ha.deploy_automation", params)
        if done.status == "success":
            results[proposal.automation_id] = "deployed"
            ctx.remember(
                DEPLOYMENTS,
                _key(proposal.automation_id),
                {
                    "automation_id": proposal.automation_id,
                    "alias": proposal.alias,
                    "deployed": proposal.config,
                    "original": proposal.original,
                },
            )
        elif done.status == "denied":
            results[proposal.automation_id] = "declined"
        else:
            said_no = isinstance(done.data, dict) and done.data.get(REFUSED)
            results[proposal.automation_id] = f"{'refused' if said_no else 'failed'}: {done.error}"
    return Deployed(results=results)


def _change_failure(deploy: Deployed | None, control: Controlled | None, rollback: RolledBack | None) -> str | None:
    """Why an approved change did not happen, as the mission's terminal reason: HA refused the deployment
    (`deploy_refused`), or a change failed on the way (`deploy_failed`, `control_failed`, `rollback_failed`)."""
    statuses = list(deploy.results.values()) if deploy else []
    if any(status.startswith("refused") for status in statuses):
        return "deploy_refused"
    if any(status.startswith("failed") for status in statuses):
        return "deploy_failed"
    if control is not None and control.status.startswith("failed"):
        return "control_failed"
    if rollback is not None and rollback.status.startswith("failed"):
        return "rollback_failed"
    return None


def _key(automation_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", automation_id)[:64]


@stage
def control(ctx: Ctx, architect: Architecture) -> Controlled:
    """One service call on the entities the architect resolved, once the user approves it."""
    domain, _, service = (architect.service or "").partition(".")
    done = ctx.tools.execute(
        "ha.call_service", {"domain": domain, "service": service, "entity_ids": architect.entities}
    )
    status = (
        "done" if done.status == "success" else ("declined" if done.status == "denied" else f"failed: {done.error}")
    )
    return Controlled(
        service=architect.service or "", entities=architect.entities, status=status, states=_ok(done).get("states", {})
    )


@stage
def rollback(ctx: Ctx, architect: Architecture) -> RolledBack:
    """Undo a deployment this user made: restore what it replaced (remove it if it was new)."""
    deployments: dict[str, Any] = ctx.recall(DEPLOYMENTS) or {}
    chosen = deployments.get(_key(architect.automation_id or "")) or (
        list(deployments.values())[-1] if deployments and not architect.automation_id else None
    )
    if chosen is None:
        return RolledBack(automation_id=architect.automation_id, status="nothing deployed to roll back")
    params = {"automation_id": chosen["automation_id"], "deployed": chosen["deployed"], "original": chosen["original"]}
    done = ctx.tools.execute("ha.rollback_automation", params)
    if done.status == "success":
        ctx.remember(DEPLOYMENTS, _key(chosen["automation_id"]), {**chosen, "rolled_back": True})
        return RolledBack(automation_id=chosen["automation_id"], status="rolled back")
    return RolledBack(
        automation_id=chosen["automation_id"], status="declined" if done.status == "denied" else f"failed: {done.error}"
    )


# --------------------------------------------------------------------------- the report


@stage
def report(
    ctx: Ctx,
    architect: Architecture | None,
    synthesis: Synthesis | None,
    proposals: Proposals | None,
    deploy: Deployed | None,
    control: Controlled | None,
    rollback: RolledBack | None,
    dashboard: DashboardProposal | None,
    dashboard_deploy: DashboardDeployed | None,
    dashboard_rollback: DashboardRolledBack | None,
    librarian: HomeCatalog | None,
) -> Report:
    """The answer; insights kept in the user's memory with their evidence; why it stopped, if it did."""
    if architect is None and librarian is not None and librarian.route == "catalog":  # a refresh, and only that
        if librarian.problem and not librarian.refreshed:
            ctx.end_reason("ha_unreachable", failed=True)
        return Report(answer=catalog_summary(librarian), route="catalog")
    if architect is None:
        reason = ctx.failure.get("reason", "the mission failed") if ctx.failure else "the mission failed"
        return Report(answer=f"The analysis could not finish ({reason}).", route="unavailable")
    lines: list[str] = []
    insights = synthesis.insights if synthesis else []
    if architect.route == "unavailable":
        kind = architect.problem_kind or "ha_unavailable"
        # a home it could not reach is a failure; a request for what the home does not have is an answer
        ctx.end_reason(kind, failed=kind != "unknown_entity")
        lines.append(f"I could not work on your home: {architect.problem}.")
    elif architect.route == "answer":
        lines.append(architect.answer or "I found nothing to answer that with.")
    for insight in insights:
        cited = f" [{', '.join(insight.evidence)}]" if insight.evidence else ""
        lines.append(f"- {insight.summary}{cited}")
    lines += [f"Recommendation: {r}" for r in (synthesis.recommendations if synthesis else [])]
    lines += [f"({failure})" for failure in (synthesis.failures if synthesis else [])]
    for proposal in proposals.proposals if proposals else []:
        if not proposal.valid:
            lines.append(f"Proposal '{proposal.alias}' is not valid: {'; '.join(proposal.reasons)}.")
    if proposals is not None and not proposals.ready and architect.route == "propose":
        ctx.end_reason("invalid_proposal", failed=True)  # nothing the user could approve: not done
    for automation_id, status in (deploy.results if deploy else {}).items():
        lines.append(f"Automation {automation_id}: {status}.")
    if control is not None:
        after = ", ".join(f"{e} is {s}" for e, s in control.states.items())
        lines.append(f"{control.service}: {control.status}" + (f" ({after})." if after else "."))
    if rollback is not None:
        lines.append(f"Rollback of {rollback.automation_id or 'the last deployment'}: {rollback.status}.")
    designed, dashboard_failure = dashboard_report(dashboard, dashboard_deploy, dashboard_rollback)
    lines += designed
    failure = _change_failure(deploy, control, rollback) or dashboard_failure
    if failure is not None:  # the home did not change as approved: the mission failed, whatever else it did
        ctx.end_reason(failure, failed=True)
    for insight in insights:  # kept for the user, listed at GET /memory/home_assistant.insights
        stamp = (insight.period_end or architect.now or "")[:10]
        ctx.remember(INSIGHTS, _key(f"{insight.specialist}-{stamp}-{insight.title}".lower()), insight.model_dump())
    return Report(
        answer="\n".join(lines) or "Done.",
        route=architect.route,
        insights=insights,
        citations=list(dict.fromkeys(ref for i in insights for ref in i.evidence)),
        deployed=deploy.results if deploy else {},
        focus=list(dict.fromkeys([*(e for i in insights for e in i.entities), *architect.carried])),
    )
