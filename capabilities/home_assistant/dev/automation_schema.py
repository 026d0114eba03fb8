"""What a Home Assistant's config API checks before it stores an automation, by HA version.

POST /api/config/automation/config/<id> validates the body with the automation schema of the running
release and answers 400 {"message": "Message malformed: <voluptuous's first error>"}. The schema
changed twice, so the sample home (playing a given version) refuses what that version refuses:

* before 2024.8 an action names its service with `service:` only (`action:` is "Unable to determine
  action");
* before 2024.10 the keys are singular (`trigger`, `condition`, `action`, `platform:` inside a
  trigger) and the schema allows no other top-level key, so the plural spelling is "extra keys not
  allowed @ data['triggers']". From 2024.10 both spellings are accepted.

The messages are HA 2024.3.3's, read off the real server (tests/integration/capabilities/
test_ha_real_conformance.py holds the fake to them). Only the structure is checked here, as the
config API does before storing; what a trigger platform or a service needs is checked at run time.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from capabilities.home_assistant.ha.port import HABadRequest

PLURAL_SINCE = (2024, 10)  # `triggers:` / `conditions:` / `actions:`, `trigger:` inside a trigger
ACTION_KEY_SINCE = (2024, 8)  # `action:` inside an action (it was `service:`)

# Top-level keys of automation/config.py's PLATFORM_SCHEMA before 2024.10 (it allows no others).
_SINGULAR_KEYS = (
    "id",
    "alias",
    "description",
    "trace",
    "initial_state",
    "hide_entity",
    "trigger",
    "condition",
    "variables",
    "trigger_variables",
    "action",
    "mode",
    "max",
    "max_exceeded",
)
# What tells HA 2024.3's script schema what kind of action a step is (helpers/config_validation.py).
_ACTION_KINDS = frozenset(
    {
        "service",
        "service_template",
        "delay",
        "wait_template",
        "wait_for_trigger",
        "event",
        "condition",
        "choose",
        "if",
        "repeat",
        "variables",
        "stop",
        "device_id",
        "scene",
        "parallel",
        "sequence",
    }
)


def release(version: str) -> tuple[int, int]:
    """(year, month) of an HA version string such as "2024.3.3"."""
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise ValueError(f"not a Home Assistant version: {version!r} (expected e.g. 2024.3.3)") from None


def validated_automation(config: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The automation as the config API of `version` would store it, or HABadRequest as it answers."""
    if not isinstance(config, Mapping):
        raise _malformed("expected a dictionary")
    if release(version) < PLURAL_SINCE:
        _check_singular(config, action_key=release(version) >= ACTION_KEY_SINCE)
    else:
        _check_either(config)
    return copy.deepcopy(dict(config))


def _malformed(error: str) -> HABadRequest:
    return HABadRequest(f"Message malformed: {error}", status=400)


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _check_singular(config: Mapping[str, Any], *, action_key: bool) -> None:
    """Voluptuous reports extra keys (in the body's order) before missing ones."""
    for key in config:
        if key not in _SINGULAR_KEYS:
            raise _malformed(f"extra keys not allowed @ data['{key}']")
    for key in ("trigger", "action"):
        if key not in config:
            raise _malformed(f"required key not provided @ data['{key}']")
    for index, trigger in enumerate(_items(config["trigger"])):
        if not isinstance(trigger, Mapping):
            raise _malformed(f"expected a dictionary @ data['trigger'][{index}]")
        if "platform" not in trigger:
            raise _malformed(f"required key not provided @ data['trigger'][{index}]['platform']")
    kinds = _ACTION_KINDS | {"action"} if action_key else _ACTION_KINDS
    for index, action in enumerate(_items(config["action"])):
        if not isinstance(action, Mapping) or not kinds & set(action):
            raise _malformed(f"Unable to determine action @ data['action'][{index}]")


def _check_either(config: Mapping[str, Any]) -> None:
    """From 2024.10: either spelling, `trigger:` or `platform:` inside a trigger."""
    for plural, singular in (("triggers", "trigger"), ("actions", "action")):
        value = config.get(plural, config.get(singular))
        if not value:
            raise _malformed(f"required key not provided @ data['{plural}']")
        if not all(isinstance(item, Mapping) for item in _items(value)):
            raise _malformed(f"expected a dictionary @ data['{plural}'][0]")
    for index, trigger in enumerate(_items(config.get("triggers", config.get("trigger")))):
        if "trigger" not in trigger and "platform" not in trigger:
            raise _malformed(f"required key not provided @ data['triggers'][{index}]['trigger']")


def validated_parts(parts: Mapping[str, Any], version: str) -> dict[str, dict[str, Any]]:
    """The websocket command `validate_config` (HA's automation editor checks each part with it):
    {key: {"valid": bool, "error": str | None}} for the triggers, conditions and actions given."""
    plural = release(version) >= PLURAL_SINCE
    kinds = _ACTION_KINDS | {"action"} if release(version) >= ACTION_KEY_SINCE else _ACTION_KINDS
    allowed = {"trigger", "condition", "action"} | ({"triggers", "conditions", "actions"} if plural else set())
    answer: dict[str, dict[str, Any]] = {}
    for key, value in parts.items():
        if key not in allowed:
            raise ValueError(f"extra keys not allowed @ data['{key}']")
        error = None
        for index, item in enumerate(_items(value)):
            if not isinstance(item, Mapping):
                error = f"expected a dictionary @ data[{index}]"
            elif key.startswith("trigger") and "platform" not in item and not (plural and "trigger" in item):
                error = f"required key not provided @ data[{index}]['{'trigger' if plural else 'platform'}']"
            elif key.startswith("condition") and "condition" not in item:
                error = f"required key not provided @ data[{index}]['condition']"
            elif key.startswith("action") and not kinds & set(item):
                error = f"Unable to determine action @ data[{index}]"
            if error:
                break
        answer[key] = {"valid": error is None, "error": error}
    return answer
