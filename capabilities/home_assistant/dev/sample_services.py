"""What calling a service does in the sample home: its targets, the states it changes, and the
automations and scripts it runs (a part of `sample.SampleHome`, kept in a module of its own)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from capabilities.home_assistant.dev.sample_data import (
    Dataset,
    Entity,
    LogLine,
    Run,
)
from capabilities.home_assistant.ha.port import (
    State,
)

if TYPE_CHECKING:
    from capabilities.home_assistant.dev.sample_data import Dataset, Entity, LogLine, Run


_ON_OFF_DOMAINS = frozenset({"light", "switch", "input_boolean", "automation", "fan"})
_STOPS = ("delay", "wait_for_trigger", "wait_template")  # the sample's clock does not move past these
MAX_NESTING = 5


class SampleServices:
    """Service calls against the sample home's states; `SampleHome` holds the states and the clock."""

    if TYPE_CHECKING:  # what SampleHome holds and does, which service calls read and change
        _data: Dataset
        _entities: dict[str, Entity]
        _current: dict[str, State]
        _runs_by_id: dict[str, Run]
        _log: list[LogLine]
        _automations: dict[str, dict[str, Any]]
        _scripts: dict[str, dict[str, Any]]
        notifications: list[dict[str, Any]]

        _set: Callable[..., bool]  # SampleHome._set: records a new state; False when nothing changed
        _run: Callable[..., str]  # SampleHome._run: starts a run (a context), returns its id

    # ------------------------------------------------------------------ services

    def _has_service(self, domain: str, service: str) -> bool:
        for described in self._data.services:
            if described["domain"] == domain:
                return service in described["services"]
        return False

    def _targets(self, domain: str, data: Mapping[str, Any]) -> list[str]:
        target = data.get("target") if isinstance(data.get("target"), Mapping) else {}
        assert isinstance(target, Mapping)
        found: list[str] = []
        for source in (data, target):
            ids = source.get("entity_id")
            for entity_id in [ids] if isinstance(ids, str) else list(ids or []):
                if str(entity_id).lower() == "all":
                    found += [e for e in sorted(self._current) if domain in ("homeassistant", e.split(".", 1)[0])]
                else:
                    found.append(str(entity_id).lower())
            areas = source.get("area_id")
            for area in [areas] if isinstance(areas, str) else list(areas or []):
                found += [
                    e
                    for e, entity in sorted(self._entities.items())
                    if entity.area == area and (domain == "homeassistant" or entity.domain == domain)
                ]
        return list(dict.fromkeys(found))

    def _apply(
        self, domain: str, service: str, data: Mapping[str, Any], context: str, when: datetime, depth: int
    ) -> list[str]:
        if depth > MAX_NESTING:
            return []
        if domain in ("notify", "persistent_notification") or (domain, service) == ("logbook", "log"):
            self.notifications.append({"service": f"{domain}.{service}", "data": copy.deepcopy(dict(data))})
            return []
        if domain == "automation" and service == "reload":
            return []
        if domain == "script" and service not in ("turn_on", "turn_off", "toggle", "reload"):
            return self._run_script(service, context, when, depth)
        targets = self._targets(domain, data)
        missing = [e for e in targets if e not in self._current or self._current[e].state == "unavailable"]
        if missing:
            self._log.append(
                LogLine(
                    when.timestamp(),
                    "WARNING",
                    "homeassistant.helpers.service",
                    f"Referenced entities {', '.join(missing)} are missing or not currently available",
                )
            )
        changed: list[str] = []
        for entity_id in targets:
            if entity_id in missing:
                continue
            entity_domain = entity_id.split(".", 1)[0]
            if domain != "homeassistant" and entity_domain != domain:
                continue
            if domain == "homeassistant" and service in ("turn_on", "turn_off", "toggle"):
                if self._has_service(entity_domain, service):
                    changed += self._apply(entity_domain, service, {"entity_id": entity_id}, context, when, depth + 1)
                continue
            changed += self._act(entity_id, entity_domain, service, data, context, when, depth)
        return changed

    def _act(
        self,
        entity_id: str,
        domain: str,
        service: str,
        data: Mapping[str, Any],
        context: str,
        when: datetime,
        depth: int,
    ) -> list[str]:
        state = self._current[entity_id]
        attributes = dict(state.attributes)
        new_state = state.state
        if service == "toggle" and domain in _ON_OFF_DOMAINS | {"cover"}:
            if domain == "cover":
                service = "close_cover" if state.state == "open" else "open_cover"
            else:
                service = "turn_off" if state.state == "on" else "turn_on"
        if domain == "automation" and service == "trigger":
            return self._trigger_automation(entity_id, context, when, depth)
        if domain == "script" and service == "turn_on":
            return self._run_script(entity_id.split(".", 1)[1], context, when, depth)
        if domain in _ON_OFF_DOMAINS and service in ("turn_on", "turn_off"):
            new_state = "on" if service == "turn_on" else "off"
            if domain == "light":
                if new_state == "on":
                    brightness = data.get("brightness")
                    if "brightness_pct" in data:
                        brightness = round(float(data["brightness_pct"]) * 255 / 100)
                    attributes["brightness"] = int(brightness or attributes.get("brightness") or 255)
                    modes = attributes.get("supported_color_modes") or ["brightness"]
                    attributes["color_mode"] = "color_temp" if "color_temp" in modes else "brightness"
                    if "color_temp_kelvin" in data:
                        attributes["color_temp_kelvin"] = int(data["color_temp_kelvin"])
                else:
                    attributes.update({"brightness": None, "color_mode": None})
        elif domain == "climate":
            if service == "set_temperature" and "temperature" in data:
                attributes["temperature"] = float(data["temperature"])
            if service in ("set_temperature", "set_hvac_mode") and data.get("hvac_mode"):
                new_state = str(data["hvac_mode"])
            if service in ("turn_on", "turn_off"):
                new_state = "heat" if service == "turn_on" else "off"
        elif domain == "lock" and service in ("lock", "unlock", "open"):
            new_state = {"lock": "locked", "unlock": "unlocked", "open": "open"}[service]
        elif domain == "cover":
            if service in ("open_cover", "close_cover"):
                new_state = "open" if service == "open_cover" else "closed"
                attributes["current_position"] = 100 if new_state == "open" else 0
            elif service == "set_cover_position":
                attributes["current_position"] = int(data.get("position", 0))
                new_state = "open" if attributes["current_position"] > 0 else "closed"
        elif domain == "media_player":
            new_state = {
                "turn_on": "on",
                "turn_off": "off",
                "media_play": "playing",
                "media_pause": "paused",
                "media_stop": "idle",
            }.get(service, new_state)
            if service == "volume_set":
                attributes["volume_level"] = float(data.get("volume_level", 0))
        elif (domain, service) in (("button", "press"), ("scene", "turn_on")):
            new_state = when.isoformat()
        return [entity_id] if self._set(entity_id, new_state, attributes, when, context) else []

    def _trigger_automation(self, entity_id: str, context: str, when: datetime, depth: int) -> list[str]:
        automation_id = str(self._current[entity_id].attributes.get("id", ""))
        config = self._automations.get(automation_id, {})
        run = self._run(
            "automation_triggered",
            when,
            entity_id=entity_id,
            name=str(config.get("alias") or entity_id),
            source="action automation.trigger",
        )
        attributes = {**self._current[entity_id].attributes, "last_triggered": when.isoformat()}
        self._set(entity_id, self._current[entity_id].state, attributes, when, run)
        self._perform(config.get("actions", config.get("action", [])), run, when, depth)
        return []  # all of it happened in the run's own context, not the caller's: HA reports none of it

    def _run_script(self, object_id: str, context: str, when: datetime, depth: int) -> list[str]:
        entity_id = f"script.{object_id}"
        script = self._scripts.get(object_id)
        if script is None or entity_id not in self._current:
            return []
        caller = self._runs_by_id.get(context)
        run = self._run(
            "script_started",
            when,
            entity_id=entity_id,
            name=str(script["alias"]),
            user_id=caller.user_id if caller else None,
        )
        attributes = {**self._current[entity_id].attributes, "last_triggered": when.isoformat()}
        changed = [entity_id] if self._set(entity_id, "off", attributes, when, run) else []
        return changed + self._perform(script["sequence"], run, when, depth)

    def _perform(self, actions: Any, context: str, when: datetime, depth: int) -> list[str]:
        """Runs an automation's or script's service calls in order, up to its first wait (the sample's
        clock does not run on); choices and conditions are not evaluated."""
        changed: list[str] = []
        for action in actions if isinstance(actions, list) else [actions]:
            if not isinstance(action, Mapping):
                continue
            if any(key in action for key in _STOPS):
                break
            name = action.get("action") or action.get("service")
            if not isinstance(name, str) or "." not in name:
                continue
            domain, service = name.split(".", 1)
            if not self._has_service(domain, service):
                continue
            data = dict(action.get("data") or {})
            if isinstance(action.get("target"), Mapping):
                data["target"] = action["target"]
            if "entity_id" in action:
                data["entity_id"] = action["entity_id"]
            changed += self._apply(domain, service, data, context, when, depth + 1)
        return changed
