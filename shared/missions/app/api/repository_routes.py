"""Repositories a user's missions may read: register (git URL or upload), list, read, import again, delete."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Body as BodyParam

from missions.app.api.edge import app, current_user, is_operator, responses, runtime
from missions.app.api.models.repositories import ImportBody, RepositoryCreate, RepositoryList, RepositoryView
from missions.core.errors import NotFound
from missions.core.mission.refs import SHARED_OWNER
from missions.ports.repositories import RepositoryRecord, RepositoryStatus

_REPOSITORY = "/repositories/<repository_id>"


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


@app.post(
    "/repositories",
    summary="Register a repository",
    responses={
        **responses((202, RepositoryView, "a git repository, importing in the background"), 403, 409, 503, body=True),
        201: {
            "description": "an upload: PUT the archive to `upload.url`, then POST .../imports",
            "content": {"application/json": {"model": RepositoryView}},
        },
    },
)
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


@app.get(
    "/repositories",
    summary="Your repositories and the shared ones",
    responses=responses((200, RepositoryList, "newest first")),
)
def list_repositories() -> dict[str, Any]:
    """Your repositories and the ones an operator shared, newest first."""
    user = current_user()
    return {"repositories": [_repository(r) for r in runtime().repository_service.list(user)]}


@app.get(_REPOSITORY, summary="Read a repository", responses=responses((200, RepositoryView, "the repository"), 404))
def get_repository(repository_id: str) -> dict[str, Any]:
    user = current_user()
    try:
        return _repository(runtime().repository_service.get(user, repository_id))
    except NotFound:
        raise NotFoundError(f"no repository {repository_id}") from None


@app.post(
    f"{_REPOSITORY}/imports",
    summary="Import again, or import the uploaded archive",
    responses=responses((202, RepositoryView, "importing"), 403, 404, 409, 503, body=True),
)
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


@app.delete(
    _REPOSITORY,
    summary="Delete a repository and its snapshots",
    responses=responses((204, None, "deleted"), 403, 404, 503),
)
def delete_repository(repository_id: str) -> Response[str]:
    """Delete the repository and every snapshot of it; missions already running may fail to read it."""
    user = current_user()
    try:
        runtime().repository_service.delete(user, repository_id, operator=is_operator(user))
    except NotFound:
        raise NotFoundError(f"no repository {repository_id}") from None
    return Response(204, "application/json", body="")
