"""The API contract, checked on every response the suite sees.

`Contract` reads the OpenAPI document the API publishes and checks a response against it: the
operation exists, the status is one the operation documents, and the body validates against the
documented schema, where an object with named properties may hold no other keys (so a field the
document does not describe is a violation too). tests/conftest.py wraps the API's entry point with it
for the whole session: every response any test observes, through the dev server or directly, is
checked.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from missions.app.api.mcp_routes import MCP_ROUTES

_MCP = frozenset((method, path) for method, path, _ in MCP_ROUTES)
HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


class ContractViolation(AssertionError):
    pass


@dataclass(frozen=True)
class _Operation:
    method: str
    template: str
    pattern: re.Pattern[str]
    responses: dict[str, Any]


def _closed(schema: Any) -> Any:
    """A copy where every object schema that names its properties allows no others."""
    if isinstance(schema, dict):
        closed = {key: _closed(value) for key, value in schema.items()}
        if "properties" in closed and "additionalProperties" not in closed:
            closed["additionalProperties"] = False
        return closed
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    return schema


class Contract:
    def __init__(self, document: dict[str, Any]):
        self.document = document
        self._components = _closed(copy.deepcopy(document.get("components", {})))
        self._operations: list[_Operation] = []
        for template, item in document.get("paths", {}).items():
            regex = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            for method in HTTP_METHODS:
                if method in item:
                    responses = item[method].get("responses", {})
                    self._operations.append(_Operation(method.upper(), template, re.compile(regex), responses))

    def operation(self, method: str, path: str) -> _Operation | None:
        matches = [op for op in self._operations if op.method == method and op.pattern.match(path)]
        # a literal segment wins over a parameter (/missions/x/artifact vs /missions/{id}/artifacts)
        matches.sort(key=lambda op: op.template.count("{"))
        return matches[0] if matches else None

    def check(self, method: str, path: str, status: int, headers: dict[str, str], body: str | None) -> None:
        if path == "/openapi.json":  # the document itself: nothing to check it against
            return
        if (method, path) in _MCP:  # MCP's own contract, checked by two MCP clients (tests/e2e/test_mcp_e2e.py)
            return
        operation = self.operation(method, path)
        if operation is None:
            if status in (401, 404):  # an unknown route is refused before any contract applies
                return
            raise ContractViolation(f"{method} {path} answered {status} but the document has no such operation")
        documented = operation.responses.get(str(status))
        if documented is None:
            raise ContractViolation(
                f"{method} {operation.template} answered {status}, which it does not document "
                f"(documented: {sorted(operation.responses)}); body: {(body or '')[:300]}"
            )
        content = documented.get("content", {})
        schema = (content.get("application/json") or {}).get("schema")
        if not body:
            if schema is not None and status != 204:
                raise ContractViolation(f"{method} {operation.template} {status}: an empty body, a schema documented")
            return
        if schema is None:
            media = headers.get("content-type", "").split(";")[0].strip()
            if media == "application/x-ndjson" and media in content:  # JSON lines: each line a JSON object
                for number, line in enumerate(body.splitlines(), 1):
                    if not isinstance(json.loads(line), dict):
                        raise ContractViolation(f"{method} {operation.template} {status}: line {number} is no object")
                return
            if content:
                raise ContractViolation(f"{method} {operation.template} {status}: no schema for the body sent")
            return
        try:
            value = json.loads(body)
        except ValueError:
            raise ContractViolation(f"{method} {operation.template} {status}: the body is not JSON") from None
        validator = jsonschema.Draft202012Validator({**_closed(schema), "components": self._components})
        problems = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if problems:
            first = problems[0]
            where = "/".join(map(str, first.path)) or "(the body)"
            raise ContractViolation(
                f"{method} {operation.template} {status}: {where}: {first.message}; body: {body[:500]}"
            )

    def check_result(self, event: dict[str, Any], result: dict[str, Any]) -> None:
        """Check an API Gateway (payload v2) response the API handler returned for `event`."""
        http = (event.get("requestContext") or {}).get("http") or {}
        body = result.get("body")
        if body and result.get("isBase64Encoded"):
            body = base64.b64decode(body).decode()
        headers = {str(k).lower(): str(v) for k, v in (result.get("headers") or {}).items()}
        self.check(str(http.get("method", "")), str(event.get("rawPath", "")), int(result["statusCode"]), headers, body)


__all__ = ["Contract", "ContractViolation"]
