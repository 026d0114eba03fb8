"""The bundled sample home's week: entities, recorded states, automation runs and log, from a seed.

A mission without a Home Assistant (no HA_URL, no token) still needs a house with something to find,
and its tests need figures that never change. So the week is generated here, deterministically:
seeded per day (`random.Random(f"{SEED}:{date}")`), ending at a fixed reference time unless told
another `now`, in 5-minute steps, from a few physical rules:

* the whole-home meter (`sensor.home_power` W, `sensor.home_energy` kWh) sums what runs: a standby
  load at night (router, fridge cycling), lights, cooking, the heat pump, the EV charger;
* the car charges every night from about 01:00 at ~7.2 kW for 2.5-4 h;
* the heat pump draws more the colder it is outside, and is off during the night setback;
* lights follow occupancy (motion) after dark, through automations whose runs are in the logbook;
* the EV charger's integration (wallbox) started failing two days before `now`: its sensors are
  `unavailable` since, and the error log says why (while the meter still sees the car charging);
* an automation keeps firing at a garage light that is unavailable; a button nobody ever presses.

`dataset(now)` is cached and immutable (tuples, read-only mappings); `SampleHome` layers each
mission's own changes on top, so no mission sees another's.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

SEED = 2025
REFERENCE_NOW = datetime(2025, 3, 14, 11, 0, tzinfo=UTC)  # a Friday, noon in Amsterdam
TIME_ZONE = "Europe/Amsterdam"
LATITUDE, LONGITUDE = 52.0907, 5.1214
STEP = timedelta(minutes=5)
WEEK = timedelta(days=7)
VERSION = "2025.3.2"
API_USER_ID = "8d3c0f6a1b7e4e2f9a5d4c3b2a190807"  # the user the long-lived token belongs to
USERS = {"alex": "2f1e9a7c5b3d4e6f8a0b1c2d3e4f5a6b", "sam": "7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29"}
NEED_ATTRIBUTE_DOMAINS = frozenset({"climate", "humidifier", "input_datetime", "thermostat", "water_heater"})

EV_INTEGRATION = "wallbox"
EV_ENTRY_TITLE = "Wallbox Pulsar Plus"
EV_LOGGER = "homeassistant.components.wallbox.coordinator"


def home_zone() -> tzinfo:
    """The home's zone; a fixed CET offset where the zone database is missing (same figures in March)."""
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(TIME_ZONE)
    except Exception:  # no tzdata on this system
        return timezone(timedelta(hours=1), "CET")


# ------------------------------------------------------------------------------ records


@dataclass(frozen=True, slots=True)
class Row:
    """One recorded state: a change of state (or, for the first row, the state a window starts in)."""

    when: float  # epoch seconds
    state: str
    attributes: Mapping[str, Any] | None = None  # None: the entity's static attributes
    context: str | None = None  # the run (automation, script, user action) that caused it
    changed: bool = True  # False: only attributes changed (HA's history leaves those out)


@dataclass(frozen=True)
class Entity:
    entity_id: str
    name: str
    area: str | None
    integration: str
    attributes: Mapping[str, Any]  # static, with friendly_name

    @property
    def domain(self) -> str:
        return self.entity_id.split(".", 1)[0]

    @property
    def in_logbook(self) -> bool:
        """HA leaves continuous sensors (with a unit or state class) out of the logbook."""
        return not (
            self.domain == "sensor" and ("unit_of_measurement" in self.attributes or "state_class" in self.attributes)
        )


@dataclass(frozen=True)
class Run:
    """Something that ran and caused changes: an automation triggered, a script started, a user's
    action (through the app or the API). Its id is the context id of the states it changed."""

    id: str
    when: float
    kind: str  # automation_triggered | script_started | call_service
    entity_id: str | None = None  # automation.x / script.x
    name: str | None = None
    source: str | None = None  # "state of binary_sensor.garage_door"
    user_id: str | None = None
    domain: str | None = None  # call_service: the service's domain
    service: str | None = None

    @classmethod
    def started(cls, kind: str, when: float, rng: random.Random, **cause: str | None) -> Run:
        """A run at `when`, with a fresh context id (a ULID of that time); `cause`: the optional fields."""
        return cls(ulid(when, rng), when, kind, **cause)


@dataclass(frozen=True)
class LogLine:
    when: float
    level: str
    logger: str
    message: str
    thread: str = "MainThread"

    def text(self, zone: tzinfo) -> str:
        """HA's log format: local time with milliseconds, level, thread, logger, message."""
        moment = datetime.fromtimestamp(self.when, zone)
        stamp = moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
        return f"{stamp} {self.level} ({self.thread}) [{self.logger}] {self.message}"


@dataclass(frozen=True)
class SampleFacts:
    """What is true of the sample week, for tests and offline answers to check against."""

    now: datetime
    start: datetime  # now - 7 days: the week the history covers
    time_zone: str
    entity_count: int
    domains: tuple[str, ...]
    areas: Mapping[str, str]
    ha_started: datetime
    # whole home
    home_power: str = "sensor.home_power"
    home_energy: str = "sensor.home_energy"
    week_energy_kwh: float = 0.0  # home_energy(now) - home_energy(start)
    night_standby_w: float = 0.0  # median home power 23:45-00:55 local over the week's nights
    # EV charger and its failing integration
    ev_charger_power: str = "sensor.ev_charger_power"
    ev_charger_energy: str = "sensor.ev_charger_energy"
    ev_charger_switch: str = "switch.ev_charger"
    ev_integration: str = EV_INTEGRATION
    ev_entry_title: str = EV_ENTRY_TITLE
    ev_logger: str = EV_LOGGER
    ev_failed_at: datetime = REFERENCE_NOW
    ev_log_lines: tuple[str, ...] = ()
    ev_sessions: tuple[tuple[datetime, datetime, float], ...] = ()  # start, end, kWh (every night)
    ev_week_kwh: float = 0.0
    # heating
    heat_pump: str = "climate.heat_pump"
    heat_pump_power: str = "sensor.heat_pump_power"
    heat_pump_energy: str = "sensor.heat_pump_energy"
    outdoor_temperature: str = "sensor.outdoor_temperature"
    # lights and occupancy
    living_room_lights: tuple[str, ...] = ("light.living_room_ceiling", "light.living_room_floor_lamp")
    living_room_motion: str = "binary_sensor.living_room_motion"
    office_lights: tuple[str, ...] = ("light.office_ceiling", "light.office_desk_lamp")
    office_motion: str = "binary_sensor.office_motion"
    # behaviour
    unpressed_button: str = "button.kitchen_hood_filter_reset"
    pressed_button: str = "button.living_room_tv_restart"
    broken_automation: str = "automation.garage_light_when_door_opens"
    broken_automation_id: str = "1709900000004"
    broken_target: str = "light.garage_ceiling"
    broken_automation_fired: tuple[datetime, ...] = ()


@dataclass(frozen=True)
class Dataset:
    now: datetime
    start: datetime
    zone: tzinfo
    entities: Mapping[str, Entity]
    timelines: Mapping[str, tuple[Row, ...]]  # per entity, oldest first, up to now
    times: Mapping[str, tuple[float, ...]]  # the rows' times, for bisect
    last_updated: Mapping[str, tuple[float, Mapping[str, Any]]]  # attribute changes after the last row
    runs: tuple[Run, ...]
    log: tuple[LogLine, ...]
    automations: tuple[Mapping[str, Any], ...]
    scripts: Mapping[str, Mapping[str, Any]]
    areas: Mapping[str, str]
    services: tuple[Mapping[str, Any], ...]
    config: Mapping[str, Any]
    facts: SampleFacts
    runs_by_id: Mapping[str, Run] = field(default_factory=dict)


# ------------------------------------------------------------------------------ the house

AREAS = {
    "living_room": "Living Room",
    "kitchen": "Kitchen",
    "office": "Office",
    "bedroom": "Bedroom",
    "hallway": "Hallway",
    "garage": "Garage",
    "garden": "Garden",
    "utility_room": "Utility Room",
}

