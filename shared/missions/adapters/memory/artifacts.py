"""In-memory adapter of missions.ports.artifacts:
the fake unit tests use, and the reference the conformance suite holds every backend to."""

from __future__ import annotations

import threading
from typing import Any

from missions.core.errors import NotFound
from missions.core.mission.artifacts import Artifact, check_artifact


class MemoryArtifactStore:
    def __init__(self) -> None:
        self._items: dict[str, dict[str, list[Artifact]]] = {}
        self._lock = threading.Lock()

    def put(self, mission_id: str, path: str, content: Any, *, stage: str = "", written_by: str = "") -> Artifact:
        check_artifact(path, content)
        with self._lock:
            versions = self._items.setdefault(mission_id, {}).setdefault(path, [])
            if versions and written_by and versions[-1].written_by == written_by:
                return versions[-1].model_copy(deep=True)
            artifact = Artifact(
                mission_id=mission_id,
                path=path,
                version=len(versions) + 1,
                content=content,
                stage=stage,
                written_by=written_by,
            )
            versions.append(artifact)
            return artifact.model_copy(deep=True)

    def get(self, mission_id: str, path: str, version: int | None = None) -> Artifact:
        versions = self._items.get(mission_id, {}).get(path, [])
        chosen = (
            versions[-1] if versions and version is None else next((a for a in versions if a.version == version), None)
        )
        if chosen is None:
            raise NotFound(f"artifact {path}" + (f" v{version}" if version else "") + f" of {mission_id}")
        return chosen.model_copy(deep=True)

    def list(self, mission_id: str) -> list[Artifact]:
        paths = self._items.get(mission_id, {})
        return [a.model_copy(deep=True) for path in sorted(paths) for a in paths[path]]
