"""The offline model of home_assistant: how it answers with no API key, from the facts a stage gave.

The architect reads the request the way a careful person would: a dashboard (drafted for the topic and
areas it names, listed, or undone), an undo, a schedule ("every night at
23:00") that becomes an automation, an action on named things ("turn on the living room lights"), a
review of automations, an analysis (energy, a fault, habits) for the team, or a question answered
from the entities the request names. Specialists write the analysis scripts of
capabilities.home_assistant.scripts; a discussion restates the conflicts.
"""

from __future__ import annotations

import re
from typing import Any

from capabilities.home_assistant.librarian import DOMAIN_WORDS
from capabilities.home_assistant.models import (
    AnalysisScript,
    ArchitectPlan,
    AutomationDraft,
    DashboardDraft,
    Discussion,
    Specialist,
)
from capabilities.home_assistant.scripts import SCRIPTS
from missions.core.llm.provider import LLMRequest

ENERGY = ("energy", "electricity", "power", "kwh", "consumption", "usage", "bill", "cost", "standby")
FAULT = (
    "disappeared",
    "unavailable",
    "missing",
    "error",
    "broken",
    "not working",
    "offline",
    "stopped",
    "failing",
    "diagnose",
    "why",
)
HABITS = ("habit", "pattern", "routine", "how often", "never", "presses", "pressed")
FILLER = frozenset(
    "turn switch on off the a an in at of my all every each daily nightly night morning evening please and "
    "to for from with now".split()
)
TIME = re.compile(r"\b(?:at\s+)?([01]?\d|2[0-3])[:.h]([0-5]\d)\b")


def offline_policy(request: LLMRequest) -> Any:
    facts = request.facts
    if request.stage == "architect":
        return architect(str(facts.get("request", "")), facts)
    if request.stage in SCRIPTS:
        return AnalysisScript(code=SCRIPTS[request.stage], explanation=f"the {request.stage} analysis of the data")
    if request.stage == "synthesis":
        return Discussion(resolution="The figures disagree; both are reported with their sources.")
    raise LookupError(f"home_assistant has no offline answer for stage '{request.stage}'")


def architect(goal: str, facts: dict[str, Any]) -> ArchitectPlan:
    text = goal.lower()
    candidates: list[dict[str, Any]] = facts.get("candidates", [])
    if re.search(r"\bdashboards?\b", text):
        return dashboard(text, facts)
    if re.search(r"\b(roll ?back|undo|revert)\b", text):
        named = [d["automation_id"] for d in facts.get("deployments", []) if _mentions(text, d.get("alias") or "")]
        return ArchitectPlan(route="rollback", automation_id=named[0] if named else None, reasoning="an undo")
    action = re.search(r"\b(turn|switch)\s+(on|off)\b", text)
    targets = _targets(text, candidates)
    when = TIME.search(text)
    if action and when and re.search(r"\b(every|each|daily|nightly|night|morning|evening)\b", text):
        service = f"{_domain(targets) or 'light'}.turn_{action.group(2)}"
        at = f"{int(when.group(1)):02d}:{when.group(2)}:00"
        draft = AutomationDraft(
            alias=f"{goal.strip().rstrip('.')[:80]}",
            description=f"Proposed from: {goal.strip()}",
            triggers=[{"trigger": "time", "at": at}],
            actions=[{"action": service, "target": {"entity_id": targets}}],
        )
        return ArchitectPlan(route="propose", entities=targets, automation=draft, reasoning=f"a schedule at {at}")
    if action:
        service = f"{_domain(targets) or 'light'}.turn_{action.group(2)}"
        return ArchitectPlan(route="control", entities=targets, service=service, reasoning="an action on the home")
    if "automation" in text and re.search(r"\b(review|check|audit|look at)\b", text):
        return ArchitectPlan(route="review", reasoning="a configuration review")
    chosen: list[Specialist] = []
    if any(w in text for w in FAULT):  # "my charger's energy data disappeared" is a fault, not an energy question
        chosen.append("diagnostic")
    elif any(w in text for w in ENERGY):
        chosen.append("energy")
    if any(w in text for w in HABITS):
        chosen.append("behavioral")
    if chosen:
        return ArchitectPlan(
            route="team",
            specialists=chosen,
            entities=[c["entity_id"] for c in candidates][:12],
            reasoning="an analysis",
        )
    if candidates:
        answer = "; ".join(
            f"{c['name']} is {c['state']}{' ' + c['unit'] if c.get('unit') else ''}" for c in candidates[:8]
        )
        return ArchitectPlan(route="answer", entities=[c["entity_id"] for c in candidates[:8]], answer=answer + ".")
    return ArchitectPlan(route="answer", answer="I found nothing in your home that the question names.")


