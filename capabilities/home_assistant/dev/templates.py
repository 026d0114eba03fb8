"""Renders the Home Assistant templates a mission asks the offline sample home to render.

HA renders templates with Jinja2's immutable sandbox and its own functions, filters and tests
(states(), state_attr(), area_name(), `| float(0)`, `is is_state`...). So does the sample home:
`jinja2.sandbox.ImmutableSandboxedEnvironment` with those of HA's that analyses and validations use
registered over a TemplateHome. The sandbox keeps a template from reaching Python's internals
(no `_` attribute, no unsafe callable, no mutating a list or a dict); on top of it a method is
reachable only if it is one of the few harmless ones listed in `_METHODS`, a string or a list cannot
be repeated into a huge one, and an expression cannot nest without bound. Whatever does not render
(a syntax error, an undefined function, a bad conversion, a refused access) is a TemplateError, which
the sample reports as HA reports a template it cannot render (HTTP 400).
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any

from jinja2 import ChainableUndefined, TemplateSyntaxError, Undefined
from jinja2 import TemplateError as JinjaError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from capabilities.home_assistant.ha.port import State

MAX_TEMPLATE = 20_000
MAX_DEPTH = 60  # brackets within brackets: Jinja compiles an expression to nested Python
MAX_EXPONENT = 100


class TemplateError(ValueError):
    """The template does not render (a syntax error, an unknown function, a bad conversion, a refused access)."""


@dataclass(frozen=True)
class TemplateHome:
    """What a template can see: states by entity id, the home's areas and integrations, its clock."""

    states: Mapping[str, State]
    now: datetime
    time_zone: tzinfo
    areas: Mapping[str, str] = field(default_factory=dict)  # area id -> name
    entity_areas: Mapping[str, str] = field(default_factory=dict)  # entity id -> area id
    entity_integrations: Mapping[str, str] = field(default_factory=dict)  # entity id -> integration


def render(template: str, home: TemplateHome) -> str:
    """The template rendered to text, as HA renders it."""
    if len(template) > MAX_TEMPLATE:
        raise TemplateError(f"template longer than {MAX_TEMPLATE} characters")
    environment = _HomeEnvironment(home)
    try:
        _check_depth(environment, template)
        return environment.from_string(template).render()
    except TemplateError:
        raise
    except TemplateSyntaxError as exc:  # HA's wording: the Jinja error's class, its message
        raise TemplateError(f"{type(exc).__name__}: {exc.message} (line {exc.lineno})") from None
    except JinjaError as exc:  # a refused access, an undefined name called, a failed filter or test
        raise TemplateError(f"{type(exc).__name__}: {exc}") from None
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, ZeroDivisionError) as exc:
        raise TemplateError(f"{type(exc).__name__}: {exc}") from None


def _check_depth(environment: ImmutableSandboxedEnvironment, template: str) -> None:
    depth = 0
    for _, kind, value in environment.lex(template):
        if kind == "operator" and value in "([{":
            depth += 1
            if depth > MAX_DEPTH:
                raise TemplateError("expression nested too deeply")
        elif kind == "operator" and value in ")]}":
            depth -= 1


# ------------------------------------------------------------------------------- what templates see


class TemplateState:
    """A state as templates see it: `states.light.kitchen.state`, `.attributes`, `.name`..."""

    def __init__(self, state: State) -> None:
        self._state = state

    @property
    def entity_id(self) -> str:
        return self._state.entity_id

    @property
    def state(self) -> str:
        return self._state.state

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self._state.attributes)

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def domain(self) -> str:
        return self._state.domain

    @property
    def object_id(self) -> str:
        return self._state.entity_id.split(".", 1)[1]

    @property
    def last_changed(self) -> datetime | None:
        return self._state.last_changed

    @property
    def last_updated(self) -> datetime | None:
        return self._state.last_updated

    def __str__(self) -> str:
        return f"<template TemplateState(<state {self._state.entity_id}={self._state.state}>)>"


