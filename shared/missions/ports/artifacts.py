"""What the runtime needs from the store of artifacts: what stages write, versioned per path.

Every backend runs the same conformance suite (tests/conformance), in memory and on DynamoDB.
"""

from __future__ import annotations

from typing import Protocol

from missions.core.mission.artifacts import Artifact, Artifacts


class ArtifactStore(Artifacts, Protocol):
    """Artifacts as stages write them (put, get), and as the API lists them."""

    def list(self, mission_id: str) -> list[Artifact]:
        """Every version of every artifact of the mission, by path then version."""
