"""Repositories a mission may read: registered from a git URL or an uploaded archive, and their snapshots."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from missions.app.api.models.common import Body


class UploadSpec(Body):
    format: Literal["tar.gz", "zip"]
    size_bytes: StrictInt = Field(ge=1, le=1024**3)  # the import's own limit is checked too


class RepositoryCreate(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"name": "shop", "upload": {"format": "tar.gz", "size_bytes": 52_000}}]}
    )
    name: StrictStr | None = Field(None, min_length=1, max_length=100)
    url: StrictStr | None = Field(None, min_length=1, max_length=2048, description="https git URL (no credentials)")
    ref: StrictStr | None = Field(None, min_length=1, max_length=200, description="branch, tag or commit; default HEAD")
    upload: UploadSpec | None = Field(None, description="register an archive upload instead of a git URL")
    shared: StrictBool = Field(False, description="operators only: readable by every user")


class ImportBody(Body):
    ref: StrictStr | None = Field(None, min_length=1, max_length=200)


class UploadInstructions(BaseModel):
    url: str
    method: Literal["PUT"]
    headers: dict[str, str]
    expires_in: int
    then: str


class SnapshotView(BaseModel):
    sha256: str
    commit: str | None
    ref: str | None
    files: int
    total_bytes: int
    archive_bytes: int
    history: bool = False  # a git import's history is kept beside it: missions can ask when and why code changed
    imported_at: str


class RepositoryView(BaseModel):
    repository_id: str
    name: str
    source: str
    url: str | None
    ref: str | None
    format: str | None
    status: str
    reason: str | None
    shared: bool
    snapshots: list[SnapshotView]
    created_at: str
    updated_at: str
    upload: UploadInstructions | None = None


class RepositoryList(BaseModel):
    repositories: list[RepositoryView]


__all__ = [
    "ImportBody",
    "RepositoryCreate",
    "RepositoryList",
    "RepositoryView",
    "SnapshotView",
    "UploadInstructions",
    "UploadSpec",
]