_POWER = {"unit_of_measurement": "W", "device_class": "power", "state_class": "measurement"}
_ENERGY = {"unit_of_measurement": "kWh", "device_class": "energy", "state_class": "total_increasing"}
_TEMP = {"unit_of_measurement": "°C", "device_class": "temperature", "state_class": "measurement"}
_DIMMABLE = {"supported_color_modes": ["brightness"], "supported_features": 40}
_WHITE = {"supported_color_modes": ["color_temp"], "min_color_temp_kelvin": 2202, "max_color_temp_kelvin": 6535}

# entity id, name, area, integration, attributes
_ENTITIES: tuple[tuple[str, str, str | None, str, dict[str, Any]], ...] = (
    ("sensor.home_power", "Home power", "utility_room", "dsmr", _POWER),
    ("sensor.home_energy", "Home energy", "utility_room", "dsmr", _ENERGY),
    ("sensor.ev_charger_power", "EV charger power", "garage", EV_INTEGRATION, _POWER),
    ("sensor.ev_charger_energy", "EV charger energy", "garage", EV_INTEGRATION, _ENERGY),
    ("sensor.heat_pump_power", "Heat pump power", "utility_room", "shelly", _POWER),
    ("sensor.heat_pump_energy", "Heat pump energy", "utility_room", "shelly", _ENERGY),
    ("sensor.outdoor_temperature", "Outdoor temperature", "garden", "zha", _TEMP),
    ("sensor.living_room_temperature", "Living room temperature", "living_room", "zha", _TEMP),
    ("sensor.bedroom_temperature", "Bedroom temperature", "bedroom", "zha", _TEMP),
    ("sensor.office_temperature", "Office temperature", "office", "zha", _TEMP),
    (
        "sensor.living_room_humidity",
        "Living room humidity",
        "living_room",
        "zha",
        {"unit_of_measurement": "%", "device_class": "humidity", "state_class": "measurement"},
    ),
    (
        "sensor.alex_phone_battery",
        "Alex's phone battery",
        None,
        "mobile_app",
        {"unit_of_measurement": "%", "device_class": "battery", "state_class": "measurement"},
    ),
    ("binary_sensor.living_room_motion", "Living room motion", "living_room", "zha", {"device_class": "motion"}),
    ("binary_sensor.kitchen_motion", "Kitchen motion", "kitchen", "zha", {"device_class": "motion"}),
    ("binary_sensor.office_motion", "Office motion", "office", "zha", {"device_class": "motion"}),
    ("binary_sensor.hallway_motion", "Hallway motion", "hallway", "zha", {"device_class": "motion"}),
    ("binary_sensor.front_door", "Front door", "hallway", "zha", {"device_class": "door"}),
    ("binary_sensor.garage_door", "Garage door", "garage", "zha", {"device_class": "garage_door"}),
    ("light.living_room_ceiling", "Living room ceiling", "living_room", "hue", _WHITE),
    ("light.living_room_floor_lamp", "Living room floor lamp", "living_room", "hue", _DIMMABLE),
    ("light.kitchen_ceiling", "Kitchen ceiling", "kitchen", "hue", _WHITE),
    ("light.office_ceiling", "Office ceiling", "office", "hue", _WHITE),
    ("light.office_desk_lamp", "Office desk lamp", "office", "hue", _DIMMABLE),
    ("light.bedroom_ceiling", "Bedroom ceiling", "bedroom", "hue", _WHITE),
    ("light.hallway", "Hallway light", "hallway", "hue", _DIMMABLE),
    ("light.garage_ceiling", "Garage ceiling", "garage", "zha", _DIMMABLE),
    ("light.garden_path", "Garden path lights", "garden", "hue", _DIMMABLE),
    ("switch.coffee_machine", "Coffee machine", "kitchen", "shelly", {}),
    ("switch.office_monitor_plug", "Office monitor plug", "office", "shelly", {}),
    ("switch.dehumidifier", "Dehumidifier", "utility_room", "shelly", {}),
    ("switch.ev_charger", "EV charger", "garage", EV_INTEGRATION, {"icon": "mdi:ev-station"}),
    (
        "climate.heat_pump",
        "Heat pump",
        "living_room",
        "daikin",
        {
            "hvac_modes": ["off", "heat", "heat_cool"],
            "min_temp": 7,
            "max_temp": 30,
            "target_temp_step": 0.5,
            "supported_features": 385,
        },
    ),
    ("button.kitchen_hood_filter_reset", "Kitchen hood filter reset", "kitchen", "esphome", {}),
    ("button.living_room_tv_restart", "Living room TV restart", "living_room", "esphome", {"device_class": "restart"}),
    (
        "person.alex",
        "Alex",
        None,
        "person",
        {"user_id": USERS["alex"], "device_trackers": ["device_tracker.alex_phone"]},
    ),
    ("person.sam", "Sam", None, "person", {"user_id": USERS["sam"], "device_trackers": ["device_tracker.sam_phone"]}),
    (
        "weather.home",
        "Home",
        None,
        "met",
        {
            "temperature_unit": "°C",
            "pressure_unit": "hPa",
            "wind_speed_unit": "km/h",
            "visibility_unit": "km",
            "precipitation_unit": "mm",
            "attribution": "Weather forecast from met.no, delivered by the Norwegian Meteorological Institute.",
            "supported_features": 3,
        },
    ),
    (
        "media_player.living_room_tv",
        "Living room TV",
        "living_room",
        "webostv",
        {"device_class": "tv", "supported_features": 24509},
    ),
    ("media_player.kitchen_speaker", "Kitchen speaker", "kitchen", "cast", {"device_class": "speaker"}),
    ("lock.front_door", "Front door lock", "hallway", "nuki", {"supported_features": 1}),
    ("lock.back_door", "Back door lock", "kitchen", "nuki", {"supported_features": 1}),
    ("cover.living_room_blinds", "Living room blinds", "living_room", "zha", {"device_class": "blind"}),
    ("cover.bedroom_blinds", "Bedroom blinds", "bedroom", "zha", {"device_class": "blind"}),
    ("sun.sun", "Sun", None, "sun", {}),
    ("zone.home", "Home", None, "zone", {"latitude": LATITUDE, "longitude": LONGITUDE, "radius": 100}),
    ("scene.movie_time", "Movie time", "living_room", "homeassistant", {}),
    ("scene.dinner", "Dinner", "kitchen", "homeassistant", {}),
    ("input_boolean.guest_mode", "Guest mode", None, "input_boolean", {"icon": "mdi:account-multiple"}),
)

_LIGHT_WATTS = {
    "light.living_room_ceiling": 36,
    "light.living_room_floor_lamp": 12,
    "light.kitchen_ceiling": 40,
    "light.office_ceiling": 30,
    "light.office_desk_lamp": 8,
    "light.bedroom_ceiling": 25,
    "light.hallway": 9,
    "light.garden_path": 22,
}

# (id, alias, description, mode, triggers, conditions, actions, enabled)
_DISABLED_AUTOMATIONS = frozenset({"1709900000008"})

_CONFIG = Path(__file__).parent / "config"  # as HA keeps them: automations.yaml, scripts.yaml


@functools.cache
def _automations() -> tuple[dict[str, Any], ...]:
    return tuple(yaml.safe_load((_CONFIG / "automations.yaml").read_text(encoding="utf-8")))


@functools.cache
def _scripts() -> dict[str, dict[str, Any]]:
    scripts: dict[str, dict[str, Any]] = yaml.safe_load((_CONFIG / "scripts.yaml").read_text(encoding="utf-8"))
    return scripts


_ENTITY = {"entity_id": None}  # marker: a target of entities of the service's domain


def _service(
    name: str, description: str, fields: dict[str, Any] | None = None, target: Any = _ENTITY
) -> dict[str, Any]:
    return {"name": name, "description": description, "fields": fields or {}, "target": target}


