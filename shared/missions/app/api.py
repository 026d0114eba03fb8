"""The missions HTTP API (API Gateway HTTP API, payload v2), on Powertools' event handler.

The user is whoever the authorizer says (JWT `sub`, or the IAM principal), never a body
field. Another user's mission answers 404, exactly like a missing one. Bodies and
queries are validated by pydantic (422 with the reason); nothing is written before a
request is known to be valid. GET /openapi.json serves the generated OpenAPI document.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, TypedDict, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, UnauthorizedError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body as BodyParam
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from missions.app.observability import bind_mission
from missions.core import capability as registry
from missions.core.artifacts import ARTIFACT_PATH_PATTERN
from missions.core.envelope import InterruptResponse
from missions.core.errors import (
    AnswerRejected,
    ConflictError,
    DependencyUnavailable,
    MemoryValidationError,
    MissionRequestError,
    NotFound,
    RepositoryConflict,
    RepositoryRequestError,
)
from missions.core.refs import SHARED_OWNER
from missions.core.requests import MissionRequest
from missions.core.triggers import Priority, TriggerSource
from missions.ports.store import MissionRecord, MissionStatus, RepositoryRecord, RepositoryStatus, lifecycle_of
from missions.service.interrupts import answer_interrupt

if TYPE_CHECKING:
    from missions.app.runtime import Runtime

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


class Resolver(APIGatewayHttpResolver):
    """Powertools takes a route's return annotation for its response model: it would validate every response
    against it and publish it in the OpenAPI document. Ours are for the type checker only, so routes are
    registered without them and responses stay as they were."""

    def route(
        self, rule: str, method: str | list[str] | tuple[str], *args: Any, **kwargs: Any
    ) -> Callable[[Endpoint], Endpoint]:
        register = super().route(rule, method, *args, **kwargs)

        def register_unannotated(endpoint: Endpoint) -> Endpoint:
            endpoint.__annotations__.pop("return", None)
            return register(endpoint)

        return register_unannotated


app = Resolver(enable_validation=True)
app.configure_openapi(
    title="missions", version="0.1.0", description="Start, watch, answer, cancel and rate long-running LLM missions."
)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MissionCreate(Body):
    capability: str | None = Field(None, min_length=1, max_length=64)
    goal: str = Field(min_length=1, max_length=10_000)
    context: dict[str, Any] = Field(default_factory=dict)
    priority: Priority = Priority.MEDIUM
    deadline: datetime | None = None


class ForkRequest(Body):
    checkpoint_id: str = Field(min_length=1, max_length=80)


class AnswerBody(Body):
    text: str | None = Field(None, max_length=20_000)
    approved: bool | None = None
    decision: str | None = Field(None, max_length=200)
    data: dict[str, Any] | None = None


class FeedbackBody(Body):
    completed: bool
    quality: int | None = Field(None, ge=1, le=5)
    useful: bool | None = None
    text: str | None = Field(None, max_length=5000)


class MemoryValue(Body):
    value: Any


class ErrorBody(TypedDict):
    statusCode: int
    message: str
    detail: NotRequired[list[dict[str, Any]]]


class MissionSummary(TypedDict):
    mission_id: str
    capability: str
    goal: str
    status: str
    lifecycle: str
    stage: str | None
    priority: str
    trigger: str
    created_at: str
    terminal_reason: str | None


class PendingInterrupt(TypedDict):
    interrupt_id: str
    kind: str | None
    question: str | None
    options: list[str]
    data: NotRequired[dict[str, Any]]
    stage: NotRequired[str]


def runtime() -> Runtime:
    """The composition root the handler put into the resolver's context for this request."""
    return app.context["runtime"]  # type: ignore[no-any-return]


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


def error(status: int, message: str) -> Response[ErrorBody]:
    return Response(status, "application/json", body={"statusCode": status, "message": message})


