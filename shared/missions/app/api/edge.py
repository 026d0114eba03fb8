"""The API's edge: its resolver, what every request is checked for before any route sees it, who the
caller is, and what each operation documents. Errors are answered by the one error mapping of both HTTP
functions (missions.app.resolver): `ErrorBody`s carrying the request's correlation id.

Before routing: a body must be JSON (415), at most MAX_BODY_BYTES (413), valid UTF-8 and JSON (400),
nested at most MAX_DEPTH deep (400, checked before the parser can recurse) and storable: no unpaired
surrogates, infinite numbers, numbers of more than 38 digits or out of DynamoDB's range (400).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, OpenAPI
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from missions.app.api.links import link_operations
from missions.app.api.models.common import ErrorBody
from missions.app.observability import bind_mission
from missions.app.resolver import Resolver, refusal
from missions.core.errors import (
    MissionRequestError,
    NotFound,
)
from missions.ports.missions import MissionRecord

if TYPE_CHECKING:
    from missions.app.runtime import Runtime

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_NUMBER = 10**38  # DynamoDB keeps 38 significant digits
NUMBER_RANGE = (1e-130, 1e126)  # and magnitudes from 1E-130 to under 1E+126 (or 0): beyond is Overflow
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class _Api(Resolver):
    """The missions API's resolver: its document carries the links from each id to the operations taking
    it, and a 204 documents no content (Powertools gives every response one; a 204 has no body, and sends
    no Content-Type)."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> OpenAPI:
        schema = super().get_openapi_schema(*args, **kwargs)
        for item in (schema.paths or {}).values():
            for operation in (item.get, item.put, item.post, item.delete, item.patch):
                empty = (operation.responses or {}).get(204) if operation is not None else None
                if empty is not None:
                    empty.content = None
        return link_operations(schema)


app = _Api(enable_validation=True)
app.configure_openapi(
    title="missions",
    version="0.2.0",
    description=(
        "Start, watch, answer, cancel and rate long-running LLM missions. Every error has the ErrorBody "
        "shape. POST /missions and POST /missions/{mission_id}/fork take an Idempotency-Key header "
        "(IETF draft-ietf-httpapi-idempotency-key-header): a replay within 24 hours returns the first "
        "response (with Idempotent-Replayed: true), the same key with another body is 422, and a key "
        "whose first request is still running is 409."
    ),
    security_schemes={
        "bearer": HTTPBearer(
            bearerFormat="JWT",
            description="In AWS, a Cognito (or configured issuer's) token; on `missions dev`, `dev:<user>`.",
        )
    },
    security=[{"bearer": []}],
)


# -- who is asking, and what they may see ----------------------------------------------------------


def runtime() -> Runtime:
    """The composition root the handler put into the resolver's context for this request."""
    return app.context["runtime"]  # type: ignore[no-any-return]


def current_user() -> str:
    """The caller as the authorizer established it; 401 when there is none."""
    return app.current_user()


def owned_mission(mission_id: str, user: str) -> MissionRecord:
    """The caller's mission; another user's is as missing as one that does not exist (404)."""
    try:
        record = runtime().missions.get(mission_id)
    except NotFound:
        record = None
    if record is None or record.user_id != user:
        raise NotFoundError(f"no mission {mission_id}")
    bind_mission(mission_id)
    return record


def is_operator(user: str) -> bool:
    """Operators are in the JWT's `cognito:groups` claim as 'operators', or named in the settings."""
    authorizer = app.current_event.request_context.authorizer
    claims = (authorizer.jwt_claim if authorizer else None) or {}
    groups = claims.get("cognito:groups") or ""
    names = groups if isinstance(groups, list) else str(groups).strip("[]").replace(",", " ").split()
    return "operators" in names or user in runtime().settings.operators


def metrics_owner(capability: str, scope: str, what: str) -> str | None:
    """Whose missions a metrics route reads: the caller's (`scope` mine), or everyone's (None) for an
    operator; an unknown capability is 422, `scope=all` from anyone else 403."""
    user = current_user()
    if capability not in runtime().capabilities.available():
        raise MissionRequestError(f"unknown capability '{capability}'")
    if scope == "all" and not is_operator(user):
        raise PermissionError(f"scope=all is for operators; without it you get your own {what}")
    return None if scope == "all" else user


# -- errors: the one mapping (missions.app.resolver), and what only the API answers ---------------------


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return app.error(status, message, headers)


@app.exception_handler(Exception)  # type: ignore[untyped-decorator]  # Powertools leaves it unannotated
def _bug(exc: Exception) -> Response[dict[str, Any]]:
    """A defect, not the client's fault: logged with its trace, answered in the one shape."""
    log.exception("unhandled error in the API")
    return error(500, f"internal error ({type(exc).__name__}); the correlation id names it in the logs")


# -- the edge ------------------------------------------------------------------------------------------


