"""Renders the Home Assistant templates a mission asks the offline sample home to render.

HA renders templates with Jinja2 and its own functions (states(), state_attr(), area_name()...).
Jinja2 is not in the Lambda layer, and a sample home only needs the expressions analyses and
validations use, so this is a small parser for Jinja *expressions* (`{{ ... }}`, with Jinja's
precedence: filters bind tighter than arithmetic) over HA's functions and filters. Statements
(`{% ... %}`) are refused with a TemplateError, which the sample reports as HA reports a template
it cannot render (HTTP 400). Nothing here evaluates Python: only the names below can be reached.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any

from capabilities.home_assistant.ha.port import State

MAX_TEMPLATE = 20_000
MAX_DEPTH = 60


class TemplateError(ValueError):
    """The template does not render (a syntax error, an unknown function, a bad conversion)."""


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
    """The template with each `{{ expression }}` replaced by its value, as HA renders it to text."""
    if len(template) > MAX_TEMPLATE:
        raise TemplateError(f"template longer than {MAX_TEMPLATE} characters")
    parts: list[str] = []
    position = 0
    strip_next = False
    for match in re.finditer(r"\{\{(.*?)\}\}|\{%(.*?)%\}|\{#.*?#\}", template, re.DOTALL):
        text = template[position : match.start()]
        if strip_next:
            text = text.lstrip()
        expression, statement = match.group(1), match.group(2)
        if statement is not None:
            raise TemplateError("statements ({% ... %}) are not supported by the sample home, only {{ expressions }}")
        strip_next = False
        if expression is not None:
            if expression.startswith("-"):
                text, expression = text.rstrip(), expression[1:]
            if expression.endswith("-"):
                strip_next, expression = True, expression[:-1]
        parts.append(text)
        if expression is not None:
            parts.append(_text(_Evaluator(home).evaluate(_Parser(expression).parse())))
        position = match.end()
    rest = template[position:]
    if "{{" in rest or "{%" in rest:
        raise TemplateError("unclosed '{{' or '{%'")
    parts.append(rest.lstrip() if strip_next else rest)
    return "".join(parts)


# ------------------------------------------------------------------------------- values


class _Undefined:
    """Jinja's undefined: renders as nothing, is false, and fails when used in a computation."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __str__(self) -> str:
        return ""


class TemplateState:
    """A state as templates see it: `states.light.kitchen.state`, `.attributes`, `.name`..."""

    def __init__(self, state: State) -> None:
        self._state = state

    def get(self, name: str) -> Any:
        values: dict[str, Any] = {
            "entity_id": self._state.entity_id,
            "state": self._state.state,
            "attributes": dict(self._state.attributes),
            "name": self._state.name,
            "domain": self._state.domain,
            "object_id": self._state.entity_id.split(".", 1)[1],
            "last_changed": self._state.last_changed,
            "last_updated": self._state.last_updated,
        }
        return values.get(name, _Undefined(f"{self._state.entity_id}.{name}"))

    def __str__(self) -> str:
        return f"<template TemplateState(<state {self._state.entity_id}={self._state.state}>)>"


class _DomainStates:
    """`states.sensor`: the states of one domain, iterable, and `states.sensor.x` by object id."""

    def __init__(self, home: TemplateHome, domain: str | None) -> None:
        self._home, self._domain = home, domain

    def __iter__(self) -> Iterator[TemplateState]:
        for entity_id in sorted(self._home.states):
            if self._domain is None or entity_id.startswith(self._domain + "."):
                yield TemplateState(self._home.states[entity_id])

    def get(self, name: str) -> Any:
        if self._domain is None:
            return _DomainStates(self._home, name)
        state = self._home.states.get(f"{self._domain}.{name}")
        return TemplateState(state) if state else _Undefined(f"states.{self._domain}.{name}")


# ------------------------------------------------------------------------------- parsing

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*|\.\d+|\d+)|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>\*\*|//|==|!=|<=|>=|[-+*/%~<>()\[\]{},.|:=]))"
)
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}
Node = tuple[Any, ...]


