"""The API's edge: the resolver, what every request is checked for before any route sees it, who the
caller is, and how every error becomes a response of one documented shape.

Before routing: a body must be JSON (415), at most MAX_BODY_BYTES (413), valid UTF-8 and JSON (400),
nested at most MAX_DEPTH deep (400, checked before the parser can recurse) and storable: no unpaired
surrogates, infinite numbers or numbers of more than 38 digits (400). Errors are `ErrorBody`s carrying the request's
correlation id; domain errors map to statuses in ERROR_STATUS, the one table of them.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import math
import re
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError, UnauthorizedError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, OpenAPI
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel, ValidationError

from missions.app.api.models.common import ErrorBody
from missions.app.observability import bind_mission
from missions.core.errors import (
    AgentConfigError,
    AnswerRejected,
    ConflictError,
    DependencyUnavailable,
    MemoryValidationError,
    MissionRequestError,
    NotFound,
    RepositoryConflict,
    RepositoryRequestError,
    ScheduleRejected,
)
from missions.core.redaction import redact
from missions.ports.store import MissionRecord

if TYPE_CHECKING:
    from missions.app.runtime import Runtime

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_NUMBER = 10**38  # DynamoDB keeps 38 significant digits
RETRY_AFTER_SECONDS = 5
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


class Resolver(APIGatewayHttpResolver):
    """Powertools takes a route's return annotation for its response model and would validate responses
    against it. Each route here declares its responses (`responses`), so routes are registered without
    the annotation, which stays for the type checker.

    A route declared with `security=[]` takes no token (liveness, readiness, this contract): Powertools
    leaves an empty `security` out of the document, which would then claim the global bearer scheme, so
    the document says `security: []` for those operations itself (the stack gives them no authorizer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.public_routes: set[tuple[str, str]] = set()  # (METHOD, /path/{param}) that take no token

    def route(
        self, rule: str, method: str | list[str] | tuple[str], *args: Any, **kwargs: Any
    ) -> Callable[[Endpoint], Endpoint]:
        if _ROUTE.bind(self, rule, method, *args, **kwargs).arguments.get("security") == []:
            methods = [method] if isinstance(method, str) else list(method)
            self.public_routes.update((m.upper(), re.sub(r"<(\w+)>", r"{\1}", rule)) for m in methods)
        register = super().route(rule, method, *args, **kwargs)

        def register_unannotated(endpoint: Endpoint) -> Endpoint:
            endpoint.__annotations__.pop("return", None)
            return register(endpoint)

        return register_unannotated

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> OpenAPI:
        schema = super().get_openapi_schema(*args, **kwargs)
        for method, path in self.public_routes:
            item = (schema.paths or {}).get(path)
            operation = getattr(item, method.lower(), None) if item is not None else None
            if operation is not None:
                operation.security = []
        return schema


_ROUTE = inspect.signature(APIGatewayHttpResolver.route)
app = Resolver(enable_validation=True)
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


def correlation_id() -> str | None:
    try:
        return str(app.current_event.request_context.request_id)
    except (AttributeError, KeyError):
        return None


def current_user() -> str:
    """The caller as the authorizer established it; 401 when there is none."""
    authorizer = app.current_event.request_context.authorizer
    claims = authorizer.jwt_claim if authorizer else None
    user = (claims or {}).get("sub")
    if not user and authorizer and authorizer.iam:
        user = authorizer.iam.user_arn or authorizer.iam.caller_id
    if not user or not isinstance(user, str) or "#" in user or len(user) > 256:
        raise UnauthorizedError("no authenticated user")
    return user


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


# -- the one error shape ------------------------------------------------------------------------------


def error_body(
    status: int, message: str, detail: list[dict[str, Any]] | None = None, cid: str | None = None
) -> dict[str, Any]:
    """Every error the API answers is made here; a message may quote an exception, so it loses its credentials."""
    body: dict[str, Any] = {"statusCode": status, "message": redact(message), "correlation_id": cid}
    if detail is not None:
        body["detail"] = [{**d, "message": redact(str(d.get("message", "")))} for d in detail]
    return body


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    return Response(status, "application/json", body=error_body(status, message, cid=correlation_id()), headers=headers)


def _raw_error(
    status: int, message: str, event: dict[str, Any], headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """An error answered before the resolver runs (it has no current event yet)."""
    cid = (event.get("requestContext") or {}).get("requestId")
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(error_body(status, message, cid=cid if isinstance(cid, str) else None)),
        "isBase64Encoded": False,
    }


# Domain errors -> HTTP statuses, in one place. Subclasses inherit their base's status (a
# TransitionRefused or TaskGone is a ConflictError: 409).
ERROR_STATUS: dict[type[Exception], int] = {
    NotFound: 404,
    PermissionError: 403,
    ConflictError: 409,
    RepositoryConflict: 409,
    MissionRequestError: 422,
    AgentConfigError: 422,
    AnswerRejected: 422,
    RepositoryRequestError: 422,
    MemoryValidationError: 422,
    ScheduleRejected: 422,
    ValidationError: 422,
    DependencyUnavailable: 503,
}


@app.exception_handler(list(ERROR_STATUS))  # type: ignore[untyped-decorator]  # Powertools leaves it unannotated
def _domain_error(exc: Exception) -> Response[dict[str, Any]]:
    status = next(ERROR_STATUS[kind] for kind in type(exc).__mro__ if kind in ERROR_STATUS)
    if status == 503:
        message = f"{exc}; nothing was stored, retry later"
        return error(503, message, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(exc, ValidationError):
        return _problems(exc.errors())
    if isinstance(exc, ScheduleRejected):  # the field, what is wrong, and when it would have fired next
        detail = [{"loc": ["body", exc.field], "type": exc.kind, "message": str(exc)}]
        body = error_body(422, str(exc), detail, correlation_id())
        if exc.next_fire_times is not None:
            body["next_fire_times"] = exc.next_fire_times
        return Response(422, "application/json", body=body)
    return error(status, str(exc))


@app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]  # Powertools leaves it unannotated
def _invalid(exc: RequestValidationError) -> Response[dict[str, Any]]:
    return _problems(exc.errors())


def _problems(errors: Any) -> Response[dict[str, Any]]:
    detail = [
        {
            "loc": [str(part) if not isinstance(part, int) else part for part in e.get("loc", ())],
            "type": str(e.get("type")),
            "message": str(e.get("msg")),
        }
        for e in errors
    ]
    return Response(422, "application/json", body=error_body(422, "invalid request", detail, correlation_id()))


@app.exception_handler(ServiceError)  # type: ignore[untyped-decorator]  # Powertools leaves it unannotated
def _service_error(exc: ServiceError) -> Response[dict[str, Any]]:
    return error(exc.status_code, str(exc.msg))


@app.not_found
def _no_route(exc: NotFoundError) -> Response[dict[str, Any]]:
    return error(404, f"no route {app.current_event.http_method} {app.current_event.path}")


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
        return _raw_error(415, f"bodies must be application/json, not {media}", event)
    try:
        data = base64.b64decode(raw) if event.get("isBase64Encoded") else str(raw).encode("utf-8", "surrogatepass")
    except ValueError:
        return _raw_error(400, "the body is not valid base64", event)
    if len(data) > MAX_BODY_BYTES:
        return _raw_error(413, f"the body is {len(data)} bytes; the limit is {MAX_BODY_BYTES}", event)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _raw_error(400, "the body is not valid UTF-8", event)
    if _too_deep(text):
        return _raw_error(400, f"the body is nested more than {MAX_DEPTH} levels deep", event)
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return _raw_error(400, f"the body is not valid JSON: {exc}", event)
    why = _unstorable(parsed)
    if why is not None:
        return _raw_error(400, f"the body holds {why}", event)
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
    429: "throttled by API Gateway; retry after a while",
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
        if code == 503:
            described["headers"] = {"Retry-After": {"description": "seconds", "schema": {"type": "integer"}}}
        documented[code] = described
    return documented


__all__ = [
    "ERROR_STATUS",
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "RETRY_AFTER_SECONDS",
    "app",
    "correlation_id",
    "current_user",
    "error",
    "error_body",
    "handle",
    "is_operator",
    "metrics_owner",
    "owned_mission",
    "responses",
    "runtime",
]
