"""The Dashboard Designer: a Lovelace dashboard proposed for a goal ("a dashboard for my energy use"),
laid out from the entities that exist, checked against them, shown as YAML and in words, deployed once the
user approves its diff, and rolled back like an automation.

architect (route dashboard) -> dashboard -> dashboard_deploy -> report
architect (route dashboard_rollback) -> dashboard_rollback -> report

The layout is deterministic, so what a person approves does not depend on how a model lays out cards:
energy meters as daily bars of their long-term statistics, power sensors as gauges and a day's history,
other measurements as history graphs by device class, a thermostat card per climate entity, everything
else as an entities card per area.
A card naming an entity the home lacks makes the dashboard invalid, with that reason, as for automations.
What each deployment replaced is kept in the user's memory (DASHBOARDS), so a later mission can undo it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from capabilities.home_assistant.automation import as_yaml, diff
from capabilities.home_assistant.models import (
    Architecture,
    DashboardDeployed,
    DashboardDraft,
    DashboardProposal,
    DashboardRolledBack,
)
from capabilities.home_assistant.tools import REFUSED
from missions.core.capability.registry import Ctx, stage
from missions.core.capability.tools import ToolResult

DASHBOARDS = "home_assistant.dashboards"  # the user's memory: what each dashboard deployment replaced
ENERGY_UNITS = ("Wh", "kWh", "MWh")
POWER_UNITS = ("W", "kW")
GAUGE_MAX = {"W": 10000, "kW": 10}
MAX_GAUGES = 4
# the cards HA's frontend has built in (a `custom:` card needs a resource the home may not have)
CARD_TYPES = frozenset(
    "alarm-panel area button calendar conditional entities entity entity-filter energy-date-selection "
    "energy-distribution energy-usage-graph gauge glance grid history-graph horizontal-stack humidifier "
    "iframe light logbook map markdown media-control picture picture-elements picture-entity picture-glance "
    "plant-status sensor shopping-list statistic statistics-graph thermostat tile todo-list vertical-stack "
    "weather-forecast".split()
)
NUMERIC_CARDS = frozenset({"gauge", "sensor", "statistic", "statistics-graph"})
SKIPPED_DOMAINS = frozenset({"automation", "script", "zone", "sun", "persistent_notification", "update"})


def _ok(result: ToolResult) -> dict[str, Any]:
    return result.data if result.status == "success" and isinstance(result.data, dict) else {}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "home"


# --------------------------------------------------------------------------- layout


def chosen(draft: DashboardDraft, entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entities a draft shows: those it names (even ones the home lacks, for the check to name), then
    those of the domains and device classes it names, in the areas it names (every one there if it names
    no domain nor class)."""
    known = {e["entity_id"]: e for e in entities}
    picked = {e: known.get(e, {"entity_id": e, "name": e}) for e in draft.entities}
    if draft.domains or draft.device_classes or (draft.areas and not draft.entities):
        for e in entities:
            domain = e["entity_id"].split(".")[0]
            kind = not (draft.domains or draft.device_classes) and domain not in SKIPPED_DOMAINS
            kind = kind or domain in draft.domains or (e.get("device_class") in draft.device_classes)
            if kind and (not draft.areas or e.get("area") in draft.areas):
                picked.setdefault(e["entity_id"], e)
    return list(picked.values())


def layout(draft: DashboardDraft, entities: list[dict[str, Any]]) -> dict[str, Any]:
    """The dashboard's configuration, as HA stores it: one view of cards for what the draft shows."""
    shown = chosen(draft, entities)
    energy = [e["entity_id"] for e in shown if e.get("unit") in ENERGY_UNITS]
    power = [e for e in shown if e.get("unit") in POWER_UNITS]
    measured: dict[str, list[str]] = defaultdict(list)
    listed: dict[str, list[str]] = defaultdict(list)
    thermostats = [e["entity_id"] for e in shown if e["entity_id"].startswith("climate.")]
    for e in shown:
        if e.get("unit") in ENERGY_UNITS or e.get("unit") in POWER_UNITS or e["entity_id"] in thermostats:
            continue
        if e.get("unit") and e["entity_id"].startswith("sensor."):
            measured[str(e.get("device_class") or e["unit"])].append(e["entity_id"])
        else:
            listed[str(e.get("area") or "")].append(e["entity_id"])
    cards: list[dict[str, Any]] = []
    for meter in power[:MAX_GAUGES]:
        maximum = GAUGE_MAX.get(str(meter["unit"]), 100)
        cards.append({"type": "gauge", "entity": meter["entity_id"], "name": meter["name"], "min": 0, "max": maximum})
    if power:
        watts = [e["entity_id"] for e in power]
        cards.append({"type": "history-graph", "title": "Power, last 24 hours", "hours_to_show": 24, "entities": watts})
    if energy:
        cards.append(
            {
                "type": "statistics-graph",
                "title": "Energy per day",
                "entities": energy,
                "stat_types": ["change"],
                "period": "day",
                "days_to_show": 7,
                "chart_type": "bar",
            }
        )
    cards += [{"type": "thermostat", "entity": entity} for entity in thermostats]
    for kind, ids in sorted(measured.items()):
        title = f"{kind.replace('_', ' ').capitalize()}, last 24 hours"
        cards.append({"type": "history-graph", "title": title, "hours_to_show": 24, "entities": ids})
    for area, ids in sorted(listed.items()):
        cards.append({"type": "entities", "title": area.replace("_", " ").capitalize() or "Other", "entities": ids})
    view = {"title": draft.title, "path": slug(draft.title), "icon": draft.icon, "cards": cards}
    return {"title": draft.title, "views": [view]}