def _too_deep(text: str) -> bool:
    """Deeper than MAX_DEPTH, counted without parsing (strings, where brackets mean nothing, removed)."""
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub('""', text)):
        depth = depth + 1 if bracket in "[{" else depth - 1
        if depth > MAX_DEPTH:
            return True
    return False


def _unstorable(value: Any) -> str | None:
    """Why a parsed JSON value cannot be stored as it is (DynamoDB and JSON itself refuse it), or None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "an unpaired UTF-16 surrogate (\\ud800-\\udfff), which is not text"
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"the number {value}, which JSON cannot carry"
    if isinstance(value, float) and value and not NUMBER_RANGE[0] <= abs(value) < NUMBER_RANGE[1]:
        return f"the number {value}, out of the range DynamoDB can store (1E-130 to 1E+126)"
    if isinstance(value, int) and abs(value) >= MAX_NUMBER:
        return "a number of more than 38 digits, which DynamoDB cannot store"
    if isinstance(value, dict):
        return next((why for k, v in value.items() if (why := _unstorable(k) or _unstorable(v))), None)
    if isinstance(value, list):
        return next((why for item in value if (why := _unstorable(item))), None)
    return None


def check_body(event: dict[str, Any]) -> dict[str, Any] | None:
    """An error response for a body that must not reach a route, or None when it may."""
    method = ((event.get("requestContext") or {}).get("http") or {}).get("method", "")
    raw = event.get("body")
    if method not in ("POST", "PUT", "PATCH") or not raw:
        return None
    headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
    media = str(headers.get("content-type") or "application/json").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return refusal(event, 415, f"bodies must be application/json, not {media}")
    try:
        data = base64.b64decode(raw) if event.get("isBase64Encoded") else str(raw).encode("utf-8", "surrogatepass")
    except ValueError:
        return refusal(event, 400, "the body is not valid base64")
    if len(data) > MAX_BODY_BYTES:
        return refusal(event, 413, f"the body is {len(data)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return refusal(event, 400, "the body is not valid UTF-8")
    if _too_deep(text):
        return refusal(event, 400, f"the body is nested more than {MAX_DEPTH} levels deep")
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return refusal(event, 400, f"the body is not valid JSON: {exc}")
    why = _unstorable(parsed)
    if why is not None:
        return refusal(event, 400, f"the body holds {why}")
    return None


def handle(event: dict[str, Any], context: Any, service: Runtime) -> dict[str, Any]:
    """Resolve one API Gateway event, after the edge checks (see the module docstring)."""
    refused = check_body(event)
    if refused is None:
        app.context.update(runtime=service)  # what append_context does; Powertools leaves that one untyped
        refused = app.resolve(event, context)
    return with_correlation_id(event, refused)


CORRELATION_HEADER = "X-Correlation-Id"


def with_correlation_id(event: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Every response names its request (API Gateway's request id, which every log line of it carries)."""
    request_id = (event.get("requestContext") or {}).get("requestId")
    if request_id:
        result["headers"] = {**(result.get("headers") or {}), CORRELATION_HEADER: str(request_id)}
    return result


# -- what each operation documents --------------------------------------------------------------------

_WHY: dict[int, str] = {
    400: "the body is not JSON, not UTF-8, or nested too deep",
    401: "no authenticated user",
    403: "the caller may not do this",
    404: "no such thing (or not the caller's)",
    409: "the request conflicts with the current state; see the message",
    413: "the body is too large",
    415: "the body is not application/json",
    422: "the request is well-formed but invalid; `detail` names each problem",
    429: "throttled by API Gateway, or your daily budget is spent (a request that asked to be refused then); "
    "retry after Retry-After seconds when given",
    500: "a defect; the correlation id names it in the logs",
    503: "a dependency is unavailable; nothing was stored; retry after Retry-After seconds",
}
_ALWAYS = (401, 429, 500)
_WITH_BODY = (400, 413, 415, 422)


def responses(
    ok: tuple[int, type[BaseModel] | None, str], *statuses: int, body: bool = False
) -> dict[int, OpenAPIResponse]:
    """The responses an operation documents: its success, and every error it can answer."""
    status, model, description = ok
    documented: dict[int, OpenAPIResponse] = {}
    if model is None:
        documented[status] = {"description": description}
    else:
        documented[status] = {"description": description, "content": {"application/json": {"model": model}}}
    for code in sorted({*_ALWAYS, *statuses, *(_WITH_BODY if body else ())}):
        described: OpenAPIResponse = {
            "description": f"{HTTPStatus(code).phrase}: {_WHY[code]}",
            "content": {"application/json": {"model": ErrorBody}},
        }
        if code in (429, 503):
            described["headers"] = {"Retry-After": {"description": "seconds", "schema": {"type": "integer"}}}
        documented[code] = described
    return documented


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "app",
    "current_user",
    "error",
    "handle",
    "is_operator",
    "metrics_owner",
    "owned_mission",
    "responses",
    "runtime",
]
