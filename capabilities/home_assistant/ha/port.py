"""What a mission may ask of a Home Assistant: its REST API, typed, and the errors it can end with.

The operations are HA's own REST endpoints (developers.home-assistant.io/docs/api/rest), one method
each, so an answer means what HA documents and a real instance (`rest.RestHomeAssistant`) and the
bundled offline home (`sample.SampleHome`) are interchangeable behind `HomeAssistant`. Models parse
what HA returns and keep its field names; unknown fields are ignored (HA adds some every release),
except on the configuration, which passes them through.

Errors are few and each carries a one-line message a mission can show the user as is: the host is
named, the access token never is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

# ----------------------------------------------------------------------------------- errors


class HAError(Exception):
    """Home Assistant failed to answer as asked (the base of every error here)."""

    def __init__(self, message: str, *, host: str | None = None, status: int | None = None) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever HA put in its answer
        self.host = host
        self.status = status


class HATokenRejected(HAError):
    """401: the long-lived access token is wrong, revoked or missing (retrying cannot help)."""


class HAUnknownEntity(HAError):
    """404 on a state or a configuration: no such entity, automation or script."""

    def __init__(self, message: str, *, entity_id: str, host: str | None = None) -> None:
        super().__init__(message, host=host, status=404)
        self.entity_id = entity_id


class HAUnreachable(HAError):
    """No answer at all (refused, unresolvable, timed out), after the retries the deadline allowed."""


class HAUnsupported(HAError):
    """This Home Assistant does not offer the operation (a websocket command older releases lack)."""


class HABadRequest(HAError):
    """400: HA refused the request itself (a template that does not render, a malformed automation,
    an unknown service)."""


# ----------------------------------------------------------------------------------- models


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class StateContext(_Model):
    """What caused a state: a user, an automation run (`parent_id` links runs to their trigger)."""

    id: str
    parent_id: str | None = None
    user_id: str | None = None


class State(_Model):
    """An entity's state as GET /api/states returns it."""

    entity_id: str
    state: str
    attributes: dict[str, Any] = Field(default_factory=dict)
    last_changed: AwareDatetime
    last_updated: AwareDatetime
    last_reported: AwareDatetime | None = None
    context: StateContext | None = None

    @property
    def domain(self) -> str:
        return self.entity_id.split(".", 1)[0]

    @property
    def name(self) -> str:
        """The friendly name, or the entity id when the entity has none."""
        return str(self.attributes.get("friendly_name") or self.entity_id)

    @property
    def available(self) -> bool:
        return self.state != "unavailable"


class HistoryPoint(_Model):
    """One recorded state of an entity (GET /api/history/period). With `minimal_response` HA sends
    only `state` and `last_changed` for most points; the missing fields are filled in here
    (`attributes` empty, `last_updated` = `last_changed`) so every point has the same shape."""

    entity_id: str
    state: str
    last_changed: AwareDatetime
    last_updated: AwareDatetime
    attributes: dict[str, Any] = Field(default_factory=dict)

    def number(self) -> float | None:
        """The state as a number; None for 'unavailable', 'unknown' and other text."""
        try:
            return float(self.state)
        except ValueError:
            return None


class AreaEntry(_Model):
    """An area of the home (websocket `config/area_registry/list`)."""

    area_id: str
    name: str
    aliases: list[str] = Field(default_factory=list)


class DeviceEntry(_Model):
    """A device (websocket `config/device_registry/list`): what its integration calls it, or its user."""

    id: str
    name: str | None = None
    name_by_user: str | None = None
    area_id: str | None = None
    manufacturer: str | None = None
    model: str | None = None
    disabled_by: str | None = None


class EntityEntry(_Model):
    """An entity as the registry knows it (websocket `config/entity_registry/list`): its integration
    (`platform`), device and area (its own, or else its device's)."""

    entity_id: str
    name: str | None = None  # set by its user
    original_name: str | None = None
    platform: str
    device_id: str | None = None
    area_id: str | None = None
    disabled_by: str | None = None


class Registries(_Model):
    """The home's catalog as HA's registries hold it: areas, devices, entities."""

    areas: list[AreaEntry]
    devices: list[DeviceEntry]
    entities: list[EntityEntry]


class StatisticPoint(_Model):
    """One period of an entity's long-term statistics (websocket `recorder/statistics_during_period`):
    kept by HA for ever, unlike the state history its recorder purges after 10 days. A measurement has
    mean/min/max; a meter (total, total_increasing) has `state` (its reading at the period's end), `sum`
    (since HA began counting) and `change` (what the period used)."""

    start: AwareDatetime
    end: AwareDatetime
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    state: float | None = None
    sum: float | None = None
    change: float | None = None


