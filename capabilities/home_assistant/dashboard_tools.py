"""The dashboard tools: reading HA's Lovelace dashboards, and the two calls that change them.

Deploying and rolling back are write risk (the user approves first, seeing the YAML diff against what HA
holds) and check, like the automation tools, that HA still holds what the person saw before they change
anything: a dashboard that appeared, or a configuration edited in the UI since, is left alone. A save HA
refuses leaves nothing behind (a dashboard created for it is deleted again) and is marked as HA's refusal.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from capabilities.home_assistant.automation import diff
from capabilities.home_assistant.ha.port import HABadRequest, HAError, HAUnknownEntity, HomeAssistant
from capabilities.home_assistant.tools import CATALOG, NoParams, _answered, _changes_home, _failed, home, refused
from missions.core.capability.tools import ToolEnv, ToolResult

URL_PATH = r"^[a-z0-9][a-z0-9_-]{0,99}$"


@CATALOG.register("ha.dashboards", "the Lovelace dashboards besides the default one: url_path, title, mode", NoParams)
def dashboards(params: NoParams, env: ToolEnv) -> ToolResult:
    return _answered(lambda: {"dashboards": [d.model_dump(mode="json") for d in home(env).dashboards()]})


class DashboardParams(BaseModel):
    url_path: str = Field(pattern=URL_PATH)


@CATALOG.register("ha.dashboard_config", "one dashboard's configuration (its views and cards)", DashboardParams)
def dashboard_config(params: DashboardParams, env: ToolEnv) -> ToolResult:
    return _answered(lambda: {"config": home(env).dashboard_config(params.url_path)})


def held(ha: HomeAssistant, url_path: str) -> tuple[str | None, dict[str, Any] | None]:
    """What HA holds at `url_path`: the dashboard's id (None: no such dashboard) and its configuration
    (None: none saved yet)."""
    found = next((d for d in ha.dashboards() if d.url_path == url_path), None)
    if found is None:
        return None, None
    try:
        return found.id or "", ha.dashboard_config(url_path)
    except HAUnknownEntity:
        return found.id or "", None


class DashboardDeployment(BaseModel):
    url_path: str = Field(pattern=URL_PATH)
    title: str = Field(min_length=1, max_length=80)
    icon: str | None = None
    config: dict[str, Any]
    original: dict[str, Any] | None = None  # the configuration HA holds now (None: none)
    create: bool  # a new dashboard: created, then its configuration saved
    description: str = Field("", max_length=2000)  # the preview in words


def _deploy_preview(change: DashboardDeployment) -> dict[str, Any]:
    verb = "create dashboard" if change.create else "replace the configuration of dashboard"
    said = f": {change.description}" if change.description else ""
    return {
        "change": f"{verb} '{change.title}' at /{change.url_path}{said}",
        "diff": diff(change.original, change.config, change.url_path),
    }


@_changes_home(
    "ha.deploy_dashboard",
    "create a Lovelace dashboard if new and save its configuration (refused if it changed since it was shown)",
    DashboardDeployment,
    _deploy_preview,
)
def deploy_dashboard(change: DashboardDeployment, env: ToolEnv) -> ToolResult:
    created = None
    try:
        ha = home(env)
        ident, config = held(ha, change.url_path)
        if change.create and ident is not None:
            return ToolResult.fail(f"dashboard /{change.url_path} appeared since the proposal was shown: not deployed")
        if not change.create and (ident is None or config != change.original):
            return ToolResult.fail(f"dashboard /{change.url_path} changed since the diff was shown: not deployed")
        if change.create:
            created = ha.create_dashboard(change.url_path, change.title, icon=change.icon).id
        ha.save_dashboard_config(change.url_path, change.config)
    except HABadRequest as exc:  # HA read the change and would not take it: nothing is left behind
        if created:
            try:
                ha.delete_dashboard(created)
            except HAError as undo:
                return refused(f"{exc} (and the dashboard created for it could not be removed: {undo})")
        return refused(str(exc))
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok({"deployed": change.url_path, "dashboard_id": created or ident, "created": change.create})


class DashboardRollback(BaseModel):
    url_path: str = Field(pattern=URL_PATH)
    title: str = Field(min_length=1, max_length=80)
    deployed: dict[str, Any]  # what the deployment saved (and HA should still hold)
    original: dict[str, Any] | None = None  # what it replaced
    created: bool  # the deployment created the dashboard: rolling back deletes it


def _rollback_preview(change: DashboardRollback) -> dict[str, Any]:
    verb = "remove dashboard" if change.created else "restore the earlier configuration of dashboard"
    return {
        "change": f"{verb} '{change.title}' at /{change.url_path}",
        "diff": diff(change.deployed, None if change.created else change.original, change.url_path),
    }


@_changes_home(
    "ha.rollback_dashboard",
    "undo a dashboard deployment: restore the configuration it replaced, or delete the dashboard it created",
    DashboardRollback,
    _rollback_preview,
)
def rollback_dashboard(change: DashboardRollback, env: ToolEnv) -> ToolResult:
    try:
        ha = home(env)
        ident, config = held(ha, change.url_path)
        if ident is None or config != change.deployed:
            return ToolResult.fail(f"dashboard /{change.url_path} changed since it was deployed: not rolled back")
        if change.created:
            ha.delete_dashboard(ident)
        elif change.original is None:  # HA's API cannot empty a dashboard: it had no configuration before
            return ToolResult.fail(f"dashboard /{change.url_path} had no configuration before: nothing to restore")
        else:
            ha.save_dashboard_config(change.url_path, change.original)
    except HABadRequest as exc:
        return refused(str(exc))
    except HAError as exc:
        return _failed(exc)
    return ToolResult.ok({"rolled_back": change.url_path, "removed": change.created})
