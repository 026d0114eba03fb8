"""Which operations of an OpenAPI document a schemathesis run reached: answered at least one 2xx.

Read from the run's HAR report (every request it sent, with the response), each request matched to
the operation whose method and path template it fits (a literal segment wins over a parameter, so
`/missions/{mission_id}/events` is not `/missions/{mission_id}`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@dataclass(frozen=True)
class Operation:
    method: str
    path: str

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.path}"


@dataclass
class Coverage:
    """What a run sent and what came back, per operation of the document."""

    operations: list[Operation]
    statuses: dict[Operation, Counter[int]] = field(default_factory=dict)
    unmatched: int = 0  # requests no operation takes (a method the path does not have, say)

    def record(self, method: str, path: str, status: int) -> None:
        """One more response of the operation `method path` (a path template of the document)."""
        self.statuses.setdefault(Operation(method, path), Counter())[status] += 1

    @property
    def responses(self) -> int:
        return sum(sum(c.values()) for c in self.statuses.values()) + self.unmatched

    @property
    def server_errors(self) -> int:
        return sum(n for c in self.statuses.values() for status, n in c.items() if status >= 500)

    @property
    def reached(self) -> list[Operation]:
        return [op for op in self.operations if any(200 <= s < 300 for s in self.statuses.get(op, ()))]

    @property
    def unreached(self) -> list[Operation]:
        reached = set(self.reached)
        return [op for op in self.operations if op not in reached]

    def summary(self) -> str:
        lines = [
            f"operations reached (2xx): {len(self.reached)} of {len(self.operations)}; "
            f"{self.responses} responses, {self.server_errors} server errors"
        ]
        for op in self.unreached:
            seen = ", ".join(f"{s}x{n}" for s, n in sorted(self.statuses.get(op, Counter()).items())) or "never sent"
            lines.append(f"  not reached: {op} ({seen})")
        return "\n".join(lines)


def operations(document: dict[str, Any]) -> list[Operation]:
    return [
        Operation(method, path)
        for path, item in document.get("paths", {}).items()
        for method in METHODS
        if method in item
    ]


def _matcher(path: str) -> tuple[re.Pattern[str], int]:
    segments = path.strip("/").split("/")
    pattern = "/".join("[^/]+" if s.startswith("{") else re.escape(s) for s in segments)
    literal = sum(not s.startswith("{") for s in segments)
    return re.compile(f"/{pattern}/?"), literal


def coverage(document: dict[str, Any], har: dict[str, Any]) -> Coverage:
    ops = operations(document)
    matchers = [(op, *_matcher(op.path)) for op in ops]
    result = Coverage(ops)
    for entry in har.get("log", {}).get("entries", []):
        status = entry["response"]["status"]
        if not status:  # no response (a transport error): nothing reached
            continue
        method = entry["request"]["method"].lower()
        path = urlsplit(entry["request"]["url"]).path
        fits = [(literal, op) for op, pattern, literal in matchers if op.method == method and pattern.fullmatch(path)]
        if not fits:
            result.unmatched += 1
            continue
        op = max(fits, key=lambda f: f[0])[1]
        result.record(op.method, op.path, status)
    return result


def read(document: Path, har: Path) -> Coverage:
    return coverage(json.loads(document.read_text()), json.loads(har.read_text()))