# --------------------------------------------------------------------------- the check and the words


def _cards(cards: Any) -> Iterator[dict[str, Any]]:
    """Every card, stacks' and grids' cards included."""
    for card in cards if isinstance(cards, list) else []:
        if isinstance(card, dict):
            yield card
            yield from _cards(card.get("cards"))


def named(card: dict[str, Any]) -> list[str]:
    """The entities a card names: `entity`, and `entities` as ids or as rows with an `entity`."""
    found = [card["entity"]] if isinstance(card.get("entity"), str) else []
    for row in card.get("entities") or []:
        entity = row if isinstance(row, str) else row.get("entity") if isinstance(row, dict) else None
        if isinstance(entity, str):
            found.append(entity)
    return found


def dashboard_errors(url_path: str, icon: str, config: dict[str, Any], entities: list[dict[str, Any]]) -> list[str]:
    """Why HA would not show this dashboard as proposed (empty: valid)."""
    known = {e["entity_id"]: e for e in entities}
    reasons = []
    if "-" not in url_path or url_path != slug(url_path):
        reasons.append(f"url_path {url_path} must be lower-case words joined by hyphens, with at least one hyphen")
    if ":" not in icon:
        reasons.append(f"icon {icon} must be prefix:name, e.g. mdi:lightning-bolt")
    views = config.get("views")
    if not isinstance(views, list) or not views:
        return [*reasons, "a dashboard needs at least one view"]
    for number, view in enumerate(views):
        cards = list(_cards(view.get("cards") if isinstance(view, dict) else None))
        if not cards:
            reasons.append(f"view {number} has no cards")
        for card in cards:
            kind = str(card.get("type", ""))
            if kind not in CARD_TYPES:
                reasons.append(f"view {number}: no card type '{kind}' in Home Assistant's frontend")
            for entity in named(card):
                if entity not in known:
                    reasons.append(f"no entity {entity} in this home")
                elif kind in NUMERIC_CARDS and not known[entity].get("unit"):
                    reasons.append(f"a {kind} card needs a measurement: {entity} has no unit")
    return list(dict.fromkeys(reasons))


def describe(config: dict[str, Any], names: dict[str, str]) -> str:
    """The dashboard in words, for the person approving it: its views, and each card with what it shows."""
    views = [v for v in config.get("views") or [] if isinstance(v, dict)]
    parts = []
    for card in _cards([c for view in views for c in view.get("cards") or []]):
        things = ", ".join(names.get(e, e) for e in named(card))
        title = f" '{card['title']}'" if card.get("title") else ""
        parts.append(f"{card.get('type')}{title}" + (f" of {things}" if things else ""))
    return f"{len(views)} view(s), {len(parts)} card(s): " + "; ".join(parts)


# --------------------------------------------------------------------------- the stages


@stage
def dashboard(ctx: Ctx, architect: Architecture) -> DashboardProposal:
    """The dashboard the architect drafted, laid out from this home's entities and checked against them."""
    draft = architect.dashboard or DashboardDraft(title="Home")
    url_path = draft.url_path or f"dashboard-{slug(draft.title)}"
    entities = _ok(ctx.tools.execute("ha.overview", {})).get("entities", [])
    config = {"title": draft.title, "views": draft.views} if draft.views else layout(draft, entities)
    reasons = [] if architect.dashboard else ["the request drafted no dashboard"]
    listed = ctx.tools.execute("ha.dashboards", {})
    there = next((d for d in _ok(listed).get("dashboards", []) if d["url_path"] == url_path), None)
    original = None
    if listed.status != "success":
        reasons.append(f"Home Assistant could not list its dashboards: {listed.error}")
    elif there is not None and there.get("mode") != "storage":
        reasons.append(f"dashboard /{url_path} is kept in Home Assistant's YAML files: it cannot be changed here")
    elif there is not None:
        original = _ok(ctx.tools.execute("ha.dashboard_config", {"url_path": url_path})).get("config")
    reasons += dashboard_errors(url_path, draft.icon, config, entities)
    names = {e["entity_id"]: e["name"] for e in entities}
    return DashboardProposal(
        ready=not reasons,
        url_path=url_path,
        title=draft.title,
        icon=draft.icon,
        config=config,
        original=original,
        exists=there is not None,
        reasons=reasons,
        yaml=as_yaml(config),
        description=describe(config, names),
        diff=diff(original, config, url_path),
    )