class _Parser:
    """Jinja's expression grammar, precedence climbing from the conditional down to the primaries."""

    def __init__(self, source: str) -> None:
        self.tokens: list[tuple[str, Any]] = []
        position = 0
        source = source.strip()
        while position < len(source):
            match = _TOKEN.match(source, position)
            if not match or match.end() == position:
                raise TemplateError(f"unexpected character {source[position]!r} in '{source}'")
            position = match.end()
            kind = match.lastgroup
            if kind is None:
                continue
            text = match.group(kind)
            if kind == "num":
                self.tokens.append(("const", float(text) if "." in text else int(text)))
            elif kind == "str":
                body = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text[1:-1])
                self.tokens.append(("const", body))
            else:
                self.tokens.append((kind, text))
        self.tokens.append(("eof", None))
        self.index = 0
        self.depth = 0
        self.source = source

    def parse(self) -> Node:
        if self.tokens[0][0] == "eof":
            raise TemplateError("empty expression")
        node = self.expression()
        if self.peek()[0] != "eof":
            raise TemplateError(f"unexpected '{self.peek()[1]}' in '{self.source}'")
        return node

    # helpers
    def peek(self) -> tuple[str, Any]:
        return self.tokens[self.index]

    def next(self) -> tuple[str, Any]:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def at(self, kind: str, value: Any = None) -> bool:
        token = self.peek()
        return token[0] == kind and (value is None or token[1] == value)

    def accept(self, kind: str, value: Any = None) -> bool:
        if self.at(kind, value):
            self.index += 1
            return True
        return False

    def expect(self, kind: str, value: Any = None) -> tuple[str, Any]:
        if not self.at(kind, value):
            raise TemplateError(f"expected '{value or kind}' in '{self.source}', found '{self.peek()[1]}'")
        return self.next()

    def name(self) -> str:
        return str(self.expect("name")[1])

    # grammar
    def expression(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TemplateError("expression nested too deeply")
        node = self.or_()
        if self.accept("name", "if"):
            condition = self.or_()
            otherwise = self.expression() if self.accept("name", "else") else ("const", _Undefined("else"))
            node = ("if", condition, node, otherwise)
        self.depth -= 1
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.accept("name", "or"):
            node = ("or", node, self.and_())
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.accept("name", "and"):
            node = ("and", node, self.not_())
        return node

    def not_(self) -> Node:
        if self.accept("name", "not"):
            return ("not", self.not_())
        return self.compare()

    def compare(self) -> Node:
        node = self.concat()
        pairs: list[tuple[str, Node]] = []
        while True:
            if self.peek()[0] == "op" and self.peek()[1] in ("==", "!=", "<", "<=", ">", ">="):
                pairs.append((self.next()[1], self.concat()))
            elif self.accept("name", "in"):
                pairs.append(("in", self.concat()))
            elif self.at("name", "not") and self.tokens[self.index + 1] == ("name", "in"):
                self.index += 2
                pairs.append(("not in", self.concat()))
            else:
                break
        return ("cmp", node, pairs) if pairs else node

    def concat(self) -> Node:
        node = self.sum_()
        while self.accept("op", "~"):
            node = ("bin", "~", node, self.sum_())
        return node

    def sum_(self) -> Node:
        node = self.product()
        while self.peek()[0] == "op" and self.peek()[1] in ("+", "-"):
            node = ("bin", self.next()[1], node, self.product())
        return node

    def product(self) -> Node:
        node = self.unary()
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "/", "//", "%"):
            node = ("bin", self.next()[1], node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek()[0] == "op" and self.peek()[1] in ("-", "+"):
            return ("unary", self.next()[1], self.unary())
        return self.power()

    def power(self) -> Node:
        node = self.filtered()
        if self.accept("op", "**"):
            node = ("bin", "**", node, self.unary())
        return node

    def filtered(self) -> Node:
        node = self.postfix()
        while True:
            if self.accept("op", "|"):
                name = self.name()
                args, kwargs = self.arguments() if self.at("op", "(") else ([], {})
                node = ("filter", node, name, args, kwargs)
            elif self.accept("name", "is"):
                negate = self.accept("name", "not")
                name = self.name()
                test_args: list[Node] = []
                if self.at("op", "("):
                    test_args, _ = self.arguments()
                elif not self.at("eof") and self.peek()[0] in ("const", "name") and self.peek()[1] not in _KEYWORDS:
                    test_args = [self.postfix()]
                node = ("test", node, name, test_args, negate)
            else:
                return node

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.accept("op", "."):
                node = ("attr", node, self.name())
            elif self.accept("op", "["):
                key = self.expression()
                self.expect("op", "]")
                node = ("item", node, key)
            elif self.at("op", "("):
                args, kwargs = self.arguments()
                node = ("call", node, args, kwargs)
            else:
                return node

    def arguments(self) -> tuple[list[Node], dict[str, Node]]:
        self.expect("op", "(")
        args: list[Node] = []
        kwargs: dict[str, Node] = {}
        while not self.accept("op", ")"):
            if self.at("name") and self.tokens[self.index + 1] == ("op", "="):
                key = self.name()
                self.next()
                kwargs[key] = self.expression()
            else:
                args.append(self.expression())
            if not self.at("op", ")"):
                self.expect("op", ",")
        return args, kwargs

    def primary(self) -> Node:
        kind, value = self.next()
        if kind == "const":
            return ("const", value)
        if kind == "name":
            if value in ("true", "True"):
                return ("const", True)
            if value in ("false", "False"):
                return ("const", False)
            if value in ("none", "None"):
                return ("const", None)
            return ("name", value)
        if kind == "op" and value == "(":
            if self.accept("op", ")"):
                return ("list", [])
            node = self.expression()
            if self.at("op", ","):
                items = [node]
                while self.accept("op", ",") and not self.at("op", ")"):
                    items.append(self.expression())
                node = ("list", items)
            self.expect("op", ")")
            return node
        if kind == "op" and value == "[":
            items = []
            while not self.accept("op", "]"):
                items.append(self.expression())
                if not self.at("op", "]"):
                    self.expect("op", ",")
            return ("list", items)
        if kind == "op" and value == "{":
            pairs = []
            while not self.accept("op", "}"):
                key = self.expression()
                self.expect("op", ":")
                pairs.append((key, self.expression()))
                if not self.at("op", "}"):
                    self.expect("op", ",")
            return ("dict", pairs)
        raise TemplateError(f"unexpected '{value}' in '{self.source}'")


_KEYWORDS = {"and", "or", "not", "in", "is", "if", "else"}


# ------------------------------------------------------------------------------- evaluation


class _Evaluator:
    def __init__(self, home: TemplateHome) -> None:
        self.home = home
        self.functions: dict[str, Callable[..., Any]] = {
            "states": self.states,
            "is_state": self.is_state,
            "state_attr": self.state_attr,
            "is_state_attr": lambda e, a, v: self.state_attr(e, a) == v,
            "has_value": lambda e: self.states(e) not in ("unknown", "unavailable"),
            "now": lambda: home.now.astimezone(home.time_zone),
            "utcnow": lambda: home.now.astimezone(home.now.tzinfo),
            "as_timestamp": _as_timestamp,
            "as_datetime": _as_datetime,
            "as_local": lambda value: _as_datetime(value).astimezone(home.time_zone),
            "timedelta": lambda **parts: timedelta(**{k: float(v) for k, v in parts.items()}),
            "float": _float,
            "int": _int,
            "bool": _bool,
            "range": lambda *a: list(range(*[int(x) for x in a]))[:10_000],
            "min": lambda *a: min(a[0] if len(a) == 1 else a),
            "max": lambda *a: max(a[0] if len(a) == 1 else a),
            "areas": lambda: sorted(home.areas),
            "area_name": self.area_name,
            "area_id": self.area_id,
            "area_entities": self.area_entities,
            "integration_entities": lambda name: sorted(
                e for e, i in home.entity_integrations.items() if i == name and e in home.states
            ),
        }
        self.filters: dict[str, Callable[..., Any]] = {
            "float": _float,
            "int": _int,
            "bool": _bool,
            "round": _round,
            "abs": abs,
            "lower": lambda v: str(v).lower(),
            "upper": lambda v: str(v).upper(),
            "title": lambda v: str(v).title(),
            "capitalize": lambda v: str(v).capitalize(),
            "trim": lambda v: str(v).strip(),
            "string": _text,
            "length": lambda v: len(list(v) if isinstance(v, _DomainStates) else v),
            "count": lambda v: len(list(v) if isinstance(v, _DomainStates) else v),
            "list": lambda v: list(v) if not isinstance(v, str) else list(v),
            "first": lambda v: next(iter(v), _Undefined("first")),
            "last": lambda v: list(v)[-1] if list(v) else _Undefined("last"),
            "sort": self.sort,
            "unique": lambda v: list(dict.fromkeys(v)),
            "sum": lambda v, attribute=None, start=0: sum(
                (self.attribute(x, attribute) for x in v) if attribute else v, start
            ),
            "min": lambda v: min(v),
            "max": lambda v: max(v),
            "join": lambda v, sep="", attribute=None: str(sep).join(
                _text(self.attribute(x, attribute) if attribute else x) for x in v
            ),
            "default": _default,
            "d": _default,
            "replace": lambda v, old, new: str(v).replace(str(old), str(new)),
            "tojson": lambda v: json.dumps(_plain(v), ensure_ascii=False),
            "map": self.map,
            "select": lambda v, test=None, *a: [x for x in v if self.test(x, test or "truthy", list(a))],
            "reject": lambda v, test=None, *a: [x for x in v if not self.test(x, test or "truthy", list(a))],
            "selectattr": lambda v, attr, test=None, *a: [
                x for x in v if self.test(self.attribute(x, attr), test or "truthy", list(a))
            ],
            "rejectattr": lambda v, attr, test=None, *a: [
                x for x in v if not self.test(self.attribute(x, attr), test or "truthy", list(a))
            ],
            "as_timestamp": _as_timestamp,
            "as_datetime": _as_datetime,
            "as_local": lambda value: _as_datetime(value).astimezone(home.time_zone),
            "area_name": self.area_name,
            "area_id": self.area_id,
            "area_entities": self.area_entities,
            "is_state": self.is_state,
            "state_attr": self.state_attr,
            "states": self.states,
        }

    # HA's functions
    def states(self, entity_id: Any = None, rounded: bool = False, with_unit: bool = False) -> Any:
        if entity_id is None:
            return _DomainStates(self.home, None)
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
        return current in value if isinstance(value, list) else current == value

    def state_attr(self, entity_id: Any, attribute: Any) -> Any:
        state = self.home.states.get(_entity_id(entity_id))
        return None if state is None else state.attributes.get(str(attribute))

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

    # filter helpers
    def attribute(self, value: Any, name: Any) -> Any:
        result = value
        for part in str(name).split("."):
            result = self.get_attribute(result, part)
        return result

    def sort(self, value: Any, reverse: bool = False, attribute: Any = None) -> list[Any]:
        key = (lambda x: self.attribute(x, attribute)) if attribute else None
        return sorted(value, key=key, reverse=bool(reverse))

    def map(self, value: Any, name: Any = None, *args: Any, attribute: Any = None) -> list[Any]:
        if attribute is not None:
            return [self.attribute(x, attribute) for x in value]
        apply = self.filters.get(str(name))
        if apply is None:
            raise TemplateError(f"no filter named '{name}'")
        return [apply(x, *args) for x in value]

    def test(self, value: Any, name: Any, args: list[Any]) -> bool:
        other: Any = args[0] if args else None
        tests: dict[str, Callable[[], bool]] = {
            "truthy": lambda: bool(value),
            "defined": lambda: not isinstance(value, _Undefined),
            "undefined": lambda: isinstance(value, _Undefined),
            "none": lambda: value is None,
            "number": lambda: isinstance(value, int | float) and not isinstance(value, bool),
            "string": lambda: isinstance(value, str),
            "mapping": lambda: isinstance(value, dict),
            "iterable": lambda: isinstance(value, list | tuple | str | dict | _DomainStates),
            "boolean": lambda: isinstance(value, bool),
            "true": lambda: value is True,
            "false": lambda: value is False,
            "eq": lambda: value == other,
            "equalto": lambda: value == other,
            "==": lambda: value == other,
            "ne": lambda: value != other,
            "!=": lambda: value != other,
            "lt": lambda: value < other,
            "<": lambda: value < other,
            "le": lambda: value <= other,
            "<=": lambda: value <= other,
            "gt": lambda: value > other,
            ">": lambda: value > other,
            "ge": lambda: value >= other,
            ">=": lambda: value >= other,
            "in": lambda: value in other,
            "search": lambda: re.search(str(other), str(value)) is not None,
            "match": lambda: re.match(str(other), str(value)) is not None,
            "contains": lambda: other in value,
            # HA's own tests on entity ids
            "is_state": lambda: self.is_state(value, other),
            "has_value": lambda: self.states(value) not in ("unknown", "unavailable"),
            "is_state_attr": lambda: len(args) == 2 and self.state_attr(value, args[0]) == args[1],
        }
        if str(name) not in tests:
            raise TemplateError(f"no test named '{name}'")
        try:
            return tests[str(name)]()
        except TypeError as exc:
            raise TemplateError(f"test '{name}' failed: {exc}") from None

    def get_attribute(self, value: Any, name: str) -> Any:
        if name.startswith("_"):
            raise TemplateError(f"access to '{name}' is not allowed")
        if isinstance(value, TemplateState | _DomainStates):
            return value.get(name)
        if isinstance(value, dict):
            return value[name] if name in value else _Undefined(name)
        if isinstance(value, datetime) and name in _DATETIME_FIELDS:
            return getattr(value, name)
        if isinstance(value, timedelta) and name in ("days", "seconds", "microseconds"):
            return getattr(value, name)
        return _Undefined(name)

    # the tree
    def evaluate(self, node: Node) -> Any:
        kind = node[0]
        if kind == "const":
            return node[1]
        if kind == "name":
            name = node[1]
            if name == "states":
                return _DomainStates(self.home, None)
            if name in self.functions:
                return ("function", name)
            return _Undefined(name)
        if kind == "attr":
            target = self.evaluate(node[1])
            if isinstance(target, str | datetime | dict) and node[2] in _METHODS.get(type(target), ()):
                return ("method", target, node[2])
            return self.get_attribute(target, node[2])
        if kind == "item":
            target, key = self.evaluate(node[1]), self.evaluate(node[2])
            if isinstance(target, TemplateState | _DomainStates):
                return target.get(str(key))
            try:
                return target[key]
            except (KeyError, IndexError, TypeError):
                return _Undefined(str(key))
        if kind == "call":
            return self.call(node)
        if kind == "filter":
            _, value_node, name, arg_nodes, kwarg_nodes = node
            apply = self.filters.get(name)
            if apply is None:
                raise TemplateError(f"no filter named '{name}'")
            value = self.evaluate(value_node)
            args = [self.evaluate(a) for a in arg_nodes]
            kwargs = {k: self.evaluate(v) for k, v in kwarg_nodes.items()}
            return self.guard(name, lambda: apply(value, *args, **kwargs))
        if kind == "test":
            _, value_node, name, arg_nodes, negate = node
            result = self.test(self.evaluate(value_node), name, [self.evaluate(a) for a in arg_nodes])
            return not result if negate else result
        if kind == "bin":
            return self.binary(node[1], self.evaluate(node[2]), self.evaluate(node[3]))
        if kind == "unary":
            operand = self.evaluate(node[2])
            _numeric(operand, node[1])
            return -operand if node[1] == "-" else +operand
        if kind == "and":
            left = self.evaluate(node[1])
            return self.evaluate(node[2]) if left else left
        if kind == "or":
            left = self.evaluate(node[1])
            return left if left else self.evaluate(node[2])
        if kind == "not":
            return not self.evaluate(node[1])
        if kind == "cmp":
            return self.compare(node)
        if kind == "if":
            return self.evaluate(node[2]) if self.evaluate(node[1]) else self.evaluate(node[3])
        if kind == "list":
            return [self.evaluate(item) for item in node[1]]
        if kind == "dict":
            return {self.evaluate(k): self.evaluate(v) for k, v in node[1]}
        raise TemplateError(f"cannot evaluate {kind}")  # pragma: no cover - the parser makes no other node

    def call(self, node: Node) -> Any:
        _, target_node, arg_nodes, kwarg_nodes = node
        target = self.evaluate(target_node)
        args = [self.evaluate(a) for a in arg_nodes]
        kwargs = {k: self.evaluate(v) for k, v in kwarg_nodes.items()}
        if isinstance(target, _DomainStates) and target_node == ("name", "states"):
            return self.guard("states", lambda: self.states(*args, **kwargs))
        if isinstance(target, tuple) and target and target[0] == "function":
            function = self.functions[target[1]]
            return self.guard(target[1], lambda: function(*args, **kwargs))
        if isinstance(target, tuple) and target and target[0] == "method":
            _, owner, name = target
            return self.guard(name, lambda: getattr(owner, name)(*args, **kwargs))
        what = target.what if isinstance(target, _Undefined) else type(target).__name__
        raise TemplateError(f"'{what}' is not a function")

    @staticmethod
    def guard(name: str, thunk: Callable[[], Any]) -> Any:
        try:
            return thunk()
        except TemplateError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, ZeroDivisionError) as exc:
            raise TemplateError(f"{name}: {exc}") from None

    def binary(self, op: str, left: Any, right: Any) -> Any:
        if op == "~":
            return _text(left) + _text(right)
        for operand in (left, right):
            if isinstance(operand, _Undefined):
                raise TemplateError(f"'{operand.what}' is undefined")
        operations: dict[str, Callable[[Any, Any], Any]] = {
            "+": lambda a, b: a + b,
            "-": lambda a, b: a - b,
            "*": lambda a, b: a * b,
            "/": lambda a, b: a / b,
            "//": lambda a, b: a // b,
            "%": lambda a, b: a % b,
            "**": lambda a, b: a**b,
        }
        if op == "*" and (isinstance(left, str | list) or isinstance(right, str | list)):
            raise TemplateError("repeating strings or lists is not supported")
        if op == "**" and abs(right) > 100:
            raise TemplateError("exponent too large")
        return self.guard(op, lambda: operations[op](left, right))

    def compare(self, node: Node) -> bool:
        left = self.evaluate(node[1])
        for op, right_node in node[2]:
            right = self.evaluate(right_node)
            checks: dict[str, Callable[[Any, Any], bool]] = {
                "==": lambda a, b: bool(a == b),
                "!=": lambda a, b: bool(a != b),
                "<": lambda a, b: bool(a < b),
                "<=": lambda a, b: bool(a <= b),
                ">": lambda a, b: bool(a > b),
                ">=": lambda a, b: bool(a >= b),
                "in": lambda a, b: a in (list(b) if isinstance(b, _DomainStates) else b),
                "not in": lambda a, b: a not in (list(b) if isinstance(b, _DomainStates) else b),
            }
            check = checks[op]
            if not self.guard(op, lambda c=check, a=left, b=right: c(a, b)):  # type: ignore[misc]
                return False
            left = right
        return True


