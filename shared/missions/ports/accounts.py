"""What export and erasure of a user's data need from storage (missions.service.accounts).

Each store that keeps something of a user is a `PersonalStore`: it exports and erases its share, found
from the user's id and mission ids, never from a list an earlier run kept, so an erasure that stopped
part-way is finished by running it again. `MissionIndex` is where a user's mission ids are found (the
missions table): it is erased last, once every store keyed by mission has let go of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol


class PersonalStore(Protocol):
    """One store's share of a user's data."""

    @property
    def name(self) -> str:
        """How exports and erasure reports name it."""

    def export(self, user_id: str, mission_ids: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(kind, record) of everything it keeps of the user."""

    def erase(self, user_id: str, mission_ids: Sequence[str]) -> int:
        """Delete everything it keeps of the user; how many items (or objects) it deleted. Deleting what
        is already gone is not an error."""


class MissionIndex(PersonalStore, Protocol):
    def mission_ids(self, user_id: str) -> list[str]:
        """Every mission of the user, in any status."""


__all__ = ["MissionIndex", "PersonalStore"]
