"""What the sample home's HA says to `validate_config` (the websocket command its automation editor uses):
each part (triggers, conditions, actions) valid or not, with an error in HA's words, for the version the
sample home plays. Only what a version refuses for its spelling and shape: the rest HA checks at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capabilities.home_assistant.syntax import syntax_for

# the command's keys in either spelling -> what each part is
PARTS = {
    "trigger": "trigger",
    "triggers": "trigger",
    "condition": "condition",
    "conditions": "condition",
    "action": "action",
    "actions": "action",
}


def validate_parts(parts: Mapping[str, Any], version: str) -> dict[str, dict[str, Any]]:
    """{key: {"valid": bool, "error": str | None}} for each part given, as HA at `version` answers."""
    syntax = syntax_for(version)
    answer: dict[str, dict[str, Any]] = {}
    for key, value in parts.items():
        if key not in PARTS or (key.endswith("s") and not syntax.plural):
            raise ValueError(f"extra keys not allowed @ data['{key}']")
        error = _part_error(PARTS[key], value if isinstance(value, list) else [value], syntax.plural, syntax.action_key)
        answer[key] = {"valid": error is None, "error": error}
    return answer


def _part_error(part: str, items: list[Any], plural: bool, action_key: bool) -> str | None:
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            return f"expected a dictionary @ data[{index}]"
        if part == "trigger":
            kind = item.get("trigger") if plural else None
            kind = kind or item.get("platform")
            if "trigger" in item and not plural:
                return f"extra keys not allowed @ data[{index}]['trigger']"
            if not kind:
                return f"required key not provided @ data[{index}]['platform']"
        elif part == "condition" and "condition" not in item:
            return f"required key not provided @ data[{index}]['condition']"
        elif part == "action" and "action" in item and isinstance(item["action"], str) and not action_key:
            return f"Unable to determine action @ data[{index}]"
    return None
