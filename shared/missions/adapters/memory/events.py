"""In-memory adapter of missions.ports.events:
the fake unit tests use, and the reference the conformance suite holds every backend to."""

from __future__ import annotations

import threading

from missions.core.mission.events import Event
from missions.ports.events import event_position, parse_position


class MemoryEventStore:
    """The reference timeline: a mission's batches in order (a per-mission sequence), each holding its
    events; the last one is rewritten in place when its batch is appended again."""

    def __init__(self) -> None:
        self._batches: dict[str, list[tuple[int, str, list[Event]]]] = {}  # mission -> (sequence, batch id, events)
        self._lock = threading.Lock()

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        if not events:
            return
        with self._lock:
            batches = self._batches.setdefault(mission_id, [])
            if batches and batches[-1][1] == batch_id:  # a retry of the last write: in place, nothing left of it
                sequence = batches.pop()[0]
            else:
                sequence = batches[-1][0] + 1 if batches else 1
            # kept as given (the list copied): each read hands out copies that carry their place
            batches.append((sequence, batch_id, list(events)))

    def read(self, mission_id: str, after: str | None = None, limit: int = 100) -> tuple[list[Event], str | None]:
        cursor = parse_position(after) if after is not None else (0, 0)
        if limit <= 0:
            return [], after
        found: list[tuple[int, int, Event]] = []
        for sequence, _, events in list(self._batches.get(mission_id, [])):
            if sequence < cursor[0]:
                continue
            found += [(sequence, i, e) for i, e in enumerate(events) if (sequence, i) > cursor]
            if len(found) >= limit:
                break
        placed = [
            e.model_copy(update={"mission_id": mission_id, "position": event_position(batch, i)})
            for batch, i, e in found[:limit]
        ]
        return placed, (placed[-1].position if placed else after)
