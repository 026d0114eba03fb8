"""The Home Assistant tools: reading the home (the seed's query tools) and the three that change it.

Every tool reaches HA through `home(env)`: the HA that HA_URL names (its token from HA_TOKEN locally,
or read from the secret HA_TOKEN_SECRET names, in AWS), or else, in a checkout (the Lambda layer has
no sample home: there the call fails saying what to configure), the sample home: one per user in this
process, as each user has their own home (what one mission changed, the next one sees: a deployment
and its rollback), a few kept. HA's errors become a failed call with HA's
reason (token rejected, unreachable, no such entity), never a hang: the client has a deadline.

Changing the home (`ha.call_service`, `ha.deploy_automation`, `ha.rollback_automation`) is write
risk: the runtime asks the user first, showing the tool's preview (what will be called, the diff).
"""

from __future__ import annotations

import collections
import statistics
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from capabilities.home_assistant.automation import diff
from capabilities.home_assistant.ha.port import (
    HABadRequest,
    HAError,
    HAUnknownEntity,
    HAUnsupported,
    HomeAssistant,
    State,
    StatisticPoint,
)
from capabilities.home_assistant.ha.settings import connect, ha_settings
from missions.core.capability.tools import RiskLevel, ToolCatalog, ToolCategory, ToolEnv, ToolResult
from missions.core.mission.envelope import Citation

CATALOG = ToolCatalog()
LOG_FILE = "home-assistant.log"  # how error-log lines are cited: home-assistant.log:<line>
_SAMPLES: collections.OrderedDict[str, HomeAssistant] = collections.OrderedDict()
_LOCK = threading.Lock()


def _changes_home(
    tool_id: str, description: str, parameters: type[BaseModel], preview: Callable[[Any], dict[str, Any]]
) -> Callable[[Callable[..., ToolResult]], Callable[..., ToolResult]]:
    """Registers a tool that changes the home: a write, shown to the user as `preview`, never retried."""
    return CATALOG.register(
        tool_id,
        description,
        parameters,
        category=ToolCategory.WRITE,
        risk=RiskLevel.WRITE,
        preview=preview,
        max_retries=0,
    )


def home(env: ToolEnv) -> HomeAssistant:
    """The HA this mission talks to."""
    settings = ha_settings()
    if settings.configured:
        secret = settings.token_secret
        provider = (lambda: env.secret(secret)) if secret and not settings.token else None
        return connect(settings, token_provider=provider)
    with _LOCK:
        found = _SAMPLES.pop(env.user_id, None) or connect(settings)
        _SAMPLES[env.user_id] = found
        while len(_SAMPLES) > 32:
            _SAMPLES.popitem(last=False)
        return found


def ha_now(ha: HomeAssistant) -> datetime:
    """HA's own clock (the sample home's week ends at its `now`)."""
    text = ha.render_template("{{ now().isoformat() }}").strip()
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _failed(exc: HAError) -> ToolResult:
    return ToolResult.fail(str(exc), "not_found" if isinstance(exc, HAUnknownEntity) else "error")


def _answered(ask: Callable[[], dict[str, Any]]) -> ToolResult:
    """What one question to HA answers as the tool's result, or HA's failure as the tool's error."""
    try:
        return ToolResult.ok(ask())
    except HAError as exc:
        return _failed(exc)


def _row(state: State, areas: dict[str, str]) -> dict[str, Any]:
    attributes = state.attributes
    return {
        "entity_id": state.entity_id,
        "name": attributes.get("friendly_name") or state.entity_id,
        "state": state.state,
        "area": areas.get(state.entity_id),
        "unit": attributes.get("unit_of_measurement"),
        "device_class": attributes.get("device_class"),
        "last_changed": state.last_changed.isoformat() if state.last_changed else None,
    }


def _areas(ha: HomeAssistant) -> dict[str, str]:
    """Entity id -> area id, through HA's template functions (the REST API has no area endpoint)."""
    names = ha.render_template("{{ areas() | join(',') }}").strip()
    by_entity: dict[str, str] = {}
    for area in [a for a in names.split(",") if a]:
        listed = ha.render_template(f"{{{{ area_entities('{area}') | join(',') }}}}").strip()
        by_entity.update(dict.fromkeys([e for e in listed.split(",") if e], area))
    return by_entity


