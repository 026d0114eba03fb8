"""The evidence chain: a claim may cite only lines that a tool really returned."""

from __future__ import annotations

import re
from collections.abc import Iterable

from missions.core.capability import EvidenceChainViolation
from missions.core.envelope import Citation

CITATION = re.compile(r"^\[?(?P<file>[^\s\[\]:]+):(?P<line>\d+)\]?$")


def parse(ref: str) -> tuple[str, int]:
    match = CITATION.match(ref.strip())
    if not match:
        raise EvidenceChainViolation(f"malformed citation '{ref}' (expected file:line)")
    return match["file"], int(match["line"])


def covered(ref: str, evidence: Iterable[Citation]) -> bool:
    file, line = parse(ref)
    return any(c.file == file and c.line <= line <= (c.end_line or c.line) for c in evidence)


def check(refs: Iterable[str], evidence: list[Citation], who: str) -> None:
    """Raise EvidenceChainViolation naming every citation no tool returned."""
    bad = [ref for ref in refs if not covered(ref, evidence)]
    if bad:
        raise EvidenceChainViolation(f"{who} cited {bad}, which no tool returned")