def _field(name: str, selector: dict[str, Any], *, required: bool = False, example: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "selector": selector, "required": required}
    if example is not None:
        spec["example"] = example
    return spec


def _services() -> tuple[Mapping[str, Any], ...]:
    """GET /api/services as HA answers it, for the integrations the sample home has."""
    on_off = {
        "turn_on": _service("Turn on", "Turns on."),
        "turn_off": _service("Turn off", "Turns off."),
        "toggle": _service("Toggle", "Toggles on/off."),
    }
    brightness = _field("Brightness", {"number": {"min": 0, "max": 100, "unit_of_measurement": "%"}}, example=47)
    notify_fields = {
        "message": _field(
            "Message", {"text": None}, required=True, example="The garage door has been open for 10 minutes."
        ),
        "title": _field("Title", {"text": None}, example="Your Garage Door Friend"),
        "data": _field("Data", {"object": None}),
    }
    spec: dict[str, dict[str, Any]] = {
        "homeassistant": {
            "turn_on": _service("Generic turn on", "Generic action to turn devices on under any domain."),
            "turn_off": _service("Generic turn off", "Generic action to turn devices off under any domain."),
            "toggle": _service("Generic toggle", "Generic action to toggle devices on/off under any domain."),
            "update_entity": _service("Update entity", "Forces one or more entities to update their data."),
            "reload_core_config": _service("Reload core configuration", "Reloads the core configuration.", target=None),
            "reload_all": _service("Reload all", "Reloads all YAML configuration that can be reloaded.", target=None),
            "check_config": _service("Check configuration", "Checks the configuration files for errors.", target=None),
            "restart": _service("Restart", "Restarts Home Assistant.", target=None),
        },
        "light": {
            "turn_on": _service(
                "Turn on",
                "Turns on one or more lights and adjusts their properties.",
                {
                    "brightness_pct": brightness,
                    "brightness": _field("Brightness value", {"number": {"min": 0, "max": 255}}),
                    "color_temp_kelvin": _field("Color temperature", {"color_temp": {"unit": "kelvin"}}),
                    "transition": _field("Transition", {"number": {"min": 0, "max": 300, "unit_of_measurement": "s"}}),
                },
            ),
            "turn_off": _service(
                "Turn off",
                "Turns off one or more lights.",
                {"transition": _field("Transition", {"number": {"min": 0, "max": 300}})},
            ),
            "toggle": _service("Toggle", "Toggles one or more lights.", {"brightness_pct": brightness}),
        },
        "switch": on_off,
        "input_boolean": {**on_off, "reload": _service("Reload", "Reloads helpers from YAML.", target=None)},
        "climate": {
            "set_temperature": _service(
                "Set target temperature",
                "Sets the temperature setpoint.",
                {
                    "temperature": _field("Target temperature", {"number": {"min": 0, "max": 250, "step": 0.1}}),
                    "hvac_mode": _field("HVAC mode", {"select": {"options": ["off", "heat", "heat_cool"]}}),
                },
            ),
            "set_hvac_mode": _service(
                "Set HVAC mode",
                "Sets HVAC operation mode.",
                {"hvac_mode": _field("HVAC mode", {"state": {"hide_states": ["unavailable", "unknown"]}})},
            ),
            "turn_on": _service("Turn on", "Turns climate device on."),
            "turn_off": _service("Turn off", "Turns climate device off."),
        },
        "automation": {
            "trigger": _service(
                "Trigger",
                "Triggers the actions of an automation.",
                {"skip_condition": _field("Skip conditions", {"boolean": None})},
            ),
            "turn_on": _service("Turn on", "Enables an automation."),
            "turn_off": _service(
                "Turn off",
                "Disables an automation.",
                {"stop_actions": _field("Stop actions", {"boolean": None})},
            ),
            "toggle": _service("Toggle", "Toggles (enable / disable) an automation."),
            "reload": _service("Reload", "Reloads the automation configuration.", target=None),
        },
        "script": {
            "turn_on": _service("Turn on", "Runs the sequence of actions defined in a script."),
            "turn_off": _service("Turn off", "Stops a running script."),
            "toggle": _service("Toggle", "Toggle a script."),
            "reload": _service("Reload", "Reloads all the available scripts.", target=None),
            **{
                object_id: {"name": config["alias"], "description": "", "fields": {}}
                for object_id, config in _scripts().items()
            },
        },
        "scene": {
            "turn_on": _service(
                "Activate",
                "Activates a scene.",
                {"transition": _field("Transition", {"number": {"min": 0, "max": 300}})},
            ),
            "reload": _service("Reload", "Reloads the scenes from the YAML-configuration.", target=None),
        },
        "notify": {
            "notify": {
                "name": "Send a notification with notify",
                "description": "Sends a notification message.",
                "fields": notify_fields,
            },
            "mobile_app_alex_phone": {
                "name": "Send a notification via mobile_app_alex_phone",
                "description": "Sends a notification message using the mobile_app_alex_phone integration.",
                "fields": notify_fields,
            },
            "mobile_app_sam_phone": {
                "name": "Send a notification via mobile_app_sam_phone",
                "description": "Sends a notification message using the mobile_app_sam_phone integration.",
                "fields": notify_fields,
            },
            "persistent_notification": {
                "name": "Send a persistent notification",
                "description": "Sends a notification that is visible in the notifications panel.",
                "fields": {k: v for k, v in notify_fields.items() if k != "data"},
            },
        },
        "persistent_notification": {
            "create": _service(
                "Create",
                "Shows a notification on the notifications panel.",
                {
                    "message": _field("Message", {"text": None}, required=True),
                    "title": _field("Title", {"text": None}),
                    "notification_id": _field("Notification ID", {"text": None}),
                },
                target=None,
            ),
            "dismiss": _service(
                "Dismiss",
                "Deletes a notification from the notifications panel.",
                {"notification_id": _field("Notification ID", {"text": None}, required=True)},
                target=None,
            ),
        },
        "lock": {
            "lock": _service("Lock", "Locks a lock.", {"code": _field("Code", {"text": None})}),
            "unlock": _service("Unlock", "Unlocks a lock.", {"code": _field("Code", {"text": None})}),
            "open": _service("Open", "Opens a lock.", {"code": _field("Code", {"text": None})}),
        },
        "cover": {
            "open_cover": _service("Open", "Opens a cover."),
            "close_cover": _service("Close", "Closes a cover."),
            "stop_cover": _service("Stop", "Stops the cover movement."),
            "toggle": _service("Toggle", "Toggles a cover open/closed."),
            "set_cover_position": _service(
                "Set position",
                "Moves a cover to a specific position.",
                {"position": _field("Position", {"number": {"min": 0, "max": 100}}, required=True)},
            ),
        },
        "media_player": {
            "turn_on": _service("Turn on", "Turns on the power of the media player."),
            "turn_off": _service("Turn off", "Turns off the power of the media player."),
            "media_play": _service("Play", "Starts playing."),
            "media_pause": _service("Pause", "Pauses."),
            "media_stop": _service("Stop", "Stops playing."),
            "volume_set": _service(
                "Set volume",
                "Sets the volume level.",
                {"volume_level": _field("Level", {"number": {"min": 0, "max": 1, "step": 0.01}}, required=True)},
            ),
        },
        "button": {"press": _service("Press", "Press the button entity.")},
        "weather": {
            "get_forecasts": {
                **_service(
                    "Get forecasts",
                    "Get weather forecasts.",
                    {"type": _field("Forecast type", {"select": {"options": ["daily", "hourly"]}}, required=True)},
                ),
                "response": {"optional": False},
            }
        },
        "logbook": {
            "log": _service(
                "Log",
                "Creates a custom entry in the logbook.",
                {
                    "name": _field("Name", {"text": None}, required=True),
                    "message": _field("Message", {"text": None}, required=True),
                    "entity_id": _field("Entity ID", {"entity": None}),
                },
                target=None,
            )
        },
        "system_log": {
            "clear": _service("Clear all", "Deletes all log entries.", target=None),
            "write": _service(
                "Write",
                "Write log entry.",
                {
                    "message": _field("Message", {"text": None}, required=True),
                    "level": _field(
                        "Level", {"select": {"options": ["debug", "info", "warning", "error", "critical"]}}
                    ),
                    "logger": _field("Logger", {"text": None}),
                },
                target=None,
            ),
        },
        "person": {"reload": _service("Reload", "Reloads persons from the YAML-configuration.", target=None)},
        "zone": {"reload": _service("Reload", "Reloads zones from the YAML-configuration.", target=None)},
    }
    result = []
    for domain, services in spec.items():
        described = {}
        for name, description in services.items():
            item = dict(description)
            if item.get("target") is _ENTITY:
                item["target"] = {"entity": [{"domain": [domain]}]} if domain != "homeassistant" else {"entity": [{}]}
            elif "target" in item and item["target"] is None:
                del item["target"]
            described[name] = item
        result.append(MappingProxyType({"domain": domain, "services": described}))
    return tuple(result)