class NoParams(BaseModel):
    pass


@CATALOG.register("ha.overview", "HA's clock, its areas, entities per domain, and which are unavailable", NoParams)
def overview(params: NoParams, env: ToolEnv) -> ToolResult:
    try:
        ha = home(env)
        states, areas, config = ha.states(), _areas(ha), ha.config()
        now = ha_now(ha)
    except HAError as exc:
        return _failed(exc)
    domains = collections.Counter(s.domain for s in states)
    return ToolResult.ok(
        {
            "now": now.isoformat(),
            "location": config.location_name,
            "version": config.version,  # which automation syntax it reads (capabilities.home_assistant.syntax)
            "time_zone": config.time_zone,
            "areas": sorted(set(areas.values())),
            "domains": dict(sorted(domains.items())),
            "entities": [_row(s, areas) for s in states],
            "unavailable": sorted(s.entity_id for s in states if s.state in ("unavailable", "unknown")),
        }
    )


class EntityParams(BaseModel):
    entity_id: str = Field(pattern=r"^[a-z_]+\.[a-z0-9_]+$")


@CATALOG.register("ha.entity", "one entity's state and attributes", EntityParams)
def entity(params: EntityParams, env: ToolEnv) -> ToolResult:
    try:
        state = home(env).state(params.entity_id)
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok({**state.model_dump(mode="json")})


class HistoryParams(BaseModel):
    entity_ids: list[str] = Field(min_length=1, max_length=12)
    hours: int = Field(168, ge=1, le=24 * 31)
    end: str | None = Field(None, description="ISO time the period ends (default: HA's now)")


@CATALOG.register(
    "ha.history",
    "entities' history, aggregated per hour (numbers) or as changes (states)",
    HistoryParams,
    timeout_seconds=30,
)
def history(params: HistoryParams, env: ToolEnv) -> ToolResult:
    try:
        ha = home(env)
        end = datetime.fromisoformat(params.end) if params.end else ha_now(ha)
        start = end - timedelta(hours=params.hours)
        found = ha.history(params.entity_ids, start, end)
        if params.end is None:  # up to now: each entity's current state is its last point
            for entity_id, points in found.items():
                current = ha.state(entity_id)
                if points and current.last_changed > points[-1].last_changed:
                    points.append(points[-1].model_copy(update={"state": current.state, "last_changed": end}))
    except HAError as exc:
        return _failed(exc)
    series: dict[str, Any] = {}
    for entity_id, points in found.items():
        numbers = [(p.last_changed, p.number()) for p in points]
        if points and sum(1 for _, n in numbers if n is not None) >= len(points) / 2:
            hourly: dict[str, list[float]] = collections.defaultdict(list)
            for moment, value in numbers:
                if value is not None:
                    hourly[moment.replace(minute=0, second=0, microsecond=0).isoformat()].append(value)
            series[entity_id] = {
                "kind": "numeric",
                "points": len(points),
                "hourly": [
                    {"hour": hour, "mean": round(statistics.fmean(v), 4), "min": min(v), "max": max(v), "last": v[-1]}
                    for hour, v in sorted(hourly.items())
                ],
                "unavailable_since": _unavailable_since(points),
            }
        else:
            changes = [{"at": p.last_changed.isoformat(), "state": p.state} for p in points]
            series[entity_id] = {"kind": "states", "points": len(points), "changes": changes[-300:]}
    return ToolResult.ok({"start": start.isoformat(), "end": end.isoformat(), "series": series})


class StatisticsParams(HistoryParams):
    hours: int = Field(168, ge=1, le=24 * 31)


