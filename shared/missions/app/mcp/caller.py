"""The MCP endpoint's caller and what they may do: the missions API itself, called in the process.

An MCP tool is a door to an API operation, not a second implementation of it. Each call becomes the
payload v2 event API Gateway would have built for that operation, with the MCP request's own verified
claims (so the user, and whether they are an operator, are exactly what the authorizer said), and goes
through the API's edge checks, routes and error mapping. A user reaches only their own missions because
the API says so, with the same 404 for another user's mission as for a missing one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from missions.app.http_event import http_event

if TYPE_CHECKING:
    from missions.app.runtime import Runtime

IDEMPOTENCY_HEADER = "Idempotency-Key"


class ApiRefused(Exception):
    """The API answered an error: its status and its message, for the MCP client to read."""

    def __init__(self, status: int, message: str, body: Any = None):
        super().__init__(f"{status}: {message}")
        self.status, self.message, self.body = status, message, body


@dataclass(frozen=True)
class Caller:
    """Who an MCP request is from (the verified claims, as the authorizer passed them) and where their
    calls go: the runtime and Lambda context of the invocation serving it."""

    claims: dict[str, Any]
    runtime: Runtime
    context: Any = None
    request_id: str | None = None

    @property
    def user(self) -> str:
        return str(self.claims["sub"])

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One API operation as this caller: its JSON body, or ApiRefused with the API's message."""
        from missions.app import api  # the API's routes (its entry point, looked up at each call)

        data = json.dumps(body).encode() if body is not None else b""
        sent = {"content-type": "application/json", **(headers or {})} if body is not None else dict(headers or {})
        text_query = urlencode({k: v for k, v in (query or {}).items() if v is not None})
        context = {"requestId": self.request_id} if self.request_id else None
        event = http_event(method, path, text_query, sent, data, None, claims=self.claims, request_context=context)
        result = api.handle(event, self.context, self.runtime)
        status = int(result.get("statusCode", 200))
        raw = result.get("body") or ""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
        if status >= 400:
            message = parsed.get("message") if isinstance(parsed, dict) else None
            raise ApiRefused(status, str(message or parsed or "refused"), parsed)
        return parsed


__all__ = ["ApiRefused", "Caller"]
