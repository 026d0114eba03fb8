"""Artifacts: versioned documents a mission writes for its user (a plan, research, itinerary drafts)."""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from pydantic import Field

from missions.core.mission.envelope import Model, utcnow


class Artifact(Model):
    """A versioned document a mission writes for its user (a plan, research, an itinerary draft)."""

    mission_id: str
    path: str  # e.g. "plan", "research/flights", "drafts/itinerary"
    version: int = Field(ge=1)
    content: Any
    stage: str = ""
    written_by: str = ""  # "<stage>@<hop>": a retried stage finds its own write instead of adding a version
    created_at: str = Field(default_factory=utcnow)

    @property
    def name(self) -> str:
        """How users see it: drafts/itinerary_v2."""
        return f"{self.path}_v{self.version}"


ARTIFACT_MAX_BYTES = 300_000  # one DynamoDB item (400 KB) with room for its attributes
ARTIFACT_PATH_PATTERN = r"^[a-z0-9][a-z0-9_\-]*(/[a-z0-9][a-z0-9_\-]*){0,3}$"


class ArtifactRejected(ValueError):
    """An artifact a stage tried to write is malformed (a bug in the stage): never retried."""


def check_artifact(path: str, content: Any) -> None:
    if not re.match(ARTIFACT_PATH_PATTERN, path):
        raise ArtifactRejected(f"artifact path '{path}' must be 1-4 lowercase segments like 'drafts/itinerary'")
    size = len(json.dumps(content, default=str).encode())
    if size > ARTIFACT_MAX_BYTES:
        raise ArtifactRejected(f"artifact '{path}' is {size} bytes; the limit is {ARTIFACT_MAX_BYTES}")


class Artifacts(Protocol):
    """What a stage may do with its mission's artifacts (missions.ports.artifacts.ArtifactStore is one)."""

    def put(self, mission_id: str, path: str, content: Any, *, stage: str = "", written_by: str = "") -> Artifact:
        """A new version of `path`; if the latest version has the same `written_by`, that one (a retry)."""

    def get(self, mission_id: str, path: str, version: int | None = None) -> Artifact:
        """One version (the latest when None); NotFound when missing."""