def _key(url_path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", url_path)[:64]


def _status(done: ToolResult) -> str:
    if done.status == "denied":
        return "declined"
    said_no = isinstance(done.data, dict) and done.data.get(REFUSED)
    return f"{'refused' if said_no else 'failed'}: {done.error}"


@stage
def dashboard_deploy(ctx: Ctx, dashboard: DashboardProposal) -> DashboardDeployed:
    """The proposed dashboard saved once the user approves its diff (created first if it is new)."""
    change = {
        "url_path": dashboard.url_path,
        "title": dashboard.title,
        "icon": dashboard.icon,
        "config": dashboard.config,
        "original": dashboard.original,
        "create": not dashboard.exists,
        "description": dashboard.description[:2000],
    }
    done = ctx.tools.execute("ha.deploy_dashboard", change)
    if done.status != "success":
        return DashboardDeployed(url_path=dashboard.url_path, status=_status(done))
    ctx.remember(
        DASHBOARDS,
        _key(dashboard.url_path),
        {
            "url_path": dashboard.url_path,
            "title": dashboard.title,
            "deployed": dashboard.config,
            "original": dashboard.original,
            "created": not dashboard.exists,
        },
    )
    return DashboardDeployed(url_path=dashboard.url_path, status="deployed")


@stage
def dashboard_rollback(ctx: Ctx, architect: Architecture) -> DashboardRolledBack:
    """Undo a dashboard deployment this user made: the one named, else the latest not yet undone."""
    deployed: dict[str, Any] = ctx.recall(DASHBOARDS) or {}
    live = [d for d in deployed.values() if not d.get("rolled_back")]
    chosen_one = deployed.get(_key(architect.url_path or "")) or (live[-1] if live and not architect.url_path else None)
    if chosen_one is None:
        return DashboardRolledBack(url_path=architect.url_path, status="nothing deployed to roll back")
    params = {k: chosen_one[k] for k in ("url_path", "title", "deployed", "original", "created")}
    done = ctx.tools.execute("ha.rollback_dashboard", params)
    if done.status != "success":
        return DashboardRolledBack(url_path=chosen_one["url_path"], status=_status(done))
    ctx.remember(DASHBOARDS, _key(chosen_one["url_path"]), {**chosen_one, "rolled_back": True})
    return DashboardRolledBack(url_path=chosen_one["url_path"], status="rolled back")


def dashboard_facts(ctx: Ctx, request: str) -> dict[str, Any]:
    """What the architect is told of dashboards, when the request is about one: HA's dashboards and
    this user's deployments that can be undone (nothing otherwise: no websocket call for other requests)."""
    if not re.search(r"\bdashboards?\b", request, re.I):
        return {}
    listed = _ok(ctx.tools.execute("ha.dashboards", {})).get("dashboards", [])
    mine = [d for d in (ctx.recall(DASHBOARDS) or {}).values() if not d.get("rolled_back")]
    return {
        "dashboards": [{"url_path": d["url_path"], "title": d.get("title")} for d in listed],
        "dashboard_deployments": [{"url_path": d["url_path"], "title": d.get("title")} for d in mine],
    }


def dashboard_report(
    dashboard: DashboardProposal | None, deployed: DashboardDeployed | None, rolled: DashboardRolledBack | None
) -> tuple[list[str], str | None]:
    """The report's lines about dashboards, and the terminal reason when the mission failed: an invalid
    proposal (nothing to approve), a save HA refused, or a change that failed on the way."""
    lines, failure = [], None
    if dashboard is not None and not dashboard.ready:
        lines.append(f"Dashboard '{dashboard.title}' is not valid: {'; '.join(dashboard.reasons)}.")
        failure = "invalid_proposal"
    elif dashboard is not None:
        lines.append(f"Dashboard '{dashboard.title}' at /{dashboard.url_path}: {dashboard.description}.")
    if deployed is not None:
        lines.append(f"Dashboard /{deployed.url_path}: {deployed.status}.")
        if deployed.status.startswith(("refused", "failed")):
            failure = "deploy_refused" if deployed.status.startswith("refused") else "deploy_failed"
    if rolled is not None:
        lines.append(f"Rollback of dashboard /{rolled.url_path or 'the last one'}: {rolled.status}.")
        failure = "rollback_failed" if rolled.status.startswith(("refused", "failed")) else failure
    return lines, failure