def handle(event: dict[str, Any], context: Any, service: Runtime) -> dict[str, Any]:
    """Resolve one API Gateway event; bodies that are not JSON are 415 before any parser sees them."""
    method = ((event.get("requestContext") or {}).get("http") or {}).get("method", "")
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    media = (headers.get("content-type") or "application/json").split(";")[0].strip().lower()
    json_media = media == "application/json" or media.endswith("+json")
    if method in ("POST", "PUT", "PATCH") and event.get("body") and not json_media:
        body = {"statusCode": 415, "message": f"bodies must be application/json, not {media}"}
        return {"statusCode": 415, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
    app.context.update(runtime=service)  # what append_context does; Powertools leaves that one untyped
    return app.resolve(event, context)


# Domain errors -> HTTP statuses, in one place. Subclasses inherit their base's status (a
# TransitionRefused or TaskGone is a ConflictError: 409).
ERROR_STATUS: dict[type[Exception], int] = {
    NotFound: 404,
    PermissionError: 403,
    ConflictError: 409,
    RepositoryConflict: 409,
    MissionRequestError: 422,
    AnswerRejected: 422,
    RepositoryRequestError: 422,
    MemoryValidationError: 422,
    ValidationError: 422,
    DependencyUnavailable: 503,
}


@app.exception_handler(list(ERROR_STATUS))  # type: ignore[untyped-decorator]  # Powertools leaves it unannotated
def _domain_error(exc: Exception) -> Response[ErrorBody]:
    status = next(ERROR_STATUS[kind] for kind in type(exc).__mro__ if kind in ERROR_STATUS)
    if status == 503:
        body: ErrorBody = {"statusCode": 503, "message": f"{exc}; nothing was stored, retry later"}
        return Response(503, "application/json", body=body, headers={"Retry-After": "5"})
    return error(status, str(exc))


@app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]  # Powertools leaves it unannotated
def _invalid(exc: RequestValidationError) -> Response[ErrorBody]:
    problems = [{"loc": list(e.get("loc", ())), "type": e.get("type"), "message": e.get("msg")} for e in exc.errors()]
    return Response(422, "application/json", body={"statusCode": 422, "message": "invalid request", "detail": problems})


# -- capabilities ------------------------------------------------------------------------------


@app.get("/capabilities")
def list_capabilities() -> dict[str, Any]:
    current_user()
    return {"capabilities": [c.describe() for c in registry.load_all()]}


class ClassifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    goal: str = Field(min_length=1, max_length=10_000)


@app.post("/classify")
def classify(body: ClassifyRequest) -> dict[str, Any]:
    """Which capability would take this goal, and how complex it is (1 simple, 2 coordinated, 3 complex)."""
    current_user()
    try:
        capability: str | None = runtime().service.choose_capability(body.goal, None)
    except MissionRequestError:
        capability = None
    classification = runtime().service.classify_goal(body.goal)
    return {"capability": capability, **classification.model_dump(mode="json")}


# -- missions ----------------------------------------------------------------------------------


@app.post("/missions")
def create_mission(body: MissionCreate) -> Response[dict[str, Any]]:
    user = current_user()
    capability = runtime().service.choose_capability(body.goal, body.capability)
    key = app.current_event.headers.get("idempotency-key")
    request = MissionRequest.parse(
        capability=capability,
        goal=body.goal,
        user_id=user,
        context=body.context,
        priority=body.priority,
        deadline=body.deadline.isoformat() if body.deadline else None,
        trigger=TriggerSource.API,
        idempotency_key=f"api:{user}:{key}" if key else None,
    )
    result = runtime().launcher.submit(request)  # checks everything (a repository, say) before writing anything
    runtime().service.remember_user(user)
    status = 200 if result.status == "duplicate" else 202
    return Response(
        status,
        "application/json",
        body={"mission_id": result.mission_id, "status": result.status, "capability": capability},
    )


