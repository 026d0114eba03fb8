"""A user's own data: what an export holds and what an erasure reports (missions.service.accounts).

An export is JSON lines, one record a line: `{"kind": ..., "data": ...}`, the first line naming the user
and when the export was made. An erasure goes store by store (missions.ports.accounts) and reports, for
each, how many items it erased or why it could not; it is complete only when no store failed, and running
it again erases what the first run left (every store's erase finds what is left of the user, not a list
kept by the first run).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import Field

from missions.core.mission.envelope import Model, utcnow

EXPORT_MEDIA_TYPE = "application/x-ndjson"
EXPORT_FILENAME = "missions-export.jsonl"
EXPORT_FORMAT = "missions-export/1"


class ErasureReport(Model):
    """What an erasure did: items erased per store, and the stores it could not erase, with the reason."""

    user_id: str
    erased: dict[str, int] = Field(default_factory=dict)
    not_erased: dict[str, str] = Field(default_factory=dict)
    started_at: str = Field(default_factory=utcnow)

    @property
    def complete(self) -> bool:
        return not self.not_erased

    def count(self, store: str, erased: int) -> None:
        self.erased[store] = self.erased.get(store, 0) + erased

    def failed(self, store: str, reason: str) -> None:
        self.not_erased.setdefault(store, reason)  # the first reason is the one to act on

    def summary(self) -> str:
        """One line: what was erased, and what was not (for the CLI and the API's messages)."""
        done = ", ".join(f"{n} {store}" for store, n in sorted(self.erased.items()) if n) or "nothing"
        if self.complete:
            return f"erased {done}"
        left = "; ".join(f"{store}: {why}" for store, why in sorted(self.not_erased.items()))
        return f"erased {done}; NOT erased (run it again): {left}"


def idempotency_prefix(operation: str, user_id: str) -> str:
    """The prefix of the API's Idempotency-Key records of a user ("<operation>#<user>"; "#" is in neither),
    so the records' store can keep each user's in a partition of their own (found for export and erasure)."""
    return f"{operation}#{user_id}"


def idempotency_owner(idempotency_key: str) -> str:
    """The user of a record key made from `idempotency_prefix` ("<operation>#<user>#<hash>"), "" for others."""
    parts = idempotency_key.split("#")
    return parts[1] if len(parts) == 3 else ""


def export_lines(user_id: str, records: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    """The export as JSON lines: a header naming the user and the format, then one line per record."""
    header = {"kind": "export", "data": {"user_id": user_id, "format": EXPORT_FORMAT, "exported_at": utcnow()}}
    yield _line(header)
    for kind, data in records:
        yield _line({"kind": kind, "data": data})


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str) + "\n"


__all__ = [
    "EXPORT_FILENAME",
    "EXPORT_MEDIA_TYPE",
    "ErasureReport",
    "export_lines",
    "idempotency_owner",
    "idempotency_prefix",
]
