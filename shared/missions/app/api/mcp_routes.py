"""The MCP endpoint's routes (missions.app.mcp): streamable HTTP at /mcp, and its OAuth metadata.

MCP is its own contract (the MCP specification), so these routes stay out of the OpenAPI document; the
stack adds them to the HTTP API from MCP_ROUTES. The endpoint is stateless: a GET (a server-initiated
stream) or a DELETE (ending a session) is 405, as the transport allows.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from missions.app.api.edge import app, runtime
from missions.app.mcp import discovery
from missions.app.mcp.caller import Caller
from missions.app.resolver import user_of

# (method, path, takes a token): what the HTTP API routes to the api function for MCP
MCP_ROUTES: tuple[tuple[str, str, bool], ...] = (
    ("POST", discovery.MCP_PATH, True),
    ("GET", discovery.MCP_PATH, True),
    ("DELETE", discovery.MCP_PATH, True),
    *(("GET", path, False) for path in discovery.METADATA_PATHS),
)


@app.post(discovery.MCP_PATH, include_in_schema=False)
def mcp_request() -> Response[Any]:
    event = app.current_event.raw_event
    if user_of(event) is None:
        return _unauthorized(event)
    claims = dict(event["requestContext"]["authorizer"]["jwt"]["claims"])
    caller = Caller(claims, runtime(), app.lambda_context, app.correlation_id())
    from missions.app.mcp.transport import respond  # the SDK: imported by the first MCP request

    answer = respond(event, caller)
    content_type = answer.headers.pop("content-type", None)
    return Response(answer.status, content_type, answer.body.decode("utf-8"), headers=answer.headers)


@app.get(discovery.MCP_PATH, include_in_schema=False)
@app.delete(discovery.MCP_PATH, include_in_schema=False)
def mcp_stateless() -> Response[Any]:
    event = app.current_event.raw_event
    if user_of(event) is None:
        return _unauthorized(event)
    message = "this MCP endpoint is stateless: POST each request; there is no stream to open or session to end"
    return app.error(405, message, {"Allow": "POST"})


@app.get(discovery.METADATA_PATHS[0], include_in_schema=False, security=[])
@app.get(discovery.METADATA_PATHS[1], include_in_schema=False, security=[])
def mcp_metadata() -> dict[str, Any]:
    return discovery.protected_resource(app.current_event.raw_event, runtime().settings.jwt_issuer)


def _unauthorized(event: dict[str, Any]) -> Response[Any]:
    return app.error(401, "no authenticated user", {"WWW-Authenticate": discovery.challenge(event)})


__all__ = ["MCP_ROUTES"]