StatisticsPeriod = Literal["hour", "day", "week", "month"]


class LogbookEntry(_Model):
    """One line of the logbook (GET /api/logbook): a state change (`state`) or an event such as an
    automation being triggered (`message`, `source`), with what caused it in the `context_*` fields."""

    when: AwareDatetime
    name: str | None = None
    message: str | None = None
    state: str | None = None
    entity_id: str | None = None
    domain: str | None = None
    source: str | None = None
    icon: str | None = None
    context_id: str | None = None
    context_user_id: str | None = None
    context_event_type: str | None = None
    context_domain: str | None = None
    context_service: str | None = None
    context_entity_id: str | None = None
    context_entity_id_name: str | None = None
    context_name: str | None = None
    context_message: str | None = None
    context_source: str | None = None
    context_state: str | None = None


class UnitSystem(_Model):
    length: str
    mass: str
    temperature: str
    volume: str
    pressure: str | None = None
    wind_speed: str | None = None
    accumulated_precipitation: str | None = None
    area: str | None = None


class HAConfig(BaseModel):
    """GET /api/config: where the home is, its time zone and units (history is read in its zone)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    location_name: str
    latitude: float
    longitude: float
    elevation: float = 0
    time_zone: str
    unit_system: UnitSystem
    version: str
    components: list[str] = Field(default_factory=list)
    currency: str | None = None
    country: str | None = None
    language: str | None = None
    state: str | None = None  # RUNNING, NOT_RUNNING, STARTING...
    config_dir: str | None = None
    external_url: str | None = None
    internal_url: str | None = None


class ServiceField(BaseModel):
    """One parameter of a service, as HA describes it (the selector says which values it takes)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str | None = None
    description: str | None = None
    required: bool = False
    example: Any = None
    selector: dict[str, Any] | None = None