# ------------------------------------------------------------------------------ time helpers


def sun_times(day: date, zone: tzinfo) -> tuple[float, float]:
    """Sunrise and sunset (epoch) at the home on a local date (NOAA's approximation, to a minute)."""
    gamma = 2 * math.pi / 365 * (day.timetuple().tm_yday - 1 + 0.5)
    eqtime = 229.18 * (
        0.000075
        + 0.001868 * math.cos(gamma)
        - 0.032077 * math.sin(gamma)
        - 0.014615 * math.cos(2 * gamma)
        - 0.040849 * math.sin(2 * gamma)
    )
    declination = (
        0.006918
        - 0.399912 * math.cos(gamma)
        + 0.070257 * math.sin(gamma)
        - 0.006758 * math.cos(2 * gamma)
        + 0.000907 * math.sin(2 * gamma)
        - 0.002697 * math.cos(3 * gamma)
        + 0.00148 * math.sin(3 * gamma)
    )
    latitude = math.radians(LATITUDE)
    cos_hour = math.cos(math.radians(90.833)) / (math.cos(latitude) * math.cos(declination)) - math.tan(
        latitude
    ) * math.tan(declination)
    hour_angle = math.degrees(math.acos(max(-1.0, min(1.0, cos_hour))))
    midnight = datetime.combine(day, time(0), tzinfo=UTC).timestamp()
    sunrise = midnight + 60 * (720 - 4 * (LONGITUDE + hour_angle) - eqtime)
    sunset = midnight + 60 * (720 - 4 * (LONGITUDE - hour_angle) - eqtime)
    return sunrise, sunset


class Spans:
    """Sorted, merged time intervals [a, b) with a fast membership test."""

    def __init__(self, spans: Iterable[tuple[float, float]]) -> None:
        merged: list[list[float]] = []
        for a, b in sorted(s for s in spans if s[1] > s[0]):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.spans = [(a, b) for a, b in merged]
        self._starts = [a for a, _ in self.spans]

    def __contains__(self, moment: float) -> bool:
        index = bisect.bisect_right(self._starts, moment) - 1
        return index >= 0 and moment < self.spans[index][1]

    def __iter__(self) -> Any:
        return iter(self.spans)


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(when: float, rng: random.Random) -> str:
    """A context id as HA makes them (a ULID: 48 bits of milliseconds, 80 random), from the seed."""
    value = (int(when * 1000) << 80) | rng.getrandbits(80)
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


# ------------------------------------------------------------------------------ the week


@dataclass
class _Day:
    """One local day's plan (epoch seconds)."""

    day: date
    weekend: bool
    sunrise: float
    sunset: float
    wake: float
    bed: float
    rooms: dict[str, list[tuple[float, float]]]
    away: dict[str, list[tuple[float, float]]]  # person -> spans away
    garage_opens: list[float]
    front_opens: list[float]
    tv: list[tuple[float, float]]
    speaker: list[tuple[float, float]]
    cooking: list[tuple[float, float]]
    kettle: list[float]
    coffee: tuple[float, float] | None
    ev: tuple[float, float, float]  # the charge starting this day at ~01:00: start, end, watts
    mean_outdoor: float
    swing_outdoor: float
    movie_night: float | None
    leave_home: float | None
    dinner_scene: float | None


def _plan(day: date, zone: tzinfo) -> _Day:
    rng = random.Random(f"{SEED}:{day.isoformat()}")

    def at(hhmm: str, jitter_minutes: float = 0.0) -> float:
        hours, minutes = (int(part) for part in hhmm.split(":"))
        base = datetime.combine(day, time(hours, minutes), tzinfo=zone).timestamp()
        return base + 60 * rng.uniform(0, jitter_minutes)

    minute = 60.0
    weekend = day.weekday() >= 5
    sunrise, sunset = sun_times(day, zone)
    rooms: dict[str, list[tuple[float, float]]] = {r: [] for r in ("living_room", "kitchen", "office", "hallway")}
    away: dict[str, list[tuple[float, float]]] = {"alex": [], "sam": []}
    garage_opens: list[float] = []
    front_opens: list[float] = []
    tv: list[tuple[float, float]] = []
    coffee = None
    movie_night = leave_home = dinner_scene = None
    if not weekend:
        wake = at("06:35", 15)
        breakfast = (wake + 8 * minute, wake + 40 * minute)
        lunch_start = at("12:25", 10)
        lunch = (lunch_start, lunch_start + 30 * minute)
        cook_start = at("17:45", 15)
        dinner = (cook_start, cook_start + rng.uniform(55, 70) * minute)
        bed = at("22:35", 35)
        leave, back = at("08:05", 6), at("17:30", 15)
        away["sam"].append((leave, back))
        garage_opens += [leave - 2 * minute, back]
        rooms["kitchen"] += [breakfast, lunch, dinner]
        rooms["living_room"] += [(breakfast[1], leave - 3 * minute), (dinner[1], bed - 15 * minute)]
        office_start = at("08:25", 10)
        rooms["office"] += [(office_start, lunch[0] - 2 * minute), (lunch[1] + 3 * minute, at("17:25", 15))]
        tv.append((at("20:00", 20), bed - 15 * minute))
        coffee = (at("06:40"), at("07:05"))
        kettle = [breakfast[0]]
        cooking = [(dinner[0] + 5 * minute, dinner[0] + 45 * minute)]
        if day.weekday() == 4:
            movie_night = at("20:25", 5)
    else:
        wake = at("08:05", 25)
        breakfast = (wake + 5 * minute, wake + 45 * minute)
        lunch = (at("12:35"), at("13:15"))
        cook_start = at("18:00", 10)
        dinner = (cook_start, cook_start + rng.uniform(55, 70) * minute)
        bed = at("23:05", 30)
        rooms["kitchen"] += [breakfast, lunch, dinner]
        kettle = [breakfast[0]]
        cooking = [(dinner[0] + 5 * minute, dinner[0] + 45 * minute)]
        if day.weekday() == 5:  # Saturday: both out in the afternoon
            leave, back = at("15:50", 3), at("17:40", 10)
            leave_home = leave - 2 * minute
            away["alex"].append((leave, back))
            away["sam"].append((leave, back))
            garage_opens += [leave - 1 * minute, back]
            rooms["living_room"] += [(breakfast[1], lunch[0]), (lunch[1], leave - 5 * minute)]
            movie_night = at("20:25", 5)
        else:  # Sunday: Sam cycles in the morning
            leave, back = at("10:05", 5), at("11:55", 10)
            away["sam"].append((leave, back))
            front_opens += [leave - 1 * minute, back]
            rooms["living_room"] += [(breakfast[1], lunch[0]), (lunch[1], dinner[0] - 2 * minute)]
            tv.append((at("14:00", 10), at("16:30", 10)))
            dinner_scene = dinner[0] + 50 * minute
        rooms["living_room"].append((dinner[1], bed - 15 * minute))
        tv.append((at("20:15", 10), bed - 15 * minute))
    for moment in [*garage_opens, *front_opens, bed - 16 * minute]:
        rooms["hallway"].append((moment - minute, moment + minute))
    ev_start = at("01:00", 12)
    ev_hours = rng.uniform(2.5, 4.2)
    return _Day(
        day=day,
        weekend=weekend,
        sunrise=sunrise,
        sunset=sunset,
        wake=wake,
        bed=bed,
        rooms=rooms,
        away=away,
        garage_opens=garage_opens,
        front_opens=front_opens,
        tv=tv,
        speaker=[dinner],
        cooking=cooking,
        kettle=kettle,
        coffee=coffee,
        ev=(ev_start, ev_start + ev_hours * 3600, rng.uniform(7150, 7350)),
        mean_outdoor=rng.uniform(2.0, 9.0),
        swing_outdoor=rng.uniform(2.5, 4.5),
        movie_night=movie_night,
        leave_home=leave_home,
        dinner_scene=dinner_scene,
    )


