"""In-memory blob store of missions.core.mission.offload:
the fake unit tests use, and the reference the conformance suite holds every backend to."""

from __future__ import annotations


class MemoryBlobStore:
    def __init__(self) -> None:
        self.items: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        self.items.setdefault(key, data)

    def get(self, key: str) -> bytes:
        return self.items[key]
