"""The one router and the one error mapping of both HTTP functions: the API (missions.app.api, behind API
Gateway) and the stream function (missions.app.streams, behind its function URL).

Routes are Powertools' (`Resolver`, an APIGatewayHttpResolver). Every error either function answers is
made here: a domain error (missions.core.errors) maps to its status in ERROR_STATUS, the one table of
them; Powertools' own (no route, 401, a request its validation refuses) and a request refused before
routing (`refusal`) take the same way out. The body is in the shape of the route's family:
- under /v1/ (the chat), OpenAI's error object, which its SDKs raise as APIError: a request it cannot
  take is 400 there (OpenAI never answers 422), and some errors carry OpenAI's `code` (OPENAI_CODES);
- elsewhere, the API's ErrorBody, with the request's correlation id.
An ErrorBody's message loses its credentials on the way out (missions.core.redaction); OpenAI's
messages are sent as the chat has always sent them.

Powertools keeps the request it resolves on its base class, for the whole process. Lambda runs one
invocation at a time in an environment, but `missions dev` runs both functions in one process, the
stream function many requests at once; so a Resolver keeps its request, Lambda context and context per
thread, and one request never reads another's caller.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError, UnauthorizedError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import OpenAPI
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from pydantic import ValidationError

from missions.app.chat_wire import ChatError
from missions.app.chat_wire import error_body as openai_error_body
from missions.core.chat import UnknownConversation, UnknownModel
from missions.core.errors import (
    AgentConfigError,
    AnswerRejected,
    BudgetReached,
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
from missions.service.flow.multitask import KeyBusy

JSON_TYPE = "application/json"
OPENAI_PREFIX = "/v1/"  # the chat's routes: errors in OpenAI's shape
RETRY_AFTER_SECONDS = 5

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
    BudgetReached: 429,
    DependencyUnavailable: 503,
}
# The stream function's: a chat message the chat cannot take is a bad request, whatever says so.
STREAM_ERROR_STATUS: dict[type[Exception], int] = {**ERROR_STATUS, ValueError: 422}
# OpenAI's `code` (and `param`) for the errors its clients tell apart; by status for the rest.
OPENAI_CODES: dict[type[Exception], tuple[str, str | None]] = {
    UnknownModel: ("model_not_found", "model"),
    UnknownConversation: ("conversation_not_found", "conversation_id"),
    BudgetReached: ("insufficient_quota", None),
    KeyBusy: ("conversation_busy", "conversation_id"),
}
_OPENAI_STATUS_CODES = {401: "invalid_api_key", 503: "service_unavailable"}

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


# -- the one error shape of each family ----------------------------------------------------------------


def error_body(
    status: int, message: str, detail: list[dict[str, Any]] | None = None, cid: str | None = None
) -> dict[str, Any]:
    """The API's ErrorBody; a message may quote an exception, so it loses its credentials."""
    body: dict[str, Any] = {"statusCode": status, "message": redact(message), "correlation_id": cid}
    if detail is not None:
        body["detail"] = [{**d, "message": redact(str(d.get("message", "")))} for d in detail]
    return body


def openai_error(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> tuple[int, dict[str, Any]]:
    """OpenAI's error object for a status: 422 is its 400, a 5xx its `server_error`."""
    status = 400 if status == 422 else status
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return status, openai_error_body(message, type=kind, code=code or _OPENAI_STATUS_CODES.get(status), param=param)


def status_of(exc: Exception, errors: Mapping[type[Exception], int] = ERROR_STATUS) -> int:
    """The status a domain error is answered with: its own entry, else its nearest base's."""
    return next(errors[kind] for kind in type(exc).__mro__ if kind in errors)


def openai_error_of(exc: Exception, status: int) -> tuple[int, dict[str, Any]]:
    """A domain error (answered with `status` by the API) in OpenAI's shape, with its code if it has one."""
    code, param = next((OPENAI_CODES[kind] for kind in type(exc).__mro__ if kind in OPENAI_CODES), (None, None))
    return openai_error(status, _message(exc, status), code=code, param=param)


def _message(exc: Exception, status: int) -> str:
    return f"{exc}; nothing was stored, retry later" if status == 503 else str(exc)


def is_openai(path: str) -> bool:
    return path.startswith(OPENAI_PREFIX)


def refusal(
    event: Mapping[str, Any], status: int, message: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """An error answered before routing (the resolver has no current request yet), in its family's shape."""
    cid = (event.get("requestContext") or {}).get("requestId")
    if is_openai(str(event.get("rawPath") or "")):
        status, body = openai_error(status, message)
        text = json.dumps(body, ensure_ascii=False)
    else:
        text = json.dumps(error_body(status, message, cid=cid if isinstance(cid, str) else None))
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON_TYPE, **(headers or {})},
        "body": text,
        "isBase64Encoded": False,
    }


