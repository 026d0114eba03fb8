"""What the runtime needs from the store of events: a mission's timeline, and a cursor into it.

Every backend runs the same conformance suite (tests/conformance), in memory and on DynamoDB.
"""

from __future__ import annotations

import re
from typing import Protocol

from missions.core.mission.events import Event


def event_position(batch: int, index: int = 0) -> str:
    """An event's place in its mission's timeline, as a cursor: the batch it was appended in (a per-mission
    sequence) and its index within the batch, sortable as text ("e<batch:012d>.<index:06d>")."""
    if batch < 1 or not 0 <= index < 1_000_000:
        raise ValueError(f"no event position for batch {batch}, index {index}")
    return f"e{batch:012d}.{index:06d}"


_POSITION = re.compile(r"e(\d{12})(?:\.(\d{6}))?")


def parse_position(position: str) -> tuple[int, int]:
    """(batch, index) of a cursor; ValueError when it is not one. A cursor without an index is the only
    event of its batch (a timeline written before batches held several events: one event an item)."""
    match = _POSITION.fullmatch(position)
    if match is None:
        raise ValueError(f"not an event position: {position[:40]!r}")
    return int(match.group(1)), int(match.group(2) or 0)


class EventStore(Protocol):
    """A mission's timeline. The store orders it, not the writers: each batch is placed after every
    batch appended before it (a per-mission sequence), whoever wrote it; a batch's events keep their
    order and are never interleaved with another batch's."""

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        """Append the events, in order, after everything appended so far. `batch_id` names the write
        so a retry is not a second copy: appending the batch that was appended last, again, rewrites
        it in place (a stage retried after its events were written), whatever it holds this time."""

    def read(self, mission_id: str, after: str | None = None, limit: int = 100) -> tuple[list[Event], str | None]:
        """Events strictly after the cursor (an event's position: `event_position`), in order, at most
        `limit`; returns (events, cursor of the last one returned), or (no events, `after`). ValueError
        when `after` is not a position (`parse_position`)."""