@CATALOG.register(
    "ha.statistics",
    "entities' long-term statistics per hour (kept for ever; the state history is purged after 10 days), "
    "the state history for entities without statistics",
    StatisticsParams,
    timeout_seconds=30,
)
def long_term(params: StatisticsParams, env: ToolEnv) -> ToolResult:
    try:
        ha = home(env)
        end = datetime.fromisoformat(params.end) if params.end else ha_now(ha)
        start = end - timedelta(hours=params.hours)
        found = ha.statistics(params.entity_ids, start, end, period="hour")
        current = {s.entity_id: s for s in ha.states() if s.entity_id in params.entity_ids}
    except HAError as exc:
        return _failed(exc)
    series: dict[str, Any] = {}
    for entity_id, points in found.items():
        if not points:
            continue
        state = current.get(entity_id)
        gone = state is not None and state.state in ("unavailable", "unknown")
        hourly = [_hour(point) for point in points]
        reading = _number(state.state) if state is not None else None
        if (
            params.end is None
            and points[-1].state is not None
            and reading is not None
            and reading != hourly[-1]["last"]
        ):
            # up to now: the hour under way, which HA compiles only once it ends, from the meter's reading now
            hourly.append(
                {
                    "hour": points[-1].end.isoformat(),
                    "mean": reading,
                    "min": hourly[-1]["last"],
                    "max": reading,
                    "last": reading,
                }
            )
        series[entity_id] = {
            "kind": "numeric",
            "source": "statistics",
            "points": len(points),
            "hourly": hourly,
            "unavailable_since": state.last_changed.isoformat() if gone and state else None,
        }
    rest = [e for e in params.entity_ids if e not in series]
    if rest:  # no statistics (no state_class, or none compiled yet): what the recorder still holds
        recorded = history(params.model_copy(update={"entity_ids": rest}), env)
        if recorded.status != "success":
            return recorded
        series.update({k: {**v, "source": "history"} for k, v in recorded.data["series"].items()})
    return ToolResult.ok({"start": start.isoformat(), "end": end.isoformat(), "series": series})


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # unavailable, unknown
        return None


def _hour(point: StatisticPoint) -> dict[str, Any]:
    """A statistic hour in the history tool's shape: a meter's reading at the hour's start and end (`min`,
    `last`), a measurement's mean, min and max."""
    if point.state is not None:
        before, after = round(point.state - (point.change or 0.0), 4), point.state
        return {"hour": point.start.isoformat(), "mean": after, "min": before, "max": after, "last": after}
    return {"hour": point.start.isoformat(), "mean": point.mean, "min": point.min, "max": point.max, "last": point.mean}


def _unavailable_since(points: list[Any]) -> str | None:
    since = None
    for point in points:
        if point.state in ("unavailable", "unknown"):
            since = since or point.last_changed.isoformat()
        else:
            since = None
    return since


class LogbookParams(BaseModel):
    hours: int = Field(48, ge=1, le=24 * 31)
    entity_ids: list[str] = Field(default_factory=list, max_length=12)


@CATALOG.register("ha.logbook", "what happened: state changes, automations triggered", LogbookParams)
def logbook(params: LogbookParams, env: ToolEnv) -> ToolResult:
    try:
        ha = home(env)
        end = ha_now(ha)
        entries = ha.logbook(end - timedelta(hours=params.hours), end, entity_ids=params.entity_ids)
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok({"entries": [e.model_dump(mode="json", exclude_none=True) for e in entries][-400:]})


class ErrorLogParams(BaseModel):
    contains: list[str] = Field(default_factory=list, description="keep lines holding any of these (any case)")
    limit: int = Field(40, ge=1, le=200)


@CATALOG.register("ha.error_log", "HA's error log lines (each cited as home-assistant.log:<line>)", ErrorLogParams)
def error_log(params: ErrorLogParams, env: ToolEnv) -> ToolResult:
    try:
        text = home(env).error_log()
    except HAError as exc:
        return _failed(exc)
    words = [w.lower() for w in params.contains]
    lines: list[dict[str, Any]] = [
        {"line": number, "text": line}
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and (not words or any(w in line.lower() for w in words))
    ][-params.limit :]
    return ToolResult.ok(
        {"file": LOG_FILE, "lines": lines}, citations=[Citation(file=LOG_FILE, line=row["line"]) for row in lines]
    )


