"""HA automations: checked in shape (triggers, conditions, actions as HA's automation schema has them)
and in meaning (every entity, service and area exists in this home), shown as YAML and as a diff.

An invalid proposal carries its reasons and is never offered for approval.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

ENTITY_ID = re.compile(r"^[a-z_]+\.[a-z0-9_]+$")
TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$")


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class Trigger(_Part):
    trigger: Literal[
        "time", "state", "numeric_state", "sun", "time_pattern", "event", "homeassistant", "template", "zone"
    ]
    at: str | list[str] | None = None
    entity_id: str | list[str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _platform_is_trigger(cls, data: Any) -> Any:  # HA accepts the older `platform:` key too
        if isinstance(data, dict) and "trigger" not in data and "platform" in data:
            data = {**data, "trigger": data["platform"]}
            data.pop("platform")
        return data

    @model_validator(mode="after")
    def _complete(self) -> Trigger:
        if self.trigger == "time":
            times = [self.at] if isinstance(self.at, str) else (self.at or [])
            if not times or not all(TIME.match(t) or ENTITY_ID.match(t) for t in times):
                raise ValueError("a time trigger needs `at` as HH:MM[:SS] (or an input_datetime entity)")
        if self.trigger in ("state", "numeric_state") and not self.entity_id:
            raise ValueError(f"a {self.trigger} trigger needs `entity_id`")
        return self


class Condition(_Part):
    condition: Literal["state", "numeric_state", "time", "sun", "template", "and", "or", "not", "zone", "trigger"]


class Action(_Part):
    action: str | None = None  # domain.service
    target: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    delay: Any = None
    wait_template: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _service_is_action(cls, data: Any) -> Any:  # HA accepts the older `service:` key too
        if isinstance(data, dict) and "action" not in data and "service" in data:
            data = {**data, "action": data["service"]}
            data.pop("service")
        return data

    @model_validator(mode="after")
    def _something(self) -> Action:
        if self.action is None and self.delay is None and self.wait_template is None:
            raise ValueError("an action calls a service (`action: domain.service`) or waits (`delay`, a template)")
        if self.action is not None and not re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", self.action):
            raise ValueError(f"`action` {self.action!r} is not domain.service")
        return self


class Automation(_Part):
    alias: str
    description: str = ""
    mode: Literal["single", "restart", "queued", "parallel"] = "single"
    triggers: list[Trigger]
    conditions: list[Condition] = []
    actions: list[Action]

    @model_validator(mode="before")
    @classmethod
    def _plural_keys(cls, data: Any) -> Any:  # `trigger:`/`condition:`/`action:` are the older spellings
        if isinstance(data, dict):
            data = dict(data)
            for old, new in (("trigger", "triggers"), ("condition", "conditions"), ("action", "actions")):
                if old in data and new not in data:
                    value = data.pop(old)
                    data[new] = value if isinstance(value, list) else [value]
        return data

    @model_validator(mode="after")
    def _not_empty(self) -> Automation:
        if not self.triggers or not self.actions:
            raise ValueError("an automation needs at least one trigger and one action")
        return self


def structural_errors(config: Mapping[str, Any]) -> list[str]:
    """What in the config HA's automation schema would refuse, one line each (empty: valid)."""
    try:
        Automation.model_validate(dict(config))
    except ValidationError as exc:
        return [f"{'.'.join(str(p) for p in error['loc']) or 'automation'}: {error['msg']}" for error in exc.errors()]
    return []


def referenced(config: Mapping[str, Any]) -> tuple[set[str], set[str], set[str]]:
    """(entity ids, services, areas) the automation names anywhere."""
    entities: set[str] = set()
    services: set[str] = set()
    areas: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for inner_key, inner in value.items():
                walk(inner, inner_key)
        elif isinstance(value, list):
            for inner in value:
                walk(inner, key)
        elif isinstance(value, str):
            if key == "entity_id" and ENTITY_ID.match(value):
                entities.add(value)
            elif key in ("action", "service"):
                services.add(value)
            elif key == "area_id":
                areas.add(value)

    walk(dict(config))
    return entities, services, areas


def semantic_errors(
    config: Mapping[str, Any], entities: Iterable[str], services: Iterable[str], areas: Iterable[str]
) -> list[str]:
    """What the automation names that this home does not have."""
    named_entities, named_services, named_areas = referenced(config)
    known_entities, known_services, known_areas = set(entities), set(services), set(areas)
    return (
        [f"no entity {e} in this home" for e in sorted(named_entities - known_entities)]
        + [f"no service {s} in this home" for s in sorted(named_services - known_services)]
        + [f"no area {a} in this home" for a in sorted(named_areas - known_areas)]
    )


def as_yaml(config: Mapping[str, Any] | None) -> str:
    return "" if config is None else yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True)


def diff(original: Mapping[str, Any] | None, changed: Mapping[str, Any] | None, name: str) -> str:
    """A unified diff of the automation's YAML, as the approval question shows it."""
    before, after = as_yaml(original).splitlines(keepends=True), as_yaml(changed).splitlines(keepends=True)
    return "".join(
        difflib.unified_diff(before, after, f"{name} (now)" if original else "/dev/null", f"{name} (proposed)")
    )


def automation_id_for(alias: str, taken: Iterable[str]) -> str:
    """A new automation's id: its alias as a slug, unique in the home."""
    base = re.sub(r"[^a-z0-9]+", "_", alias.lower()).strip("_")[:60] or "automation"
    existing, candidate, n = set(taken), base, 2
    while candidate in existing:
        candidate, n = f"{base}_{n}", n + 1
    return candidate
