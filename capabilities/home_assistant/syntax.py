"""Which automation syntax a Home Assistant version takes, and a proposal written in it.

HA renamed its automation keys twice, and each release accepts the older spellings, never the newer:
2024.8 made `action:` the name of a service call (`service:` before), 2024.10 made the top-level keys
plural (`triggers`/`conditions`/`actions`) and a trigger's kind `trigger:` (`platform:` before). A 2024.3
server refuses `triggers` with "extra keys not allowed", so a proposal is written for the server it
targets: the newest spelling that server reads, the oldest (accepted by every version) when the version
is unknown. Proposals are read in any spelling (capabilities.home_assistant.automation reads them all).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

ACTION_KEY_SINCE = (2024, 8)
PLURAL_KEYS_SINCE = (2024, 10)
_SERVICE = re.compile(r"^[a-z_]+\.[a-z0-9_]+$")
_TOP = (("trigger", "triggers"), ("condition", "conditions"), ("action", "actions"))
_ACTION_LISTS = ("actions", "action", "sequence", "default", "then", "else", "parallel")


class Syntax(NamedTuple):
    """The spelling one HA version reads: plural top-level keys, `action:` for a service call."""

    plural: bool
    action_key: bool

    @property
    def name(self) -> str:
        if self.plural:
            return "2024.10+ (triggers/conditions/actions)"
        return "2024.8-2024.9 (trigger/condition/action, action:)" if self.action_key else "pre-2024.8 (service:)"


OLDEST = Syntax(plural=False, action_key=False)


def release(version: str | None) -> tuple[int, int] | None:
    """(year, month) of a HA version string ("2024.3.3", "2024.10.0b1", "2025.1.0.dev0"), None if unknown."""
    found = re.match(r"^\s*(\d{4})\.(\d{1,2})", version or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def syntax_for(version: str | None) -> Syntax:
    """The newest spelling `version` reads; the oldest (every version reads it) when it is unknown."""
    at = release(version)
    if at is None:
        return OLDEST
    return Syntax(plural=at >= PLURAL_KEYS_SINCE, action_key=at >= ACTION_KEY_SINCE)


def written_for(config: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    """The automation spelt as the HA at `version` reads it (whatever spelling it came in)."""
    syntax = syntax_for(version)
    result: dict[str, Any] = {}
    for key, value in config.items():
        old = next((singular for singular, plural in _TOP if key in (singular, plural)), None)
        if old is None:
            result[key] = value
            continue
        new_key = dict(_TOP)[old] if syntax.plural else old
        items = value if isinstance(value, list) else [value]
        if old == "trigger":
            result[new_key] = [_trigger(item, syntax) for item in items]
        elif old == "action":
            result[new_key] = [_action(item, syntax) for item in items]
        else:
            result[new_key] = [_nested(item, syntax) for item in items]
    return result


def script_written_for(config: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    """A script (its `sequence` of steps) spelt as the HA at `version` reads it."""
    syntax = syntax_for(version)
    return {key: _nested(value, syntax, key) for key, value in config.items()}


def spelling_errors(config: Mapping[str, Any], version: str | None) -> list[str]:
    """What in `config` the HA at `version` would refuse for its spelling alone (one line each)."""
    syntax = syntax_for(version)
    shown = version or "an unknown version"
    errors = []
    if not syntax.plural:
        errors += [
            f"{plural}: Home Assistant {shown} does not read `{plural}` (2024.10+); write `{singular}`"
            for singular, plural in _TOP
            if plural in config
        ]
    return errors + [f"{where}: Home Assistant {shown} {problem}" for where, problem in _walk(config, syntax, "")]


def _trigger(item: Any, syntax: Syntax) -> Any:
    if not isinstance(item, Mapping):
        return item
    kind = item.get("trigger", item.get("platform"))
    rest = {k: _nested(v, syntax) for k, v in item.items() if k not in ("trigger", "platform")}
    if kind is None:
        return rest
    return {"trigger": kind, **rest} if syntax.plural else {"platform": kind, **rest}


def _action(item: Any, syntax: Syntax) -> Any:
    if not isinstance(item, Mapping):
        return item
    service = item.get("action", item.get("service"))
    rest = {k: _nested(v, syntax, k) for k, v in item.items() if k not in ("action", "service")}
    if not isinstance(service, str) or not _SERVICE.match(service):
        return {k: _nested(v, syntax, k) for k, v in item.items()}
    return {"action": service, **rest} if syntax.action_key else {"service": service, **rest}


def _nested(value: Any, syntax: Syntax, key: str = "") -> Any:
    """Inside a trigger, condition or action: the lists of actions (a choose's sequence, an if's then)
    and of triggers (wait_for_trigger) are spelt like the top level's."""
    if isinstance(value, list):
        if key in _ACTION_LISTS:
            return [_action(item, syntax) for item in value]
        if key == "wait_for_trigger":
            return [_trigger(item, syntax) for item in value]
        return [_nested(item, syntax) for item in value]
    if isinstance(value, Mapping):
        return {k: _nested(v, syntax, k) for k, v in value.items()}
    return value


def _walk(value: Any, syntax: Syntax, where: str) -> list[tuple[str, str]]:
    """(path, problem) for each newer spelling inside the automation that `syntax` does not read."""
    found: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for key, inner in value.items():
            path = f"{where}.{key}" if where else str(key)
            if key == "trigger" and isinstance(inner, str) and not syntax.plural and where:
                found.append((path, "names a trigger's kind `platform:`, not `trigger:` (2024.10+)"))
            if key == "action" and isinstance(inner, str) and not syntax.action_key:
                found.append((path, "calls a service with `service:`, not `action:` (2024.8+)"))
            found += _walk(inner, syntax, path)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _walk(inner, syntax, f"{where}[{index}]")
    return found
