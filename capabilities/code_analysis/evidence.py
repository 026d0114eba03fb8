"""The evidence chain: a claim may cite only lines that a tool really returned.

And the evidence as the synthesizer's model sees it: a digest of what the tools found, every
line prefixed by its file:line, in sections an offline model can read back (it answers from
what a real model is shown, nothing more).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from capabilities.code_analysis.models import ToolRun
from missions.core.capability import EvidenceChainViolation
from missions.core.envelope import Citation

CITATION = re.compile(r"^\[?(?P<file>[^\s\[\]:]+):(?P<line>\d+)\]?$")
EVIDENCE_CHARS = 12_000  # of evidence lines the model is shown (whole lines)
KINDS = ("definitions", "matches", "code_read")  # what a section of the digest holds
LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<text>.*)$", re.DOTALL)
DEFINITION = re.compile(r"^(?P<kind>\w+) (?P<qualname>[\w.]+): (?P<signature>.*)$", re.DOTALL)
DOC = "  # "  # between a definition's signature and its docstring's first line, as a comment would be


def parse(ref: str) -> tuple[str, int]:
    match = CITATION.match(ref.strip())
    if not match:
        raise EvidenceChainViolation(f"malformed citation '{ref}' (expected file:line)")
    return match["file"], int(match["line"])


def covered(ref: str, evidence: Iterable[Citation]) -> bool:
    file, line = parse(ref)
    return any(c.file == file and c.line <= line <= (c.end_line or c.line) for c in evidence)


def check(refs: Iterable[str], evidence: Sequence[Citation], who: str) -> None:
    """Raise EvidenceChainViolation naming every citation no tool returned."""
    bad = [ref for ref in refs if not covered(ref, evidence)]
    if bad:
        raise EvidenceChainViolation(f"{who} cited {bad}, which no tool returned")


# -- the digest -----------------------------------------------------------------------------------


def digest(runs: Sequence[ToolRun], limit: int = EVIDENCE_CHARS) -> tuple[list[dict[str, Any]], bool]:
    """A section per tool call that found something (or failed), in the order they ran: its tool and
    params, and its `definitions`, `matches` or `code_read` lines ('file:line: text'), or why it
    `failed`. At most `limit` characters of lines; the bool says whether some were left out."""
    sections: list[dict[str, Any]] = []
    room = limit
    for run in runs:
        for kind, lines in _found(run):
            kept: list[str] = []
            for line in lines:
                room -= len(line) + 1
                if room < 0:
                    if kept:
                        sections.append({"tool": run.tool, "params": run.params, kind: kept})
                    return sections, True
                kept.append(line)
            sections.append({"tool": run.tool, "params": run.params, kind: kept[0] if kind == "failed" else kept})
    return sections, False


def _found(run: ToolRun) -> list[tuple[str, list[str]]]:
    if run.status != "success":
        return [("failed", [f"{run.status}: {run.error}"])]
    data = run.data or {}
    found = [
        ("definitions", [_definition(symbol) for symbol in data.get("symbols", [])]),
        ("matches", [f"{m['file']}:{m['line']}: {m['text'].strip()}" for m in data.get("matches", [])]),
        ("code_read", [f"{data['file']}:{line['line']}: {line['text']}" for line in data.get("lines", [])]),
    ]
    return [(kind, lines) for kind, lines in found if lines]


def _definition(symbol: dict[str, Any]) -> str:
    doc = f"{DOC}{symbol['docstring']}" if symbol.get("docstring") else ""
    return f"{symbol['file']}:{symbol['line']}: {symbol['kind']} {symbol['qualname']}: {symbol['signature']}{doc}"


class Line(NamedTuple):
    """One evidence line of a digest, read back."""

    kind: str  # definitions | matches | code_read
    file: str
    line: int
    text: str


def read_digest(sections: Iterable[dict[str, Any]]) -> Iterator[Line]:
    """The evidence lines of a digest, in order (failures carry none)."""
    for section in sections:
        for kind in KINDS:
            for entry in section.get(kind) or []:
                match = LINE.match(entry)
                if match:
                    yield Line(kind, match["file"], int(match["line"]), match["text"])


def read_definition(text: str) -> tuple[str, str, str, str | None]:
    """A definition line's text: (kind, qualname, signature, the docstring's first line or None)."""
    match = DEFINITION.match(text)
    if not match:
        return "definition", text, text, None
    signature, _, doc = match["signature"].partition(DOC)
    return match["kind"], match["qualname"], signature, doc or None
