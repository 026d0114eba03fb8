"""The generic offline model: a valid answer for any output model, from its JSON schema.

A capability runs without an API key (the demo, the tests, the conformance suite) with no
hand-written fake: for each stage the model answers with the capability's canned values
(`[offline.<stage>]` in capability.toml, field -> value, `{goal}` filled in), and every field not
listed gets a value its schema allows: the first enum value or literal, the schema's default or
first example, a number inside its bounds, a list of one item (as many as `min_length` asks),
a string naming the field and the goal. A policy written by hand (code_analysis searches a
repository) still wins where a capability has one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from missions.core.llm.provider import LLMError, LLMRequest


class SchemaAnswers:
    """An OfflinePolicy: the canned values of each stage over a schema-valid answer."""

    def __init__(self, canned: Mapping[str, Mapping[str, Any]] | None = None):
        self._canned = {stage: dict(values) for stage, values in (canned or {}).items()}

    def __call__(self, request: LLMRequest) -> BaseModel:
        goal = getattr(request.envelope, "raw_input", "") or ""
        values = _fill(self._canned.get(request.stage, {}), goal)
        return answer_for(request.output_model, values, goal, where=request.stage)


def answer_for(model: type[BaseModel], values: Mapping[str, Any], goal: str = "", where: str = "") -> BaseModel:
    """A valid `model`: `values` where given, a value its schema allows elsewhere."""
    schema = model.model_json_schema()
    data = _object(schema, schema, dict(values), goal)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise LLMError(
            f"the offline model cannot answer stage '{where}' as {model.__name__}: {exc}; "
            f"give the field a value in [offline.{where}] of capability.toml"
        ) from None


def _object(schema: dict[str, Any], root: dict[str, Any], given: dict[str, Any], goal: str) -> dict[str, Any]:
    out = dict(given)
    for name, spec in (schema.get("properties") or {}).items():
        if name not in out:
            out[name] = _value(spec, root, name, goal)
    return out


def _value(spec: dict[str, Any], root: dict[str, Any], name: str, goal: str) -> Any:
    spec = _resolve(spec, root)
    if "const" in spec:
        return spec["const"]
    if spec.get("enum"):
        return spec["enum"][0]
    if "default" in spec:
        return spec["default"]
    if spec.get("examples"):
        return spec["examples"][0]
    for key in ("anyOf", "oneOf"):
        if key in spec:
            options = [option for option in spec[key] if option.get("type") != "null"] or spec[key]
            return _value(options[0], root, name, goal)
    kind = spec.get("type")
    if kind == "object" or "properties" in spec:
        return _object(spec, root, {}, goal)
    if kind == "array":
        count = max(1, int(spec.get("minItems", 1)))
        return [_value(spec.get("items", {"type": "string"}), root, name, goal) for _ in range(count)]
    if kind in ("integer", "number"):
        low = spec.get("minimum", spec.get("exclusiveMinimum", 0))
        high = spec.get("maximum", spec.get("exclusiveMaximum", low + 10))
        middle = (low + high) / 2
        return int(middle) if kind == "integer" else float(middle)
    if kind == "boolean":
        return True
    text = f"{name.replace('_', ' ')} for: {goal}" if goal else name.replace("_", " ")
    return text[: int(spec.get("maxLength", 200))].ljust(int(spec.get("minLength", 0)), ".")


def _resolve(spec: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    reference = spec.get("$ref")
    if not reference:
        return spec
    node: Any = root
    for part in reference.removeprefix("#/").split("/"):
        node = node[part]
    return dict(node)


def _fill(values: Mapping[str, Any], goal: str) -> dict[str, Any]:
    """`{goal}` in canned strings (at any depth) becomes the mission's goal."""
    text = json.dumps(dict(values))
    return dict(json.loads(text.replace("{goal}", json.dumps(goal)[1:-1])))
