"""Is the service up (`/health`, liveness) and able to work (`/ready`: tables, bus and model provider
answer), and how each tool of a capability is doing (`/metrics/tools`). The first two take no token:
uptime checks and load balancers hold none, and they reveal nothing a user owns."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from missions.app.api.edge import app, responses, runtime
from missions.app.api.models.health import Liveness, Readiness


@app.get("/health", summary="Liveness: the API answers", security=[], responses=responses((200, Liveness, "alive")))
def health() -> dict[str, Any]:
    return {"status": "ok"}


_NOT_READY: OpenAPIResponse = {
    "description": "a dependency failed; the body names it",
    "content": {"application/json": {"model": Readiness}},
}


@app.get(
    "/ready",
    summary="Readiness: the tables, the event bus and the model provider answer (cached a few seconds)",
    security=[],
    responses={**responses((200, Readiness, "every dependency answered")), 503: _NOT_READY},
)
def ready() -> Response[dict[str, Any]]:
    report = runtime().readiness.report()
    return Response(200 if report["ready"] else 503, "application/json", body=report)
