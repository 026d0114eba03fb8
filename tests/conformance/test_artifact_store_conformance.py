"""Artifact stores (what stages write, versioned per path), in memory and on DynamoDB in moto:
a backend conforms when it behaves exactly like the in-memory reference adapter."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from missions.core.errors import NotFound
from missions.core.specs import ARTIFACTS

if TYPE_CHECKING:
    from tests.conformance.conftest import Moto


@dataclass
class Backend:
    name: str
    artifacts: Any


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        from missions.adapters.memory.artifacts import MemoryArtifactStore

        yield Backend("memory", MemoryArtifactStore())
        return
    from missions.adapters.dynamodb.artifacts import DynamoArtifactStore

    aws: Moto = request.getfixturevalue("aws")
    yield Backend("dynamodb", DynamoArtifactStore(aws.table(ARTIFACTS), client=aws.ddb, ttl_seconds=3600))


def test_artifacts_are_versioned_per_path_and_listed_in_order(backend):
    # Given a plan written once and an itinerary draft written twice
    backend.artifacts.put("m1", "plan", {"steps": ["flights", "hotels"]}, stage="planner", written_by="planner@1")
    first = backend.artifacts.put("m1", "drafts/itinerary", {"days": 3}, stage="synthesis", written_by="synthesis@5")
    second = backend.artifacts.put("m1", "drafts/itinerary", {"days": 4}, stage="synthesis", written_by="synthesis@9")
    backend.artifacts.put("m2", "plan", "another mission's", written_by="planner@1")
    # Then versions count per path, users see names like drafts/itinerary_v2, and reads pick versions
    assert (first.version, second.version, second.name) == (1, 2, "drafts/itinerary_v2")
    assert backend.artifacts.get("m1", "drafts/itinerary").content == {"days": 4}
    assert backend.artifacts.get("m1", "drafts/itinerary", version=1).content == {"days": 3}
    assert [a.name for a in backend.artifacts.list("m1")] == ["drafts/itinerary_v1", "drafts/itinerary_v2", "plan_v1"]
    with pytest.raises(NotFound):
        backend.artifacts.get("m1", "drafts/itinerary", version=3)
    with pytest.raises(NotFound):
        backend.artifacts.get("m1", "final")


def test_a_retried_stage_finds_its_own_artifact_instead_of_adding_a_version(backend):
    once = backend.artifacts.put("m1", "plan", {"v": 1}, written_by="planner@3")
    again = backend.artifacts.put("m1", "plan", {"v": 1}, written_by="planner@3")
    assert once.version == again.version == 1 and len(backend.artifacts.list("m1")) == 1


def test_malformed_artifacts_are_rejected_and_nothing_is_written(backend):
    from missions.core.mission.artifacts import ArtifactRejected

    with pytest.raises(ArtifactRejected, match="segments"):
        backend.artifacts.put("m1", "../etc/passwd", {})
    with pytest.raises(ArtifactRejected, match="limit"):
        backend.artifacts.put("m1", "plan", "x" * 400_000)
    assert backend.artifacts.list("m1") == []