class TemplateParams(BaseModel):
    template: str = Field(min_length=1, max_length=2000)


@CATALOG.register("ha.template", "render a template in HA (states(), area_entities(), now()...)", TemplateParams)
def template(params: TemplateParams, env: ToolEnv) -> ToolResult:
    return _answered(lambda: {"rendered": home(env).render_template(params.template)})


class AutomationParams(BaseModel):
    automation_id: str = Field(min_length=1, max_length=120)


@CATALOG.register("ha.automations", "every automation: its id, alias, state and when it last ran", NoParams)
def automations(params: NoParams, env: ToolEnv) -> ToolResult:
    try:
        states = [s for s in home(env).states() if s.domain == "automation"]
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok(
        {
            "automations": [
                {
                    "entity_id": s.entity_id,
                    "id": s.attributes.get("id"),
                    "alias": s.attributes.get("friendly_name"),
                    "state": s.state,
                    "last_triggered": s.attributes.get("last_triggered"),
                }
                for s in states
            ]
        }
    )


@CATALOG.register("ha.automation_config", "one automation's configuration, as HA's editor stores it", AutomationParams)
def automation_config(params: AutomationParams, env: ToolEnv) -> ToolResult:
    return _answered(lambda: {"config": home(env).automation_config(params.automation_id)})


class ScriptParams(BaseModel):
    script_id: str = Field(min_length=1, max_length=120)


class AutomationDraft(BaseModel):
    config: dict[str, Any]


@CATALOG.register(
    "ha.validate_automation", "HA's own check of an automation before it is saved (nothing changes)", AutomationDraft
)
def validate_automation(params: AutomationDraft, env: ToolEnv) -> ToolResult:
    try:
        return ToolResult.ok({"refusals": home(env).validate_automation(params.config), "checked": True})
    except HAUnsupported:  # a release without validate_config: the shape its version reads is all there is
        return ToolResult.ok({"refusals": [], "checked": False})
    except HAError as exc:
        return _failed(exc)


@CATALOG.register("ha.script_config", "one script's configuration", ScriptParams)
def script_config(params: ScriptParams, env: ToolEnv) -> ToolResult:
    return _answered(lambda: {"config": home(env).script_config(params.script_id)})


@CATALOG.register("ha.check_config", "HA's own check of its configuration", NoParams)
def check_config(params: NoParams, env: ToolEnv) -> ToolResult:
    return _answered(lambda: home(env).check_config().model_dump(mode="json"))


@CATALOG.register("ha.services", "every service this HA offers (domain.service)", NoParams)
def services(params: NoParams, env: ToolEnv) -> ToolResult:
    try:
        domains = home(env).services()
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok({"services": sorted(f"{d.domain}.{name}" for d in domains for name in d.services)})


# -- changing the home: each call is approved by the user first, as its preview shows it ----------------


class ServiceCall(BaseModel):
    domain: str = Field(pattern=r"^[a-z_]+$")
    service: str = Field(pattern=r"^[a-z0-9_]+$")
    entity_ids: list[str] = Field(min_length=1, max_length=50)
    data: dict[str, Any] = Field(default_factory=dict)


def _call_preview(call: ServiceCall) -> dict[str, Any]:
    extra = f" with {call.data}" if call.data else ""
    return {"change": f"{call.domain}.{call.service} on {', '.join(call.entity_ids)}{extra}"}


@_changes_home("ha.call_service", "call a service on entities (turn on a light...)", ServiceCall, _call_preview)
def call_service(call: ServiceCall, env: ToolEnv) -> ToolResult:
    try:
        ha = home(env)
        ha.call_service(call.domain, call.service, {**call.data, "entity_id": call.entity_ids})
        after = {e: ha.state(e).state for e in call.entity_ids}
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok({"called": f"{call.domain}.{call.service}", "states": after})


class Deployment(BaseModel):
    automation_id: str = Field(min_length=1, max_length=120)
    config: dict[str, Any]
    original: dict[str, Any] | None = None  # what HA holds now (None: a new automation)