def user_of(event: Mapping[str, Any]) -> str | None:
    """The caller as the authorizer established it (the JWT's `sub`, else the IAM principal), or None."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    user = claims.get("sub")
    iam = authorizer.get("iam") or {}
    if not user and iam:
        user = iam.get("userArn") or iam.get("callerId")
    if not user or not isinstance(user, str) or "#" in user or len(user) > 256:
        return None
    return user


# -- the router ----------------------------------------------------------------------------------------


class Resolver(APIGatewayHttpResolver):
    """Powertools' resolver, answering every error the one way (see the module docstring), its state
    per thread. `errors` is the table of domain errors it maps (ERROR_STATUS or STREAM_ERROR_STATUS).

    Powertools takes a route's return annotation for its response model and would validate responses
    against it. Each route here declares its responses (`responses`), so routes are registered without
    the annotation, which stays for the type checker.

    A route declared with `security=[]` takes no token (liveness, readiness, this contract): Powertools
    leaves an empty `security` out of the document, which would then claim the global bearer scheme, so
    the document says `security: []` for those operations itself (the stack gives them no authorizer)."""

    def __init__(self, *args: Any, errors: Mapping[type[Exception], int] = ERROR_STATUS, **kwargs: Any) -> None:
        self._state = threading.local()
        super().__init__(*args, **kwargs)
        self.public_routes: set[tuple[str, str]] = set()  # (METHOD, /path/{param}) that take no token
        self.errors = dict(errors)
        self.exception_handler(list(self.errors))(self._domain_error)
        self.exception_handler(ChatError)(self._chat_error)
        self.exception_handler(RequestValidationError)(self._invalid)
        self.exception_handler(ServiceError)(self._service_error)
        self.not_found(self._no_route)

    # -- the request, per thread (see the module docstring) --

    @property  # type: ignore[override]
    def current_event(self) -> APIGatewayProxyEventV2:
        return cast(APIGatewayProxyEventV2, self._state.event)

    @current_event.setter
    def current_event(self, value: APIGatewayProxyEventV2) -> None:
        self._state.event = value

    @property
    def lambda_context(self) -> Any:
        return self._state.lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._state.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        if not hasattr(self._state, "context"):
            self._state.context = {}
        return cast(dict[str, Any], self._state.context)

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._state.context = value

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        self.current_event = self._to_proxy_event(cast(dict[str, Any], event))  # type: ignore[assignment]
        self.lambda_context = context
        return super().resolve(event, context)

    # -- who is asking --

    def correlation_id(self) -> str | None:
        try:
            return str(self.current_event.request_context.request_id)
        except (AttributeError, KeyError):
            return None

    def current_user(self) -> str:
        """The caller as the authorizer established it; 401 when there is none."""
        user = user_of(self.current_event.raw_event)
        if user is None:
            raise UnauthorizedError("no authenticated user")
        return user

    # -- routes --

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

    # -- errors --

    def error(
        self, status: int, message: str, headers: dict[str, str] | None = None, *, code: str | None = None
    ) -> Response[Any]:
        """An error response in the shape of the request's family."""
        if is_openai(self.current_event.path):
            status, body = openai_error(status, message, code=code)
            return Response(status, JSON_TYPE, body=json.dumps(body, ensure_ascii=False), headers=headers)
        return Response(status, JSON_TYPE, body=error_body(status, message, cid=self.correlation_id()), headers=headers)

    def _domain_error(self, exc: Exception) -> Response[Any]:
        status = status_of(exc, self.errors)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
        if isinstance(exc, BudgetReached):  # when the budget is given afresh
            headers = {"Retry-After": str(exc.retry_after_seconds)}
        if is_openai(self.current_event.path):
            status, body = openai_error_of(exc, status)
            return Response(status, JSON_TYPE, body=json.dumps(body, ensure_ascii=False), headers=headers)
        if isinstance(exc, ValidationError):
            return self._problems(exc.errors())
        if isinstance(exc, ScheduleRejected):  # the field, what is wrong, and when it would have fired next
            detail = [{"loc": ["body", exc.field], "type": exc.kind, "message": str(exc)}]
            body = error_body(422, str(exc), detail, self.correlation_id())
            if exc.next_fire_times is not None:
                body["next_fire_times"] = exc.next_fire_times
            return Response(422, JSON_TYPE, body=body)
        return self.error(status, _message(exc, status), headers=headers)

    def _chat_error(self, exc: ChatError) -> Response[Any]:
        """A chat request refused as OpenAI refuses it (missions.app.chat_wire)."""
        return Response(exc.status, JSON_TYPE, body=json.dumps(exc.body(), ensure_ascii=False))

    def _invalid(self, exc: RequestValidationError) -> Response[Any]:
        return self._problems(exc.errors())

    def _problems(self, errors: Any) -> Response[Any]:
        detail = [
            {
                "loc": [str(part) if not isinstance(part, int) else part for part in e.get("loc", ())],
                "type": str(e.get("type")),
                "message": str(e.get("msg")),
            }
            for e in errors
        ]
        return Response(422, JSON_TYPE, body=error_body(422, "invalid request", detail, self.correlation_id()))

    def _service_error(self, exc: ServiceError) -> Response[Any]:
        return self.error(exc.status_code, str(exc.msg))

    def _no_route(self, exc: NotFoundError) -> Response[Any]:
        """Powertools hands this handler both its own 404 (no route matched) and a route's (what it did not
        find, e.g. "no mission m_1"): the route's reason is kept."""
        if exc.msg != _NO_ROUTE:
            return self.error(404, str(exc.msg))
        event = self.current_event
        return self.error(404, f"no route {event.http_method} {event.path}", code="unknown_url")


_NO_ROUTE = NotFoundError().msg  # what Powertools' 404 says when no route matches


_ROUTE = inspect.signature(APIGatewayHttpResolver.route)

__all__ = [
    "ERROR_STATUS",
    "OPENAI_CODES",
    "RETRY_AFTER_SECONDS",
    "STREAM_ERROR_STATUS",
    "Resolver",
    "error_body",
    "is_openai",
    "openai_error",
    "openai_error_of",
    "refusal",
    "status_of",
    "user_of",
]