class _Builder:
    """Collects changes (per entity), runs and log lines while the week is generated."""

    def __init__(self, start: float, now: float) -> None:
        self.start, self.now = start, now
        self.changes: dict[str, list[Row]] = {}
        self.runs: list[Run] = []
        self.log: list[LogLine] = []
        self.rng = random.Random(f"{SEED}:contexts")

    def change(
        self,
        entity_id: str,
        when: float,
        state: str,
        attributes: Mapping[str, Any] | None = None,
        context: str | None = None,
    ) -> None:
        self.changes.setdefault(entity_id, []).append(Row(when, state, attributes, context))

    def run(self, kind: str, when: float, **cause: str | None) -> str:
        run = Run.started(kind, when, self.rng, **cause)
        self.runs.append(run)
        return run.id

    def automation(self, automation_id: str, when: float, source: str) -> str:
        config = next(a for a in _automations() if a["id"] == automation_id)
        return self.run(
            "automation_triggered",
            when,
            entity_id=_automation_entity_id(config),
            name=config["alias"],
            source=source,
        )

    def script(self, object_id: str, when: float, user: str | None) -> str:
        return self.run(
            "script_started",
            when,
            entity_id=f"script.{object_id}",
            name=_scripts()[object_id]["alias"],
            user_id=USERS[user] if user else None,
        )

    def user(self, user: str, when: float, domain: str, service: str) -> str:
        return self.run("call_service", when, user_id=USERS[user], domain=domain, service=service)


def _automation_entity_id(config: Mapping[str, Any]) -> str:
    return "automation." + slugify(str(config.get("alias") or config["id"]))


def slugify(text: str) -> str:
    """HA's entity-id slug: lower case, runs of anything else than a-z0-9 as one underscore."""
    out = []
    for char in text.lower():
        out.append(char if char.isascii() and char.isalnum() else "_")
    slug = "_".join(part for part in "".join(out).split("_") if part)
    return slug or "unnamed"


def _light_on(attributes: Mapping[str, Any], brightness: int) -> dict[str, Any]:
    on = dict(attributes)
    on["brightness"] = brightness
    on["color_mode"] = "color_temp" if "color_temp" in on.get("supported_color_modes", []) else "brightness"
    if on["color_mode"] == "color_temp":
        on["color_temp_kelvin"] = 2700
    return on


def _light_off(attributes: Mapping[str, Any]) -> dict[str, Any]:
    off = dict(attributes)
    off.update({"brightness": None, "color_mode": None})
    return off


