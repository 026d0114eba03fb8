"""The API Gateway HTTP API (payload v2) event a request becomes, the one shape every HTTP entry builds.

The dev server builds it for the api and webhook handlers (`missions dev`), the stream function's ASGI
app (`missions.app.streaming`) for the stream handler behind a function URL, and tests for any handler
that API Gateway would call. The caller's identity is where the JWT authorizer puts it:
`requestContext.authorizer.jwt.claims` (`sub` is the user).
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl


def http_event(
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
    user: str | None,
    *,
    claims: Mapping[str, Any] | None = None,
    request_context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An HTTP API payload v2 event, as API Gateway would hand it to a Lambda.

    `user` alone makes the claims `{"sub": user}`; `claims` (a verified token's) are passed on as the
    JWT authorizer passes them (every value a string, a list as `[a b]`), and name the user by their
    `sub`. `request_context` overrides fields of the request context (a real request id, domain name,
    source IP); its `http` entry is merged into the request's own."""
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {k.lower(): v for k, v in headers.items()},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "127.0.0.1",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": headers.get("User-Agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": datetime.now(UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now * 1000),
        },
        "body": None,
        "isBase64Encoded": False,
    }
    if request_context:
        overrides = dict(request_context)
        http = {**event["requestContext"]["http"], **overrides.pop("http", {})}
        event["requestContext"].update(overrides, http=http)
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:  # bytes that are not text travel base64-encoded, as API Gateway sends them
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode("ascii"), True
    if query:
        params: dict[str, str] = {}
        for key, value in parse_qsl(query, keep_blank_values=True):
            params[key] = f"{params[key]},{value}" if key in params else value
        event["queryStringParameters"] = params
    if path.startswith("/webhooks/"):
        event["pathParameters"] = {"source": path.split("/", 2)[2]}
    passed = {key: _claim(value) for key, value in claims.items()} if claims else {"sub": user} if user else None
    if passed:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": passed, "scopes": None}}
    return event


def _claim(value: Any) -> str:
    """A claim as the HTTP API's JWT authorizer passes it: a string, a list as `[a b]`."""
    if isinstance(value, list | tuple):
        return "[" + " ".join(str(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


__all__ = ["http_event"]