_DATETIME_FIELDS = ("year", "month", "day", "hour", "minute", "second", "microsecond", "tzinfo")
_METHODS: dict[type, tuple[str, ...]] = {
    str: ("lower", "upper", "startswith", "endswith", "split", "replace", "strip", "title", "isdigit"),
    datetime: ("isoformat", "strftime", "timestamp", "date", "weekday", "isoweekday", "replace"),
    dict: ("get", "keys", "values", "items"),
}


def _entity_id(value: Any) -> str:
    if isinstance(value, TemplateState):
        return str(value.get("entity_id"))
    return str(value).lower()


def _numeric(value: Any, op: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TemplateError(f"'{op}' needs a number, got {_text(value)!r}")


_MISSING = object()


def _float(value: Any, default: Any = _MISSING) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        if default is _MISSING:
            raise TemplateError(f"float got invalid input '{_text(value)}' and no default was specified") from None
        return default


def _int(value: Any, default: Any = _MISSING, base: int = 10) -> Any:
    try:
        return int(value, base) if isinstance(value, str) and base != 10 else int(float(value))
    except (TypeError, ValueError, OverflowError):
        if default is _MISSING:
            raise TemplateError(f"int got invalid input '{_text(value)}' and no default was specified") from None
        return default


def _bool(value: Any, default: Any = _MISSING) -> Any:
    text = str(value).lower()
    if text in ("true", "on", "yes", "1", "enable"):
        return True
    if text in ("false", "off", "no", "0", "disable", "none"):
        return False
    if default is _MISSING:
        raise TemplateError(f"bool got invalid input '{_text(value)}' and no default was specified")
    return default


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


def _default(value: Any, fallback: Any = "", boolean: bool = False) -> Any:
    if isinstance(value, _Undefined) or (boolean and not value):
        return fallback
    return value


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
        return {k: _plain(value.get(k)) for k in ("entity_id", "state", "attributes", "last_changed", "last_updated")}
    if isinstance(value, _DomainStates):
        return [_plain(state) for state in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, _Undefined):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _text(value: Any) -> str:
    """How Jinja prints a value."""
    if isinstance(value, _Undefined):
        return ""
    if isinstance(value, _DomainStates):
        return str([str(state) for state in value])
    if isinstance(value, tuple) and value and value[0] in ("function", "method"):
        return f"<function {value[-1]}>"
    if isinstance(value, Iterable) and not isinstance(value, str | dict | list | tuple):
        return str(list(value))
    return str(value)