@lru_cache(maxsize=4)
def dataset(now: datetime = REFERENCE_NOW) -> Dataset:
    """The sample week ending at `now` (cached: it is immutable)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    now = now.astimezone(UTC)
    zone = home_zone()
    start = now - WEEK
    t_start, t_now = start.timestamp(), now.timestamp()
    ha_started = t_now - timedelta(days=12, hours=3, minutes=14, seconds=7).total_seconds()
    ev_failed = t_now - 2 * 86400
    garage_bulb_lost = t_now - timedelta(days=9, hours=5, minutes=41).total_seconds()
    build = _Builder(t_start, t_now)
    entities = {
        entity_id: Entity(entity_id, name, area, integration, MappingProxyType({**attributes, "friendly_name": name}))
        for entity_id, name, area, integration, attributes in _ENTITIES
    }
    for config in _automations():
        entity_id = _automation_entity_id(config)
        entities[entity_id] = Entity(
            entity_id,
            config["alias"],
            None,
            "automation",
            MappingProxyType(
                {"id": config["id"], "mode": config["mode"], "current": 0, "friendly_name": config["alias"]}
            ),
        )
    for object_id, script in _scripts().items():
        entity_id = f"script.{object_id}"
        entities[entity_id] = Entity(
            entity_id,
            script["alias"],
            None,
            "script",
            MappingProxyType(
                {"mode": script["mode"], "current": 0, "icon": script["icon"], "friendly_name": script["alias"]}
            ),
        )

    first_day = (start.astimezone(zone) - timedelta(days=1)).date()
    days: list[_Day] = []
    day = first_day
    while day <= now.astimezone(zone).date():
        days.append(_plan(day, zone))
        day += timedelta(days=1)

    minute = 60.0
    # -- states that are steady all week (since HA started, or since they broke)
    for entity_id, state in (
        ("input_boolean.guest_mode", "off"),
        ("button.kitchen_hood_filter_reset", "unknown"),
        ("button.living_room_tv_restart", "unknown"),
        ("scene.movie_time", "unknown"),
        ("scene.dinner", "unknown"),
        ("switch.ev_charger", "on"),
        ("lock.back_door", "locked"),
        ("switch.dehumidifier", "off"),
    ):
        build.change(entity_id, ha_started, state)
    build.change("light.garage_ceiling", ha_started, "off", _light_off(entities["light.garage_ceiling"].attributes))
    build.change("light.garage_ceiling", garage_bulb_lost, "unavailable")
    for config in _automations():
        state = "off" if config["id"] in _DISABLED_AUTOMATIONS else "on"
        build.change(_automation_entity_id(config), ha_started, state)
    for object_id in _scripts():
        build.change(f"script.{object_id}", ha_started, "off")
    for entity_id in _LIGHT_WATTS:
        build.change(entity_id, ha_started, "off", _light_off(entities[entity_id].attributes))
    for entity_id in (
        "binary_sensor.living_room_motion",
        "binary_sensor.kitchen_motion",
        "binary_sensor.office_motion",
    ):
        build.change(entity_id, ha_started, "off")
    build.change("binary_sensor.hallway_motion", ha_started, "off")
    build.change("binary_sensor.front_door", ha_started, "off")
    build.change("binary_sensor.garage_door", ha_started, "off")
    build.change("person.alex", ha_started, "home")
    build.change("person.sam", ha_started, "home")

    # -- the week's life, day by day
    light_spans: dict[str, list[tuple[float, float, int, str | None, str | None]]] = {e: [] for e in _LIGHT_WATTS}
    loads: dict[str, list[tuple[float, float]]] = {
        k: [] for k in ("coffee", "monitor", "tv", "speaker", "cooking", "kettle", "dehumidifier")
    }
    ev_sessions: list[tuple[float, float, float]] = []
    garage_fired: list[float] = []

    def dark(moment: float) -> bool:
        local_day = datetime.fromtimestamp(moment, zone).date()
        sunrise, sunset = sun_times(local_day, zone)
        return moment < sunrise + 20 * minute or moment >= sunset - 30 * minute

    def light(entity_id: str, on: float, off: float, brightness: int, on_ctx: str | None, off_ctx: str | None) -> None:
        light_spans[entity_id].append((on, off, brightness, on_ctx, off_ctx))

    for plan in days:
        # sun, covers, weather happen on their own
        build.change("sun.sun", plan.sunrise, "above_horizon")
        build.change("sun.sun", plan.sunset, "below_horizon")
        build.change(
            "cover.living_room_blinds",
            plan.sunrise + 15 * minute,
            "open",
            {**entities["cover.living_room_blinds"].attributes, "current_position": 100},
        )
        build.change(
            "cover.living_room_blinds",
            plan.sunset + 10 * minute,
            "closed",
            {**entities["cover.living_room_blinds"].attributes, "current_position": 0},
        )
        build.change(
            "cover.bedroom_blinds",
            plan.wake + 5 * minute,
            "open",
            {**entities["cover.bedroom_blinds"].attributes, "current_position": 100},
        )
        build.change(
            "cover.bedroom_blinds",
            plan.bed - 14 * minute,
            "closed",
            {**entities["cover.bedroom_blinds"].attributes, "current_position": 0},
        )
        # motion from occupancy (a motion sensor clears 90 s after the last movement)
        motion = {room: Spans((a, b + 90) for a, b in spans) for room, spans in plan.rooms.items()}
        for room, spans in motion.items():
            for a, b in spans:
                build.change(f"binary_sensor.{room}_motion", a, "on")
                build.change(f"binary_sensor.{room}_motion", b, "off")
        # living room ceiling: the motion automation (on after dark, off 5 min after the last motion)
        for a, b in motion["living_room"]:
            dusk = plan.sunset - 30 * minute
            if dark(a):
                on, source = a + 1, "state of binary_sensor.living_room_motion"
            elif a < dusk < b:
                on, source = dusk, "sunset event"
            else:
                continue
            on_ctx = build.automation("1709900000001", on - 0.2, source)
            off = b + 5 * minute
            off_ctx = build.automation("1709900000001", off - 0.2, "state of binary_sensor.living_room_motion")
            light("light.living_room_ceiling", on, off, 204, on_ctx, off_ctx)
        # office: both lights follow occupancy, day or night (10 min after the last motion)
        for a, b in motion["office"]:
            on_ctx = build.automation("1709900000002", a + 0.8, "state of binary_sensor.office_motion")
            off_ctx = build.automation("1709900000002", b + 10 * minute - 0.2, "state of binary_sensor.office_motion")
            for entity_id, brightness in (("light.office_ceiling", 230), ("light.office_desk_lamp", 180)):
                light(entity_id, a + 1, b + 10 * minute, brightness, on_ctx, off_ctx)
        # hallway night light
        for a, b in motion["hallway"]:
            if dark(a):
                ctx = build.automation("1709900000003", a + 0.8, "state of binary_sensor.hallway_motion")
                light("light.hallway", a + 1, b + 2 * minute, 77, ctx, ctx)
        # kitchen: by hand, when dark
        for a, b in motion["kitchen"]:
            if dark(a):
                light("light.kitchen_ceiling", a + 5, b, 255, None, None)
        # the evening: floor lamp by Alex from the app; good night script turns things off
        good_night = build.script("good_night", plan.bed - 15 * minute, "alex")
        for a, b in plan.rooms["living_room"]:
            if b == plan.bed - 15 * minute and dark(a):
                lamp_on = build.user("alex", a + 2 * minute, "light", "turn_on")
                light(
                    "light.living_room_floor_lamp", a + 2 * minute, plan.bed - 15 * minute + 1, 128, lamp_on, good_night
                )
        build.change("lock.front_door", plan.bed - 15 * minute + 2, "locked", None, good_night)
        build.change("lock.front_door", plan.wake + 30 * minute, "unlocked")
        # bedroom: by hand
        light("light.bedroom_ceiling", plan.bed - 14 * minute, plan.bed, 180, None, None)
        if dark(plan.wake):
            light("light.bedroom_ceiling", plan.wake, plan.wake + 8 * minute, 120, None, None)
        # garden path lights: sunset to 23:00
        garden_on = build.automation("1709900000006", plan.sunset - 0.2, "sunset event")
        eleven = datetime.combine(plan.day, time(23, 0), tzinfo=zone).timestamp()
        garden_off = build.automation("1709900000006", eleven - 0.2, "time")
        light("light.garden_path", plan.sunset, eleven, 255, garden_on, garden_off)
        # heat pump setback runs (the setpoint itself is modelled in the power below)
        for setback_at in (time(4, 45), time(22, 30)):
            build.automation("1709900000005", datetime.combine(plan.day, setback_at, tzinfo=zone).timestamp(), "time")
        # doors, people, the garage automation that cannot light an unavailable bulb
        for moment in plan.garage_opens:
            build.change("binary_sensor.garage_door", moment, "on")
            build.change("binary_sensor.garage_door", moment + 90, "off")
            build.automation("1709900000004", moment + 0.3, "state of binary_sensor.garage_door")
            garage_fired.append(moment + 0.3)
            build.log.append(
                LogLine(
                    moment + 0.41,
                    "WARNING",
                    "homeassistant.helpers.service",
                    "Referenced entities light.garage_ceiling are missing or not currently available",
                )
            )
        for moment in plan.front_opens:
            build.change("binary_sensor.front_door", moment, "on")
            build.change("binary_sensor.front_door", moment + 40, "off")
        for person, away_spans in plan.away.items():
            for a, b in away_spans:
                build.change(f"person.{person}", a, "not_home")
                build.change(f"person.{person}", b, "home")
        if plan.leave_home is not None:
            ctx = build.script("leave_home", plan.leave_home, "sam")
            build.change("lock.front_door", plan.leave_home + 2, "locked", None, ctx)
        if plan.coffee is not None:
            ctx = build.automation("1709900000007", plan.coffee[0] - 0.2, "time")
            build.change("switch.coffee_machine", plan.coffee[0], "on", None, ctx)
            build.change("switch.coffee_machine", plan.coffee[1], "off", None, ctx)
            loads["coffee"].append(plan.coffee)
        # office monitor follows the office; media follows the evening
        for a, b in motion["office"]:
            build.change("switch.office_monitor_plug", a + 20, "on")
            build.change("switch.office_monitor_plug", b, "off")
            loads["monitor"].append((a + 20, b))
        if plan.movie_night is not None:
            ctx = build.script("movie_night", plan.movie_night, "sam")
            build.change("scene.movie_time", plan.movie_night + 0.5, _iso(plan.movie_night + 0.5), None, ctx)
        if plan.dinner_scene is not None:
            ctx = build.user("alex", plan.dinner_scene, "scene", "turn_on")
            build.change("scene.dinner", plan.dinner_scene, _iso(plan.dinner_scene), None, ctx)
        for a, b in plan.tv:
            build.change("media_player.living_room_tv", a, "on")
            build.change(
                "media_player.living_room_tv", b, "off", None, good_night if b == plan.bed - 15 * minute else None
            )
            loads["tv"].append((a, b))
        for a, b in plan.speaker:
            build.change("media_player.kitchen_speaker", a, "playing")
            build.change("media_player.kitchen_speaker", b, "off")
            loads["speaker"].append((a, b))
        loads["cooking"] += plan.cooking
        loads["kettle"] += [(k, k + 240) for k in plan.kettle]
        ten = datetime.combine(plan.day, time(10, 0), tzinfo=zone).timestamp()
        build.change("switch.dehumidifier", ten, "on")
        build.change("switch.dehumidifier", ten + 4 * 3600, "off")
        loads["dehumidifier"].append((ten, ten + 4 * 3600))
        ev_sessions.append(plan.ev)

    # a light switched on again before it went off stays on: one span, off by the last "off"
    merged_lights: dict[str, list[tuple[float, float]]] = {}
    for entity_id, lit in light_spans.items():
        attributes = entities[entity_id].attributes
        merged: list[list[Any]] = []
        for lit_span in sorted(lit, key=lambda s: s[0]):
            if merged and lit_span[0] <= merged[-1][1]:
                if lit_span[1] > merged[-1][1]:
                    merged[-1][1], merged[-1][4] = lit_span[1], lit_span[4]
            else:
                merged.append(list(lit_span))
        for span in merged:
            build.change(entity_id, span[0], "on", _light_on(attributes, span[2]), span[3])
            build.change(entity_id, span[1], "off", _light_off(attributes), span[4])
        merged_lights[entity_id] = [(m[0], m[1]) for m in merged]

    # the TV restart button: pressed twice during the week, by Sam
    for offset_days, pressed_at in ((2, time(14, 3, 27)), (5, time(20, 41, 27))):
        local_day = start.astimezone(zone).date() + timedelta(days=offset_days)
        pressed = datetime.combine(local_day, pressed_at, tzinfo=zone).timestamp()
        ctx = build.user("sam", pressed, "button", "press")
        build.change("button.living_room_tv_restart", pressed, _iso(pressed), None, ctx)

    # -- 5-minute sensors
    grid = [t_start + k * STEP.total_seconds() for k in range(int(WEEK / STEP) + 1)]
    grid = [t for t in grid if t <= t_now]
    lit_spans = {entity_id: Spans(s) for entity_id, s in merged_lights.items()}
    coffee_heating = Spans((a, a + 300) for a, _ in loads["coffee"])
    load_spans = {name: Spans(s) for name, s in loads.items()}
    ev_spans = [(a, b, w) for a, b, w in ev_sessions]
    plan_by_day = {plan.day: plan for plan in days}
    noise = random.Random(f"{SEED}:noise")

    def outdoor(moment: float) -> float:
        local = datetime.fromtimestamp(moment, zone)
        plan = plan_by_day.get(local.date()) or days[0]
        hours = local.hour + local.minute / 60
        neighbour = plan_by_day.get(local.date() + timedelta(days=1 if hours >= 12 else -1)) or plan
        blend = abs(hours - 12) / 24  # halfway to the next day's mean at midnight
        mean = plan.mean_outdoor * (1 - blend) + neighbour.mean_outdoor * blend
        return mean + plan.swing_outdoor * math.cos(2 * math.pi * (hours - 15) / 24)

    def heat_pump(moment: float, temperature: float) -> float:
        local = datetime.fromtimestamp(moment, zone)
        hours = local.hour + local.minute / 60
        if hours >= 22.5 or hours < 4.75:
            return 0.0  # night setback: the house coasts
        demand = max(0.0, 125 * (19.5 - temperature) - 150)
        if hours < 6.5:
            demand *= 1.3  # morning boost back to 20 °C
        if demand < 450:  # below its lowest modulation the compressor cycles
            duty = demand / 450
            return 450.0 if (local.minute % 20) < 20 * duty else 0.0
        return demand

    energy = 14382.417
    hp_energy = 6120.35
    ev_energy = 3187.62
    previous_power = None
    rows: dict[str, list[Row]] = {
        e: []
        for e in (
            "sensor.home_power",
            "sensor.home_energy",
            "sensor.heat_pump_power",
            "sensor.heat_pump_energy",
            "sensor.outdoor_temperature",
            "sensor.living_room_temperature",
            "sensor.bedroom_temperature",
            "sensor.office_temperature",
            "sensor.living_room_humidity",
            "sensor.alex_phone_battery",
            "sensor.ev_charger_power",
            "sensor.ev_charger_energy",
        )
    }
    energy_at: dict[float, float] = {}
    night_samples: list[float] = []
    ev_kwh: dict[int, float] = {}
    battery = 100.0
    for moment in grid:
        local = datetime.fromtimestamp(moment, zone)
        hours = local.hour + local.minute / 60
        plan = plan_by_day.get(local.date()) or days[0]
        temperature = outdoor(moment) + noise.gauss(0, 0.15)
        hp = heat_pump(moment, temperature)
        if hp:
            hp = max(0.0, hp + noise.gauss(0, 35))
        ev = 0.0
        for index, (a, b, watts) in enumerate(ev_spans):
            if a <= moment < b:
                ev = watts + noise.uniform(-40, 40)
                ev_kwh[index] = ev_kwh.get(index, 0.0) + ev * STEP.total_seconds() / 3600 / 1000
        base = 138 + (85 if 7 <= local.minute < 27 else 0) + noise.gauss(0, 5)
        lights = sum(_LIGHT_WATTS[e] for e, lit_span in lit_spans.items() if moment in lit_span)
        appliances = (
            (1350 if moment in coffee_heating else 0)
            + (35 if moment in load_spans["coffee"] else 0)
            + (2000 if moment in load_spans["kettle"] else 0)
            + (1850 if moment in load_spans["cooking"] else 0)
            + (65 if moment in load_spans["monitor"] else 0)
            + (105 if moment in load_spans["tv"] else 0)
            + (9 if moment in load_spans["speaker"] else 0)
            + (235 if moment in load_spans["dehumidifier"] else 0)
        )
        power = int(round(base + lights + appliances + hp + ev))
        if power == previous_power:
            power += 1  # the meter reports every 5 minutes: every report is a change
        previous_power = power
        energy_at[moment] = energy
        rows["sensor.home_power"].append(Row(moment, str(power)))
        rows["sensor.home_energy"].append(Row(moment, f"{energy:.3f}"))
        rows["sensor.heat_pump_power"].append(Row(moment, f"{hp:.0f}"))
        rows["sensor.heat_pump_energy"].append(Row(moment, f"{hp_energy:.2f}"))
        rows["sensor.outdoor_temperature"].append(Row(moment, f"{temperature:.1f}"))
        setback = hours >= 22.5 or hours < 4.75
        since = (hours - 22.5) % 24 if setback else 0.0
        indoor = 20.4 - (20.4 - temperature) * (1 - math.exp(-since / 28)) if setback else 20.4
        if 4.75 <= hours < 6.5:
            indoor = 19.0 + (hours - 4.75) / 1.75 * 1.4
        indoor += 0.4 * math.sin(2 * math.pi * (hours - 10) / 24) + noise.gauss(0, 0.05)
        rows["sensor.living_room_temperature"].append(Row(moment, f"{indoor:.1f}"))
        rows["sensor.bedroom_temperature"].append(Row(moment, f"{indoor - 2.1:.1f}"))
        office_warm = 0.8 if moment in load_spans["monitor"] else 0.0
        rows["sensor.office_temperature"].append(Row(moment, f"{indoor - 0.6 + office_warm:.1f}"))
        humidity = 47 + 5 * math.sin(2 * math.pi * (hours - 16) / 24) + (6 if moment in load_spans["cooking"] else 0)
        rows["sensor.living_room_humidity"].append(Row(moment, f"{humidity + noise.gauss(0, 0.4):.0f}"))
        charging = plan.bed - 600 <= moment or moment < plan.wake  # on its charger overnight
        battery = min(100.0, battery + 2.2) if charging else max(18.0, battery - 0.3)
        rows["sensor.alex_phone_battery"].append(Row(moment, f"{battery:.0f}"))
        if moment < ev_failed:
            rows["sensor.ev_charger_power"].append(Row(moment, f"{ev:.0f}"))
            rows["sensor.ev_charger_energy"].append(Row(moment, f"{ev_energy:.2f}"))
        if (hours >= 23.75 or hours < 0.9166) and moment < t_now:
            night_samples.append(power)
        energy += power * STEP.total_seconds() / 3600 / 1000
        hp_energy += hp * STEP.total_seconds() / 3600 / 1000
        ev_energy += ev * STEP.total_seconds() / 3600 / 1000
    for entity_id, sensor_rows in rows.items():
        for row in sensor_rows:
            build.change(entity_id, row.when, row.state)

    # weather: met.no's condition every three hours, with the outdoor temperature of the moment
    sky = random.Random(f"{SEED}:weather")
    moment = datetime.combine(first_day, time(0), tzinfo=zone).timestamp()
    while moment <= t_now:
        local = datetime.fromtimestamp(moment, zone)
        condition = sky.choice(["cloudy", "cloudy", "partlycloudy", "rainy", "sunny"])
        if condition == "sunny" and not 7 <= local.hour < 19:
            condition = "clear-night"
        weather = dict(entities["weather.home"].attributes)
        weather.update(
            {
                "temperature": round(outdoor(moment), 1),
                "humidity": sky.randint(70, 95),
                "pressure": round(sky.uniform(1002, 1026), 1),
                "wind_bearing": round(sky.uniform(180, 300), 1),
                "wind_speed": round(sky.uniform(6, 28), 1),
                "cloud_coverage": sky.randint(20, 100),
                "dew_point": round(outdoor(moment) - sky.uniform(1, 4), 1),
            }
        )
        build.change("weather.home", moment, condition, weather)
        moment += 3 * 3600
    # zone.home counts the people at home
    home = {"alex": True, "sam": True}
    zone_attributes = dict(entities["zone.home"].attributes)
    people = sorted(
        (row.when, person, row.state == "home") for person in home for row in build.changes.get(f"person.{person}", ())
    )
    for when, person, at_home in people:
        home[person] = at_home
        persons = [f"person.{p}" for p, h in sorted(home.items()) if h]
        build.change("zone.home", when, str(len(persons)), {**zone_attributes, "persons": persons})
    build.change(
        "climate.heat_pump",
        ha_started + 1,
        "heat",
        {
            **entities["climate.heat_pump"].attributes,
            "current_temperature": 20.4,
            "temperature": 20,
            "hvac_action": "heating",
        },
    )

    # -- the EV charger integration fails two days before now
    for entity_id in ("sensor.ev_charger_power", "sensor.ev_charger_energy", "switch.ev_charger"):
        build.change(entity_id, ev_failed + 4.3, "unavailable")
    ev_lines = (
        LogLine(
            ev_failed + 4.217,
            "ERROR",
            EV_LOGGER,
            "Error fetching wallbox data: 403 Client Error: Forbidden for url: "
            "https://user-api.wall-box.com/chargers/status/48213",
        ),
        LogLine(
            ev_failed + 4.219,
            "WARNING",
            "homeassistant.config_entries",
            f"Config entry '{EV_ENTRY_TITLE}' for {EV_INTEGRATION} integration could not authenticate: "
            "Invalid authentication",
        ),
    )
    build.log.extend(ev_lines)
    # "Tell Sam the car is charged" fired after every session the charger still reported
    for _, ended, _ in ev_sessions:
        if t_start < ended + 5 * minute < ev_failed:
            build.automation("1709900000009", ended + 5 * minute, "numeric state of sensor.ev_charger_power")
    build.log.extend(
        (
            LogLine(
                ha_started + 0.913,
                "WARNING",
                "homeassistant.loader",
                "We found a custom integration hacs which has not been tested by Home Assistant. This component "
                "might cause stability problems, be sure to disable it if you experience issues with Home Assistant",
                thread="SyncWorker_0",
            ),
            LogLine(
                ha_started + 2.486,
                "WARNING",
                "homeassistant.components.recorder.util",
                "The system could not validate that the sqlite3 database at //config/home-assistant_v2.db was "
                "shutdown cleanly",
                thread="Recorder",
            ),
            LogLine(
                garage_bulb_lost + 12.052,
                "WARNING",
                "homeassistant.components.zha.core.cluster_handlers",
                "[0x5A1C:1:0x0006]: async_initialize: all attempts have failed: "
                "[DeliveryError('Failed to deliver message: <EmberStatus.DELIVERY_FAILED: 102>')]",
            ),
        )
    )

    # -- assemble: each entity's rows up to now, from the last one at or before the window's start
    timelines: dict[str, tuple[Row, ...]] = {}
    for entity_id in entities:
        changes = sorted(build.changes.get(entity_id, ()), key=lambda r: r.when)
        kept: list[Row] = []
        for row in changes:
            if row.when > t_now:
                break
            if kept and kept[-1].state == row.state and row.attributes == kept[-1].attributes:
                continue  # not a change
            row = Row(row.when, row.state, row.attributes, row.context, changed=not kept or kept[-1].state != row.state)
            if kept and kept[-1].when < t_start and row.when <= t_start:
                kept[-1] = row
            else:
                kept.append(row)
        if not kept:
            raise AssertionError(f"no state for {entity_id}")  # pragma: no cover - a bug in the plan
        timelines[entity_id] = tuple(kept)
    runs = tuple(sorted((r for r in build.runs if r.when <= t_now), key=lambda r: r.when))
    last_updated: dict[str, tuple[float, Mapping[str, Any]]] = {}
    for run in runs:
        if run.kind in ("automation_triggered", "script_started") and run.entity_id:
            attributes = dict(entities[run.entity_id].attributes)
            attributes["last_triggered"] = _iso(run.when)
            last_updated[run.entity_id] = (run.when, MappingProxyType(attributes))
    log = tuple(sorted((line for line in build.log if line.when <= t_now), key=lambda line: line.when))

    garage_runs = tuple(_dt(t) for t in sorted(garage_fired) if t_start <= t <= t_now)
    week_sessions = tuple(
        (_dt(a), _dt(b), round(ev_kwh.get(index, 0.0), 3))
        for index, (a, b, _) in enumerate(ev_sessions)
        if t_start <= a and b <= t_now
    )
    facts = SampleFacts(
        now=now,
        start=start,
        time_zone=TIME_ZONE,
        entity_count=len(entities),
        domains=tuple(sorted({e.split(".", 1)[0] for e in entities})),
        areas=MappingProxyType(dict(AREAS)),
        ha_started=_dt(ha_started),
        week_energy_kwh=round(energy_at[grid[-1]] - energy_at[grid[0]], 3),
        night_standby_w=float(statistics.median(night_samples)),
        ev_failed_at=_dt(ev_failed),
        ev_log_lines=tuple(line.text(zone) for line in ev_lines),
        ev_sessions=week_sessions,
        ev_week_kwh=round(sum(kwh for _, _, kwh in week_sessions), 3),
        broken_automation_fired=garage_runs,
    )
    config = {
        "location_name": "Aether Sample Home",
        "latitude": LATITUDE,
        "longitude": LONGITUDE,
        "elevation": 5,
        "radius": 100,
        "time_zone": TIME_ZONE,
        "unit_system": {
            "length": "km",
            "accumulated_precipitation": "mm",
            "area": "m²",
            "mass": "g",
            "pressure": "Pa",
            "temperature": "°C",
            "volume": "L",
            "wind_speed": "m/s",
        },
        "currency": "EUR",
        "country": "NL",
        "language": "en",
        "version": VERSION,
        "state": "RUNNING",
        "safe_mode": False,
        "recovery_mode": False,
        "config_dir": "/config",
        "external_url": None,
        "internal_url": "http://homeassistant.local:8123",
        "allowlist_external_dirs": ["/config/www", "/media"],
        "allowlist_external_urls": [],
        "config_source": "storage",
        "components": sorted(
            {e.integration for e in entities.values()}
            | {
                "api",
                "automation",
                "config",
                "frontend",
                "history",
                "http",
                "logbook",
                "recorder",
                "script",
                "sensor",
                "binary_sensor",
                "light",
                "switch",
                "climate",
                "button",
                "lock",
                "cover",
                "media_player",
                "weather",
                "notify",
                "energy",
                "hacs",
            }
        ),
    }
    return Dataset(
        now=now,
        start=start,
        zone=zone,
        entities=MappingProxyType(entities),
        timelines=MappingProxyType(timelines),
        times=MappingProxyType({e: tuple(r.when for r in rows_) for e, rows_ in timelines.items()}),
        last_updated=MappingProxyType(last_updated),
        runs=runs,
        log=log,
        automations=tuple(MappingProxyType(dict(a)) for a in _automations()),
        scripts=MappingProxyType({k: MappingProxyType(v) for k, v in _scripts().items()}),
        areas=MappingProxyType(dict(AREAS)),
        services=_services(),
        config=MappingProxyType(config),
        facts=facts,
        runs_by_id=MappingProxyType({run.id: run for run in runs}),
    )


def _dt(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)


def _iso(moment: float) -> str:
    return _dt(moment).isoformat()