class _DomainStates:
    """`states.sensor`: the states of one domain, iterable, and `states.sensor.x` by object id.

    Domains and object ids are reached by item (the sandbox tries an item when there is no such
    attribute), so this class has no public attribute a domain's name could shadow."""

    def __init__(self, home: TemplateHome, domain: str | None) -> None:
        self._home, self._domain = home, domain

    def __iter__(self) -> Iterator[TemplateState]:
        for entity_id in sorted(self._home.states):
            if self._domain is None or entity_id.startswith(self._domain + "."):
                yield TemplateState(self._home.states[entity_id])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __getitem__(self, name: str) -> Any:
        if self._domain is None and "." not in name:
            return _DomainStates(self._home, name)
        state = self._home.states.get(name if self._domain is None else f"{self._domain}.{name}")
        if state is None:
            raise KeyError(name)  # undefined, as HA's missing entity renders
        return TemplateState(state)

    def __str__(self) -> str:
        return str([str(state) for state in self])


class _AllStates(_DomainStates):
    """`states`: every domain by name, and `states('sensor.x')` the state of one entity."""

    def __init__(self, home: TemplateHome, lookup: Callable[..., Any]) -> None:
        super().__init__(home, None)
        self._lookup = lookup

    def __call__(self, entity_id: Any, rounded: bool = False, with_unit: bool = False) -> Any:
        return self._lookup(entity_id, rounded, with_unit)


# Methods a template may call, by the type they belong to (any other method is refused).
_METHODS: dict[type, tuple[str, ...]] = {
    str: ("lower", "upper", "startswith", "endswith", "split", "replace", "strip", "title", "isdigit"),
    datetime: ("isoformat", "strftime", "timestamp", "date", "weekday", "isoweekday", "replace"),
    timedelta: ("total_seconds",),
    dict: ("get", "keys", "values", "items"),
}


class _HomeEnvironment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with HA's functions, filters and tests over one TemplateHome."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self, home: TemplateHome) -> None:
        super().__init__(undefined=ChainableUndefined, autoescape=False)
        self.home = home
        states = _AllStates(home, self.states)
        local = lambda value: _as_datetime(value).astimezone(home.time_zone)  # noqa: E731
        in_area = self.area_entities
        self.globals.update(
            states=states,
            is_state=self.is_state,
            state_attr=self.state_attr,
            is_state_attr=self.is_state_attr,
            has_value=self.has_value,
            now=lambda: home.now.astimezone(home.time_zone),
            utcnow=lambda: home.now.astimezone(home.now.tzinfo),
            as_timestamp=_as_timestamp,
            as_datetime=_as_datetime,
            as_local=local,
            timedelta=lambda **parts: timedelta(**{k: float(v) for k, v in parts.items()}),
            float=_float,
            int=_int,
            bool=_bool,
            iif=_iif,
            min=lambda *a: min(a[0] if len(a) == 1 else a),
            max=lambda *a: max(a[0] if len(a) == 1 else a),
            areas=lambda: sorted(home.areas),
            area_name=self.area_name,
            area_id=self.area_id,
            area_entities=in_area,
            integration_entities=lambda name: sorted(
                e for e, i in home.entity_integrations.items() if i == name and e in home.states
            ),
        )
        self.filters.update(
            float=_float,
            int=_int,
            bool=_bool,
            round=_round,
            iif=_iif,
            tojson=lambda value: json.dumps(_plain(value), ensure_ascii=False),
            as_timestamp=_as_timestamp,
            as_datetime=_as_datetime,
            as_local=local,
            area_name=self.area_name,
            area_id=self.area_id,
            area_entities=in_area,
            is_state=self.is_state,
            state_attr=self.state_attr,
            states=self.states,
        )
        self.tests.update(
            is_state=self.is_state,
            is_state_attr=self.is_state_attr,
            has_value=self.has_value,
            search=lambda value, pattern: _regex(pattern).search(str(value)) is not None,
            match=lambda value, pattern: _regex(pattern).match(str(value)) is not None,
            contains=lambda value, other: other in value,
        )

    # the sandbox's rules, tightened
    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if not super().is_safe_attribute(obj, attr, value):
            return False
        if isinstance(obj, _DomainStates | TemplateState | Undefined) or not callable(value):
            return True
        return any(isinstance(obj, kind) and attr in names for kind, names in _METHODS.items())

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        """A refused attribute is an error at once, not an undefined that would render as nothing."""
        raise SecurityError(f"access to '{attribute}' of a {type(obj).__name__} is not allowed")

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        if op == "*" and (isinstance(left, str | list | tuple) or isinstance(right, str | list | tuple)):
            raise TemplateError("repeating strings or lists is not supported")
        if op == "**" and isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
            raise TemplateError("exponent too large")
        return (operator.mul if op == "*" else operator.pow)(left, right)

    # HA's functions
    def states(self, entity_id: Any, rounded: bool = False, with_unit: bool = False) -> Any:
        state = self.home.states.get(_entity_id(entity_id))
        if state is None:
            return "unknown"
        value = state.state
        if rounded:
            try:
                value = str(round(float(value), int(state.attributes.get("display_precision", 1))))
            except ValueError:
                pass
        unit = state.attributes.get("unit_of_measurement")
        return f"{value} {unit}" if with_unit and unit else value

    def is_state(self, entity_id: Any, value: Any) -> bool:
        current = self.states(entity_id)
        return current in value if isinstance(value, list) else bool(current == value)

    def state_attr(self, entity_id: Any, attribute: Any) -> Any:
        state = self.home.states.get(_entity_id(entity_id))
        return None if state is None else state.attributes.get(str(attribute))

    def is_state_attr(self, entity_id: Any, attribute: Any, value: Any) -> bool:
        return bool(self.state_attr(entity_id, attribute) == value)

    def has_value(self, entity_id: Any) -> bool:
        return self.states(entity_id) not in ("unknown", "unavailable")

    def area_id(self, lookup: Any) -> Any:
        text = str(lookup)
        if text in self.home.areas:
            return text
        for area, name in self.home.areas.items():
            if name.lower() == text.lower():
                return area
        return self.home.entity_areas.get(text)

    def area_name(self, lookup: Any) -> Any:
        area = self.area_id(lookup)
        return self.home.areas.get(area) if area else None

    def area_entities(self, lookup: Any) -> list[str]:
        area = self.area_id(lookup)
        return sorted(e for e, a in self.home.entity_areas.items() if a == area and e in self.home.states)