# what a dashboard is for: its title, icon, and the device classes and domains it shows
DASHBOARD_TOPICS: tuple[tuple[tuple[str, ...], str, str, list[str], list[str]], ...] = (
    (ENERGY, "Energy", "mdi:lightning-bolt", ["energy", "power"], []),
    (
        ("climate", "temperature", "heating", "humidity"),
        "Climate",
        "mdi:thermometer",
        ["temperature", "humidity"],
        ["climate"],
    ),
    (("light", "lights", "lamp"), "Lights", "mdi:lightbulb-group", [], ["light"]),
    (
        ("security", "door", "doors", "motion", "lock"),
        "Security",
        "mdi:shield-home",
        ["door", "motion", "window"],
        ["lock"],
    ),
)


def dashboard(text: str, facts: dict[str, Any]) -> ArchitectPlan:
    """Undo a dashboard, list the dashboards, or draft one for the topic and areas the request names."""
    if re.search(r"\b(roll ?back|undo|revert|remove)\b", text):
        mine = facts.get("dashboard_deployments", [])
        named = [d["url_path"] for d in mine if _mentions(text, f"{d.get('title') or ''} {d['url_path']}")]
        return ArchitectPlan(route="dashboard_rollback", url_path=named[0] if named else None, reasoning="an undo")
    if re.search(r"\b(list|which|what)\b.*\bdashboards\b|\bmy dashboards\b", text):
        listed = facts.get("dashboards", [])
        shown = "; ".join(f"{d.get('title') or d['url_path']} (/{d['url_path']})" for d in listed)
        answer = f"Your dashboards: {shown}." if listed else "You have no dashboards besides the default one."
        return ArchitectPlan(route="answer", answer=answer, reasoning="the dashboards HA lists")
    areas = sorted(
        {c["area"] for c in facts.get("candidates", []) if c.get("area") and c["area"].replace("_", " ") in text}
    )
    for words, title, icon, classes, domains in DASHBOARD_TOPICS:
        if any(re.search(rf"\b{w}\b", text) for w in words):
            draft = DashboardDraft(title=title, icon=icon, device_classes=classes, domains=domains, areas=areas)
            return ArchitectPlan(route="dashboard", dashboard=draft, reasoning=f"a {title.lower()} dashboard")
    title = " and ".join(a.replace("_", " ") for a in areas).capitalize() or "Home"
    draft = DashboardDraft(title=title, icon="mdi:home", areas=areas, domains=[] if areas else ["light", "climate"])
    return ArchitectPlan(route="dashboard", dashboard=draft, reasoning="a dashboard of the home")


def _mentions(text: str, alias: str) -> bool:
    words = {w for w in re.findall(r"[a-z0-9]+", alias.lower()) if len(w) > 3}
    return bool(words) and len(words & set(re.findall(r"[a-z0-9]+", text))) >= min(2, len(words))


def _targets(text: str, candidates: list[dict[str, Any]]) -> list[str]:
    """The entities a request names: those of the domain it names, in the area it names."""
    domains = [d for d, words in DOMAIN_WORDS.items() if any(re.search(rf"\b{w}\b", text) for w in words)]
    areas = {c["area"] for c in candidates if c.get("area") and c["area"].replace("_", " ") in text}
    chosen = [
        c
        for c in candidates
        if (not domains or c["entity_id"].split(".")[0] in domains) and (not areas or c.get("area") in areas)
    ]
    # every word that names something must name what was chosen: "the disco ball in the attic" is not a lamp
    named = {w for w in re.findall(r"[a-z]+", text) if w not in FILLER and len(w) > 2}
    named -= {w for words in DOMAIN_WORDS.values() for phrase in words for w in phrase.split()}
    said = " ".join(f"{c['entity_id']} {c['name']} {c.get('area') or ''}" for c in chosen).lower()
    if not (domains or areas) or any(w not in said for w in named):
        return []
    return [c["entity_id"] for c in chosen]


def _domain(entities: list[str]) -> str | None:
    found = {e.split(".")[0] for e in entities}
    return found.pop() if len(found) == 1 else None
