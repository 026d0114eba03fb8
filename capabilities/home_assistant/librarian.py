"""The Librarian (seed 002): the home's catalog, its areas, devices and entities with their integrations,
read from HA's registries, kept in the user's memory, and refreshed when it is older than a day, when the
user asks, or on its weekly schedule (capability.toml).

The architect resolves what a request names through it: "the office lights" are the lights in the area
named Office (or of a device named so), not every entity whose name shares a word with the request.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from capabilities.home_assistant.ha.port import HAError, Registries
from capabilities.home_assistant.tools import CATALOG, NoParams, _failed, home
from missions.core.capability.registry import Ctx, stage
from missions.core.capability.tools import ToolEnv, ToolResult

NAMESPACE = "home_assistant.catalog"  # the user's memory: the catalog, under KEY
KEY = "home"
MAX_AGE = timedelta(hours=24)
MAX_ENTITIES = 2000  # a memory item stays well under DynamoDB's 400 KB
REFRESH = re.compile(r"\b(refresh|update|rebuild|re-?read)\b.*\bcatalog\b|\bcatalog\b.*\b(refresh|update)", re.I)
# the words that name a kind of entity in a request
DOMAIN_WORDS = {
    "light": ("light", "lights", "lamp", "lamps"),
    "switch": ("switch", "plug", "socket"),
    "climate": ("heating", "thermostat", "heat pump", "climate"),
    "cover": ("blind", "blinds", "cover", "shutter"),
    "lock": ("lock", "door lock"),
    "media_player": ("tv", "speaker", "music"),
}


class CatalogEntity(BaseModel):
    entity_id: str
    name: str
    area: str | None = None  # area id: the entity's own, else its device's
    device: str | None = None  # device id
    integration: str

    @property
    def domain(self) -> str:
        return self.entity_id.split(".", 1)[0]


class HomeCatalog(BaseModel):
    """The catalog as the librarian hands it to the architect (and keeps it in memory)."""

    areas: dict[str, str] = Field(default_factory=dict)  # area id -> name
    devices: dict[str, str] = Field(default_factory=dict)  # device id -> name
    entities: list[CatalogEntity] = Field(default_factory=list)
    refreshed_at: str = ""  # when it was read from HA (ISO, UTC)
    refreshed: bool = False  # this mission read it
    route: Literal["architect", "catalog"] = "architect"  # "catalog": refreshing it was all that was asked
    problem: str | None = None  # why it could not be read (the kept one, if any, is used)


def catalog_of(registries: Registries) -> dict[str, Any]:
    """The registries as the catalog keeps them: names resolved, disabled entries left out."""
    devices = {d.id: d for d in registries.devices if not d.disabled_by}
    entities = [
        {
            "entity_id": e.entity_id,
            "name": e.name or e.original_name or e.entity_id,
            "area": e.area_id or (devices[e.device_id].area_id if e.device_id in devices else None),
            "device": e.device_id if e.device_id in devices else None,
            "integration": e.platform,
        }
        for e in registries.entities
        if not e.disabled_by
    ][:MAX_ENTITIES]
    return {
        "areas": {a.area_id: a.name for a in registries.areas},
        "devices": {i: d.name_by_user or d.name or i for i, d in devices.items()},
        "entities": entities,
    }


@CATALOG.register("ha.catalog", "the home's areas, devices and entities with their integrations", NoParams)
def read_catalog(params: NoParams, env: ToolEnv) -> ToolResult:
    try:
        return ToolResult.ok(catalog_of(home(env).registries()))
    except HAError as exc:
        return _failed(exc)


@stage
def librarian(ctx: Ctx) -> HomeCatalog:
    """The catalog from the user's memory, read again from HA's registries when it is stale or asked for."""
    kept = ctx.recall(NAMESPACE, KEY)
    asked = bool(REFRESH.search(ctx.goal))
    now = datetime.now(UTC)
    if isinstance(kept, dict) and not asked and _age(kept, now) < MAX_AGE:
        return HomeCatalog.model_validate(kept)
    fetched = ctx.tools.execute("ha.catalog", {})
    if fetched.status != "success":  # the architect's survey says what is wrong with HA; an old catalog helps
        old = HomeCatalog.model_validate(kept) if isinstance(kept, dict) else HomeCatalog()
        return old.model_copy(update={"problem": fetched.error, "route": "catalog" if asked else "architect"})
    catalog = HomeCatalog.model_validate({**fetched.data, "refreshed_at": now.isoformat()})
    ctx.remember(NAMESPACE, KEY, catalog.model_dump(include={"areas", "devices", "entities", "refreshed_at"}))
    return catalog.model_copy(update={"refreshed": True, "route": "catalog" if asked else "architect"})


def _age(kept: dict[str, Any], now: datetime) -> timedelta:
    try:
        return now - datetime.fromisoformat(str(kept.get("refreshed_at")))
    except ValueError:
        return MAX_AGE  # unreadable: as good as stale


def resolve(request: str, catalog: HomeCatalog) -> list[str]:
    """The entities a request names through the catalog: those in the areas (or of the devices) it names,
    of the kinds it names ("lights"); else those it names by their own names."""
    text = f" {' '.join(re.findall(r'[a-z0-9]+', request.lower()))} "

    def named(name: str) -> bool:
        words = " ".join(re.findall(r"[a-z0-9]+", name.lower()))
        return bool(words) and f" {words} " in text

    areas = {a for a, name in catalog.areas.items() if named(name) or named(a.replace("_", " "))}
    devices = {d for d, name in catalog.devices.items() if named(name)}
    domains = {d for d, words in DOMAIN_WORDS.items() if any(named(w) for w in words)}
    if areas or devices:
        found = [
            e
            for e in catalog.entities
            if (e.area in areas or e.device in devices) and (not domains or e.domain in domains)
        ]
    else:
        found = [e for e in catalog.entities if named(e.name)]
    return [e.entity_id for e in found]


def candidates_for(
    request: str, rows: list[dict[str, Any]], catalog: HomeCatalog | None, limit: int
) -> list[dict[str, Any]]:
    """The entities the architect considers: those the catalog resolves the request to; a request that names
    no place, device or entity (an analysis of "energy use") gets those that share a word with it."""
    resolved = set(resolve(request, catalog)) if catalog is not None else set()
    if resolved:
        return [row for row in rows if row["entity_id"] in resolved][:limit]
    words = set(re.findall(r"[a-z0-9]+", request.lower()))
    return [
        row
        for row in rows
        if words & set(re.findall(r"[a-z0-9]+", f"{row['entity_id']} {row['name']} {row['area'] or ''}".lower()))
    ][:limit]


def catalog_summary(catalog: HomeCatalog) -> str:
    """What a refresh the user asked for answers."""
    if catalog.problem and not catalog.refreshed:
        return f"I could not read your home's catalog: {catalog.problem}."
    return (
        f"Your home's catalog is up to date: {len(catalog.areas)} areas, {len(catalog.devices)} devices and "
        f"{len(catalog.entities)} entities from {len({e.integration for e in catalog.entities})} integrations."
    )