@app.get("/missions")
def list_missions(
    status: Annotated[str | None, Query(max_length=32)] = None,
    capability: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    user = current_user()
    records = runtime().missions.list_for_user(user, limit=1000)
    records = [
        r for r in records if (not status or r.status == status) and (not capability or r.capability == capability)
    ]
    start = _decode_cursor(cursor)
    page = records[start : start + limit]
    next_cursor = _encode_cursor(start + limit) if start + limit < len(records) else None
    return {"missions": [_summary(r) for r in page], "cursor": next_cursor}


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"]
        if isinstance(offset, int) and offset >= 0:
            return offset
    except (ValueError, KeyError, TypeError):
        pass
    raise RequestValidationError([{"loc": ("query", "cursor"), "type": "value_error", "msg": "invalid cursor"}])


def _summary(record: MissionRecord) -> MissionSummary:
    return {
        "mission_id": record.mission_id,
        "capability": record.capability,
        "goal": record.goal,
        "status": record.status,
        "lifecycle": lifecycle_of(record),
        "stage": record.stage,
        "priority": record.priority,
        "trigger": record.trigger,
        "created_at": record.created_at,
        "terminal_reason": record.terminal_reason,
    }


@app.get("/missions/<mission_id>")
def get_mission(mission_id: str) -> dict[str, Any]:
    user = current_user()
    record = owned_mission(mission_id, user)
    pending: PendingInterrupt | None = None
    if record.pending_interrupt:
        try:
            interrupt = runtime().interrupts.get(mission_id, record.pending_interrupt)
            if interrupt.status == "pending":
                pending = {
                    "interrupt_id": interrupt.interrupt_id,
                    "kind": interrupt.kind.value,
                    "question": interrupt.question,
                    "options": interrupt.options,
                    "data": interrupt.data,  # what the user is asked to judge (a draft, the options' details)
                    "stage": interrupt.stage,
                }
        except NotFound:
            pending = {"interrupt_id": record.pending_interrupt, "kind": None, "question": None, "options": []}
    counters = record.counters or {}
    return {
        **_summary(record),
        "updated_at": record.updated_at,
        "completed_at": record.completed_at,
        "archived_at": record.archived_at,
        "pending_interrupt": pending,
        "result": record.result,
        "counters": counters,
        "cost_usd": counters.get("cost_usd", 0.0),
        "feedback": record.feedback,
    }


@app.get("/missions/<mission_id>/events")
def mission_events(
    mission_id: str,
    after: Annotated[str | None, Query(max_length=300)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """Events in order; `cursor` (opaque, URL-safe) goes back as `after` for the next page."""
    owned_mission(mission_id, current_user())
    position = _decode_position(after) if after else None
    events, last = runtime().events.read(mission_id, after=position, limit=limit)
    cursor = base64.urlsafe_b64encode(last.encode()).decode() if last else after
    return {"events": [e.model_dump(mode="json") for e in events], "cursor": cursor}


def _decode_position(cursor: str) -> str:
    try:
        return base64.urlsafe_b64decode(cursor.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise RequestValidationError(
            [{"loc": ("query", "after"), "type": "value_error", "msg": "invalid cursor"}]
        ) from None


@app.get("/missions/<mission_id>/checkpoints")
def mission_checkpoints(mission_id: str) -> dict[str, Any]:
    owned_mission(mission_id, current_user())
    checkpoints = runtime().checkpoints.list(mission_id)
    return {
        "checkpoints": [
            {"checkpoint_id": c.checkpoint_id, "parent_id": c.parent_id, "stage": c.stage, "created_at": c.created_at}
            for c in checkpoints
        ]
    }


@app.get("/missions/<mission_id>/artifacts")
def mission_artifacts(mission_id: str) -> dict[str, Any]:
    """Every version of every document the mission wrote (plan, research, drafts/itinerary_vN, final)."""
    owned_mission(mission_id, current_user())
    return {
        "artifacts": [
            {"name": a.name, "path": a.path, "version": a.version, "stage": a.stage, "created_at": a.created_at}
            for a in runtime().artifacts.list(mission_id)
        ]
    }


@app.get("/missions/<mission_id>/artifact")
def mission_artifact(
    mission_id: str,
    path: Annotated[str, Query(min_length=1, max_length=200, pattern=ARTIFACT_PATH_PATTERN)],
    version: Annotated[int | None, Query(ge=1, le=100_000)] = None,
) -> dict[str, Any]:
    """One artifact's content: the latest version of `path`, or `version`."""
    owned_mission(mission_id, current_user())
    try:
        artifact = runtime().artifacts.get(mission_id, path, version)
    except NotFound:
        which = f"{path} v{version}" if version else path
        raise NotFoundError(f"mission {mission_id} has no artifact {which}") from None
    return {
        "name": artifact.name,
        "path": artifact.path,
        "version": artifact.version,
        "stage": artifact.stage,
        "created_at": artifact.created_at,
        "content": artifact.content,
    }


@app.post("/missions/<mission_id>/fork")
def fork_mission(mission_id: str, body: ForkRequest) -> Response[dict[str, Any]]:
    user = current_user()
    owned_mission(mission_id, user)
    try:
        result = runtime().launcher.fork(mission_id, body.checkpoint_id, user)
    except NotFound:
        raise NotFoundError(f"no checkpoint {body.checkpoint_id} in mission {mission_id}") from None
    return Response(
        202,
        "application/json",
        body={
            "mission_id": result.mission_id,
            "status": result.status,  # started, or queued behind the user's running missions
            "forked_from": mission_id,
            "checkpoint_id": body.checkpoint_id,
        },
    )


@app.post("/missions/<mission_id>/interrupts/<interrupt_id>")
def answer(mission_id: str, interrupt_id: str, body: AnswerBody) -> dict[str, Any]:
    owned_mission(mission_id, current_user())
    active = runtime()
    try:
        record = answer_interrupt(
            interrupts=active.interrupts,
            missions=active.missions,
            events=active.events,
            executions=active.executions,
            mission_id=mission_id,
            interrupt_id=interrupt_id,
            response=InterruptResponse(**body.model_dump()),
        )
    except NotFound:
        raise NotFoundError(f"no interrupt {interrupt_id} in mission {mission_id}") from None
    return {"interrupt_id": record.interrupt_id, "status": "answered"}


@app.post("/missions/<mission_id>/cancel")
def cancel(mission_id: str) -> dict[str, Any] | Response[ErrorBody]:
    record = owned_mission(mission_id, current_user())
    if record.status in MissionStatus.TERMINAL or record.status == MissionStatus.CANCELLING:
        return error(409, f"mission {mission_id} already {record.status}")
    runtime().control.cancel(record)  # a ConflictError (409) when it ended while the cancel was on its way
    return {"mission_id": mission_id, "status": "cancelled"}


@app.post("/missions/<mission_id>/feedback")
def feedback(mission_id: str, body: FeedbackBody) -> dict[str, Any]:
    user = current_user()
    record = owned_mission(mission_id, user)
    outcome = runtime().service.give_feedback(record, user, body.model_dump(exclude_none=True))
    return {
        "mission_id": mission_id,
        "preferences_written": outcome.preferences_written,
        "complaint": outcome.complaint,
    }


# -- repositories ------------------------------------------------------------------------------


class UploadSpec(Body):
    format: Literal["tar.gz", "zip"]
    size_bytes: int = Field(ge=1, le=1024**3, strict=True)  # the import's own limit is checked too


class RepositoryCreate(Body):
    name: str | None = Field(None, min_length=1, max_length=100)
    url: str | None = Field(None, min_length=1, max_length=2048, description="https git URL (no credentials)")
    ref: str | None = Field(None, min_length=1, max_length=200, description="branch, tag or commit; default HEAD")
    upload: UploadSpec | None = Field(None, description="register an archive upload instead of a git URL")
    shared: bool = Field(False, description="operators only: readable by every user")


class ImportBody(Body):
    ref: str | None = Field(None, min_length=1, max_length=200)


def is_operator(user: str) -> bool:
    """Operators are in the JWT's `cognito:groups` claim as 'operators', or named in the settings."""
    authorizer = app.current_event.request_context.authorizer
    claims = (authorizer.jwt_claim if authorizer else None) or {}
    groups = claims.get("cognito:groups") or ""
    names = groups if isinstance(groups, list) else str(groups).strip("[]").replace(",", " ").split()
    return "operators" in names or user in runtime().settings.operators


def _repository(record: RepositoryRecord) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "repository_id": record.repository_id,
        "name": record.name,
        "source": record.source,
        "url": record.url,
        "ref": record.ref,
        "format": record.format,
        "status": record.status,
        "reason": record.reason,
        "shared": record.owner == SHARED_OWNER,
        "snapshots": [s.model_dump(mode="json") for s in record.snapshots],
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }
    if record.source == "upload" and record.status in (RepositoryStatus.AWAITING_UPLOAD, RepositoryStatus.FAILED):
        shown["upload"] = runtime().repository_service.upload_instructions(record)
    return shown


@app.post("/repositories")
def create_repository(body: RepositoryCreate) -> Response[dict[str, Any]]:
    """Register a repository: from a git URL (imported in the background) or an archive you upload."""
    user = current_user()
    record, upload = runtime().repository_service.register(
        user,
        name=body.name,
        url=body.url,
        ref=body.ref,
        upload=body.upload.model_dump() if body.upload else None,
        shared=body.shared,
        operator=is_operator(user) if body.shared else False,
    )
    shown = {**_repository(record), **({"upload": upload} if upload else {})}
    return Response(201 if upload else 202, "application/json", body=shown)


@app.get("/repositories")
def list_repositories() -> dict[str, Any]:
    """Your repositories and the ones an operator shared, newest first."""
    user = current_user()
    return {"repositories": [_repository(r) for r in runtime().repository_service.list(user)]}


@app.get("/repositories/<repository_id>")
def get_repository(repository_id: str) -> dict[str, Any]:
    user = current_user()
    try:
        return _repository(runtime().repository_service.get(user, repository_id))
    except NotFound:
        raise NotFoundError(f"no repository {repository_id}") from None


@app.post("/repositories/<repository_id>/imports")
def import_repository(
    repository_id: str, body: Annotated[ImportBody | None, BodyParam()] = None
) -> Response[dict[str, Any]]:
    """Import again (new commits, another ref), or import the archive you uploaded; the body is optional."""
    user = current_user()
    ref = body.ref if body is not None else None
    try:
        record = runtime().repository_service.request_import(user, repository_id, ref, operator=is_operator(user))
    except NotFound:
        raise NotFoundError(f"no repository {repository_id}") from None
    return Response(202, "application/json", body=_repository(record))


@app.delete("/repositories/<repository_id>")
def delete_repository(repository_id: str) -> Response[str]:
    """Delete the repository and every snapshot of it; missions already running may fail to read it."""
    user = current_user()
    try:
        runtime().repository_service.delete(user, repository_id, operator=is_operator(user))
    except NotFound:
        raise NotFoundError(f"no repository {repository_id}") from None
    return Response(204, "application/json", body="")


# -- long-term memory --------------------------------------------------------------------------


def namespace_of(raw: str) -> tuple[str, ...]:
    """URL form: segments joined by ':' (e.g. 'user_preferences:dining')."""
    return tuple(raw.split(":"))


@app.get("/memory/<namespace>/<key>")
def memory_get(namespace: str, key: str) -> dict[str, Any]:
    user = current_user()
    try:
        item = runtime().memory.get(user, namespace_of(namespace), key)
    except MemoryValidationError as exc:
        raise RequestValidationError([{"loc": ("path",), "type": "value_error", "msg": str(exc)}]) from None
    if item is None:
        raise NotFoundError(f"no item {key} in {namespace}")
    return item.model_dump(mode="json", exclude={"user_id"})


@app.put("/memory/<namespace>/<key>")
def memory_put(namespace: str, key: str, body: MemoryValue) -> dict[str, Any] | Response[ErrorBody]:
    user = current_user()
    try:
        item = runtime().memory.put(user, namespace_of(namespace), key, body.value)
    except MemoryValidationError as exc:
        return error(422, str(exc))
    runtime().service.remember_user(user)
    return item.model_dump(mode="json", exclude={"user_id"})


@app.delete("/memory/<namespace>/<key>")
def memory_delete(namespace: str, key: str) -> Response[str] | Response[ErrorBody]:
    user = current_user()
    try:
        deleted = runtime().memory.delete(user, namespace_of(namespace), key)
    except MemoryValidationError as exc:
        return error(422, str(exc))
    if not deleted:
        raise NotFoundError(f"no item {key} in {namespace}")
    return Response(204, "application/json", body="")


@app.get("/memory/<namespace>")
def memory_list(
    namespace: str,
    query: Annotated[str | None, Query(min_length=1, max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any] | Response[ErrorBody]:
    user = current_user()
    memory = runtime().memory
    try:
        if query:
            found = memory.search(user, namespace_of(namespace), query, limit=limit)
            return {
                "items": [{**i.model_dump(mode="json", exclude={"user_id"}), "score": round(s, 4)} for i, s in found]
            }
        items = memory.list(user, namespace_of(namespace), limit=limit)
    except MemoryValidationError as exc:
        return error(422, str(exc))
    return {"items": [i.model_dump(mode="json", exclude={"user_id"}) for i in items]}


# -- metrics -----------------------------------------------------------------------------------


@app.get("/metrics/missions")
def metrics(
    capability: Annotated[str, Query(min_length=1, max_length=64)],
    days: Annotated[int, Query(ge=1, le=365)] = 30,
) -> dict[str, Any] | Response[ErrorBody]:
    current_user()
    if capability not in registry.available():
        return error(422, f"unknown capability '{capability}'")
    return runtime().service.mission_metrics(capability, days)


@app.get("/openapi.json")
def openapi() -> Response[str]:
    return Response(200, "application/json", body=app.get_openapi_json_schema())


__all__ = ["app", "current_user"]
