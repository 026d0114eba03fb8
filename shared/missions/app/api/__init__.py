"""The missions HTTP API (API Gateway HTTP API, payload v2), on Powertools' event handler.

The user is whoever the authorizer says (JWT `sub`, or the IAM principal), never a body field; another
user's mission answers 404, exactly like a missing one. `edge` checks every request before a route sees
it, errors take the one mapping of both HTTP functions (missions.app.resolver), `models` is the contract
(GET /openapi.json publishes it); the routes are grouped by resource.
"""

from missions.app.api import (  # noqa: F401  the routes
    agent_routes,
    conversation_routes,
    health_routes,
    mcp_routes,
    me_routes,
    memory_routes,
    meta_routes,
    metrics_routes,
    mission_routes,
    repository_routes,
    schedule_routes,
    trigger_routes,
)
from missions.app.api.edge import app, current_user, handle

__all__ = ["app", "current_user", "handle"]