def _deploy_preview(change: Deployment) -> dict[str, Any]:
    verb = "replace" if change.original is not None else "create"
    alias = change.config.get("alias") or change.automation_id
    return {
        "change": f"{verb} automation '{alias}' and reload automations",
        "diff": diff(change.original, change.config, change.automation_id),
    }


def _holds(ha: HomeAssistant, automation_id: str, expected: dict[str, Any] | None) -> bool:
    """HA still holds `expected` as the automation (None: none), whatever its `id` field says (HA adds it)."""
    try:
        current: dict[str, Any] | None = ha.automation_config(automation_id)
    except HAUnknownEntity:
        current = None

    def strip(config: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if config is None else {k: v for k, v in config.items() if k != "id"}

    return strip(current) == strip(expected)


def _restore(ha: HomeAssistant, automation_id: str, original: dict[str, Any] | None) -> None:
    """Put back the automation as it was: `original`, or none (it was new)."""
    if original is None:
        ha.delete_automation_config(automation_id)
    else:
        ha.save_automation_config(automation_id, {**original, "id": automation_id})


@_changes_home(
    "ha.deploy_automation",
    "write an automation and reload automations (refused if it changed since it was shown)",
    Deployment,
    _deploy_preview,
)
def deploy_automation(change: Deployment, env: ToolEnv) -> ToolResult:
    def write(ha: HomeAssistant) -> ToolResult | None:
        ha.save_automation_config(change.automation_id, {**change.config, "id": change.automation_id})
        checked = ha.check_config()
        if not checked.valid:  # HA would not load it: put back what was there, and say why
            _restore(ha, change.automation_id, change.original)
            return refused(f"HA's configuration check refused it, nothing changed: {checked.errors}")
        return None

    held = (change.original, "the diff was shown", "deployed")
    return _swap(env, change.automation_id, held, write, {"deployed": change.automation_id})


REFUSED = "refused_by_home_assistant"  # a failed change's data says HA itself said no (not unreachable)


def refused(message: str) -> ToolResult:
    return ToolResult(status="error", error=message, data={REFUSED: True})


def _swap(
    env: ToolEnv,
    automation_id: str,
    held: tuple[dict[str, Any] | None, str, str],
    write: Callable[[HomeAssistant], ToolResult | None],
    done: dict[str, Any],
) -> ToolResult:
    """Change an automation only if HA still holds what the person saw (`held`: that config, since when, and
    what was not done otherwise), then reload automations; `write` may refuse with a result."""
    expected, since, verb = held
    try:
        ha = home(env)
        if not _holds(ha, automation_id, expected):
            return ToolResult.fail(f"automation {automation_id} changed since {since}: not {verb}")
        refusal = write(ha)
        if refusal is not None:
            return refusal
        ha.call_service("automation", "reload")
    except HABadRequest as exc:  # HA read the change and would not take it (e.g. a syntax it does not read)
        return refused(str(exc))
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok(done)


class Rollback(BaseModel):
    automation_id: str = Field(min_length=1, max_length=120)
    deployed: dict[str, Any]  # what the deployment wrote (and HA should still hold)
    original: dict[str, Any] | None = None  # what it replaced (None: it was new, and is removed)


def _rollback_preview(change: Rollback) -> dict[str, Any]:
    alias = change.deployed.get("alias") or change.automation_id
    verb = "remove" if change.original is None else "restore the earlier version of"
    return {
        "change": f"{verb} automation '{alias}'",
        "diff": diff(change.deployed, change.original, change.automation_id),
    }


@_changes_home(
    "ha.rollback_automation",
    "restore an automation as it was before a deployment (remove it if it was new)",
    Rollback,
    _rollback_preview,
)
def rollback_automation(change: Rollback, env: ToolEnv) -> ToolResult:
    def write(ha: HomeAssistant) -> None:
        _restore(ha, change.automation_id, change.original)

    held = (change.deployed, "it was deployed", "rolled back")
    done = {"rolled_back": change.automation_id, "removed": change.original is None}
    return _swap(env, change.automation_id, held, write, done)