def _entity_id(value: Any) -> str:
    if isinstance(value, TemplateState):
        return value.entity_id
    return str(value).lower()


def _regex(pattern: Any) -> re.Pattern[str]:
    return re.compile(str(pattern))


_MISSING = object()


def _float(value: Any, default: Any = _MISSING) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        if default is _MISSING:
            raise TemplateError(f"float got invalid input '{value}' and no default was specified") from None
        return default


def _int(value: Any, default: Any = _MISSING, base: int = 10) -> Any:
    try:
        return int(value, base) if isinstance(value, str) and base != 10 else int(float(value))
    except (TypeError, ValueError, OverflowError):
        if default is _MISSING:
            raise TemplateError(f"int got invalid input '{value}' and no default was specified") from None
        return default


def _bool(value: Any, default: Any = _MISSING) -> Any:
    text = str(value).lower()
    if text in ("true", "on", "yes", "1", "enable"):
        return True
    if text in ("false", "off", "no", "0", "disable", "none"):
        return False
    if default is _MISSING:
        raise TemplateError(f"bool got invalid input '{value}' and no default was specified")
    return default


def _iif(value: Any, if_true: Any = True, if_false: Any = False, if_none: Any = _MISSING) -> Any:
    """HA's immediate if: `iif(condition, 'yes', 'no')`, and `if_none` when the condition is None."""
    if value is None and if_none is not _MISSING:
        return if_none
    return if_true if value else if_false


def _round(value: Any, precision: Any = 0, method: str = "common", default: Any = _MISSING) -> Any:
    number = _float(value, default)
    if number is default and default is not _MISSING:
        return default
    digits = int(precision)
    if method == "ceil":
        number = math.ceil(number * 10**digits) / 10**digits
    elif method == "floor":
        number = math.floor(number * 10**digits) / 10**digits
    else:
        number = round(number, digits)
    return int(number) if digits == 0 else number


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise TemplateError(f"as_datetime got invalid input '{value}'") from None


def _as_timestamp(value: Any, default: Any = _MISSING) -> Any:
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return _as_datetime(value).timestamp()
    except TemplateError:
        if default is _MISSING:
            raise
        return default


def _plain(value: Any) -> Any:
    """A value as JSON sees it (tojson)."""
    if isinstance(value, TemplateState):
        fields = ("entity_id", "state", "attributes", "last_changed", "last_updated")
        return {name: _plain(getattr(value, name)) for name in fields}
    if isinstance(value, _DomainStates):
        return [_plain(state) for state in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, ChainableUndefined):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