class ServiceDescription(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: str | None = None
    description: str | None = None
    fields: dict[str, ServiceField] = Field(default_factory=dict)
    target: dict[str, Any] | None = None  # which entities/areas it acts on, when it has a target
    response: dict[str, Any] | None = None  # {"optional": bool} when it can return data


class ServiceDomain(_Model):
    """One element of GET /api/services: a domain and the services it offers."""

    domain: str
    services: dict[str, ServiceDescription]


class ConfigCheck(_Model):
    """POST /api/config/core/check_config: whether HA would load its configuration files as they are."""

    result: str  # "valid" | "invalid"
    errors: str | None = None
    warnings: str | None = None

    @property
    def valid(self) -> bool:
        return self.result == "valid"


class Dashboard(_Model):
    """One dashboard besides the default one, as `lovelace/dashboards/list` gives it. A dashboard made in
    the UI or over the websocket API (mode storage) has the `id` that `lovelace/dashboards/delete` takes;
    one declared in configuration.yaml (mode yaml) has none and cannot be changed over the API."""

    url_path: str
    title: str | None = None
    id: str | None = None
    mode: str = "storage"
    icon: str | None = None
    require_admin: bool = False
    show_in_sidebar: bool = True


# ----------------------------------------------------------------------------------- port


@runtime_checkable
class HomeAssistant(Protocol):
    """A Home Assistant instance, through the operations of its REST API.

    Times are timezone-aware (naive ones are refused: HA would read them in its own zone).
    Mutating operations (`save_automation_config`, `delete_automation_config`, `call_service`, and the
    dashboards' create, save and delete) act at once: a mission calls them only after the user approved.
    """

    def config(self) -> HAConfig:
        """GET /api/config."""
        ...

    def services(self) -> list[ServiceDomain]:
        """GET /api/services: every service, to check an automation only calls ones that exist."""
        ...

    def states(self) -> list[State]:
        """GET /api/states: every entity's current state."""
        ...

    def state(self, entity_id: str) -> State:
        """GET /api/states/<entity_id>; HAUnknownEntity when there is no such entity."""
        ...

    def history(
        self,
        entity_ids: Sequence[str],
        start: datetime,
        end: datetime,
        *,
        minimal_response: bool = True,
        no_attributes: bool = True,
    ) -> dict[str, list[HistoryPoint]]:
        """GET /api/history/period/<start>?filter_entity_id=..&end_time=<end>: each entity's states
        from `start` (its state then, dated `start`) to before `end`, oldest first. Entities without
        any recorded state are left out, as HA does. `minimal_response` and `no_attributes` (the
        default: what analyses need, and much less for HA to send) drop attributes."""
        ...

    def registries(self) -> Registries:
        """The area, device and entity registries (three websocket commands)."""
        ...

    def statistics(
        self, statistic_ids: Sequence[str], start: datetime, end: datetime, *, period: StatisticsPeriod = "hour"
    ) -> dict[str, list[StatisticPoint]]:
        """Long-term statistics per `period` between two aware times (websocket
        `recorder/statistics_during_period`); an entity without statistics is absent from the answer."""
        ...

    def logbook(self, start: datetime, end: datetime, *, entity_ids: Sequence[str] = ()) -> list[LogbookEntry]:
        """GET /api/logbook/<start>?end_time=<end>[&entity=..]: changes and events, oldest first."""
        ...

    def error_log(self) -> str:
        """GET /api/error_log: the log of the running HA, as text in HA's log format."""
        ...

    def render_template(self, template: str) -> str:
        """POST /api/template; HABadRequest when it does not render."""
        ...

    def check_config(self) -> ConfigCheck:
        """POST /api/config/core/check_config."""
        ...

    def validate_automation(self, config: Mapping[str, Any]) -> list[str]:
        """HA's own check of an automation before anything is saved (the websocket command
        `validate_config`, as HA's automation editor uses it): one line per part HA refuses, in HA's
        words; empty when HA would take it."""
        ...

    def automation_config(self, automation_id: str) -> dict[str, Any]:
        """GET /api/config/automation/config/<id>: the automation as its editor stores it (id, alias,
        triggers, conditions, actions...); HAUnknownEntity when there is none with that id."""
        ...

    def save_automation_config(self, automation_id: str, config: Mapping[str, Any]) -> None:
        """POST /api/config/automation/config/<id>: create or replace it (HA reloads automations)."""
        ...

    def delete_automation_config(self, automation_id: str) -> None:
        """DELETE /api/config/automation/config/<id>; HAUnknownEntity when there is none."""
        ...

    def script_config(self, script_id: str) -> dict[str, Any]:
        """GET /api/config/script/config/<id> (the object id of `script.<id>`)."""
        ...

    def call_service(self, domain: str, service: str, data: Mapping[str, Any] | None = None) -> list[State]:
        """POST /api/services/<domain>/<service> (e.g. light.turn_on, automation.reload): the states
        that changed while it ran."""
        ...

    # Lovelace dashboards: HA's websocket API only (the REST API has none)

    def dashboards(self) -> list[Dashboard]:
        """`lovelace/dashboards/list`: every dashboard besides the default one."""
        ...

    def create_dashboard(
        self,
        url_path: str,
        title: str,
        *,
        icon: str | None = None,
        require_admin: bool = False,
        show_in_sidebar: bool = True,
    ) -> Dashboard:
        """`lovelace/dashboards/create` (mode storage), empty until its configuration is saved;
        HABadRequest in HA's words when HA refuses (a url_path without a hyphen, or one already taken)."""
        ...

    def dashboard_config(self, url_path: str) -> dict[str, Any]:
        """`lovelace/config`: the dashboard's configuration (views, cards); HAUnknownEntity when there is
        no such dashboard or it holds no configuration yet."""
        ...

    def save_dashboard_config(self, url_path: str, config: Mapping[str, Any]) -> None:
        """`lovelace/config/save`: replace the dashboard's configuration; HAUnknownEntity when there is
        no such dashboard."""
        ...

    def delete_dashboard(self, dashboard_id: str) -> None:
        """`lovelace/dashboards/delete` (the dashboard's `id`, not its url_path), its configuration with
        it; HAUnknownEntity when none has that id."""
        ...


def automation_parts(config: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of an automation `validate_config` checks, under the keys the automation spells them with
    (HA reads its version's spelling there as in the automation: trigger or triggers...)."""
    keys = ("trigger", "triggers", "condition", "conditions", "action", "actions")
    return {key: config[key] for key in keys if key in config}


def refusals(answer: Any) -> list[str]:
    """`validate_config`'s answer ({part: {valid, error}}) as one line per refused part."""
    if not isinstance(answer, Mapping):
        return [f"unexpected answer to validate_config: {type(answer).__name__}"]
    return [
        f"{part}: {' '.join(str(result.get('error') or 'invalid').split())}"
        for part, result in answer.items()
        if not (isinstance(result, Mapping) and result.get("valid"))
    ]


def require_aware(moment: datetime, name: str) -> datetime:
    """A naive time would be read in HA's zone by HA and in UTC by the sample: refused for both."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (got {moment.isoformat()})")
    return moment


def entity_id_list(entity_ids: Sequence[str]) -> list[str]:
    """The ids asked for, lower-cased, once each (a lone string is one id, not its characters)."""
    ids = [entity_ids] if isinstance(entity_ids, str) else list(entity_ids)
    if not ids:
        raise ValueError("name at least one entity id")
    return list(dict.fromkeys(str(e).strip().lower() for e in ids))
