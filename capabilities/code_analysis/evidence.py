"""The evidence chain: a claim may cite only lines that a tool really returned.

And the evidence as the synthesizer's model sees it: a digest of what the tools found, every
line prefixed by its file:line, in sections an offline model can read back (it answers from
what a real model is shown, nothing more).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from capabilities.code_analysis.history import change_line
from capabilities.code_analysis.models import ToolRun
from missions.core.capability.registry import EvidenceChainViolation
from missions.core.mission.envelope import Citation

CITATION = re.compile(r"^\[?(?P<file>[^\s\[\]:]+):(?P<line>\d+)\]?$")
EVIDENCE_CHARS = 12_000  # of evidence lines the model is shown (whole lines)
# what a section of the digest holds: definitions; grep matches; lines read; call sites of a name (each
# with the function making the call); references (calls, imports, mentions); the calls inside a function;
# a call path's hops; a file's imports or dependents; the commit that last changed a line (history)
KINDS = ("definitions", "matches", "code_read", "calls", "references", "callees", "path", "imports", "changes")
LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<text>.*)$", re.DOTALL)
DEFINITION = re.compile(r"^(?P<kind>\w+) (?P<qualname>[\w.]+): (?P<signature>.*)$", re.DOTALL)
DOC = "  # "  # between a definition's signature and its docstring's first line, as a comment would be
DEFINED = " (defined at "  # after a callee defined in the repository: where


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
    functions = data.get("functions", [])
    source = [data["source"]] if isinstance(data.get("source"), dict) else []
    found = [
        ("definitions", [_definition(symbol) for symbol in [*data.get("symbols", []), *functions, *source]]),
        ("matches", [f"{m['file']}:{m['line']}: {m['text'].strip()}" for m in data.get("matches", [])]),
        ("code_read", [f"{data['file']}:{line['line']}: {line['text']}" for line in data.get("lines", [])]),
        ("calls", [_call(c) for c in data.get("callers", [])]),
        ("references", [_reference(r) for r in data.get("references", [])]),
        ("callees", [_call(c) for f in functions for c in f.get("calls", [])]),
        ("path", [_call(c) for c in data.get("path", [])]),
        ("imports", [_import(i) for i in [*data.get("imports", []), *data.get("dependents", [])]]),
        ("changes", [change_line(c) for c in data.get("changes", [])]),
    ]
    return [(kind, lines) for kind, lines in found if lines]


def _call(call: dict[str, Any]) -> str:
    """`file:line: text  # name in caller`: the call, what it calls, and the function making it."""
    where = call.get("caller") or "module level"
    defined = f"{DEFINED}{call['defined_at'][0]})" if call.get("defined_at") else ""
    return f"{call['file']}:{call['line']}: {call['text'].strip()}{DOC}{call['calls']} in {where}{defined}"


def _reference(ref: dict[str, Any]) -> str:
    if ref["kind"] == "call":
        return f"{_call(ref)} (call)"
    return f"{ref['file']}:{ref['line']}: {ref['text'].strip()}{DOC}{ref['kind']}"


def _import(item: dict[str, Any]) -> str:
    resolved = f" -> {item['resolved']}" if item.get("resolved") else ""
    return f"{item['file']}:{item['line']}: import {item['module']}{DOC}{', '.join(item.get('names', []))}{resolved}"


def read_call(text: str) -> tuple[str, str, str]:
    """A call line's text read back: (the code, the name called, the calling function or 'module level')."""
    code, _, about = text.rpartition(DOC)
    name, _, caller = about.removesuffix(" (call)").split(DEFINED)[0].partition(" in ")
    return code, name, caller


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


# -- does the evidence answer the question? -------------------------------------------------------


class Relevant(NamedTuple):
    """What a goal's evidence holds that answers its kind of question: the subjects' definitions
    (spans) and the lines that call them (or a path's hops, or a definition's callees)."""

    definitions: list[tuple[str, int, int]]
    calls: set[tuple[str, int]]

    def holds(self, ref: str) -> bool:
        file, line = parse(ref)
        return (file, line) in self.calls or any(f == file and a <= line <= b for f, a, b in self.definitions)


def relevant(kind: str, subjects: Sequence[str], runs: Sequence[ToolRun]) -> Relevant:
    names = {s.split(".")[-1] for s in subjects}
    target = subjects[-1].split(".")[-1] if kind == "path" and subjects else None

    def named(qualname: str) -> bool:
        return any(qualname.split(".")[-len(s.split(".")) :] == s.split(".") for s in subjects)

    definitions: list[tuple[str, int, int]] = []
    calls: set[tuple[str, int]] = set()
    for run in runs:
        data = (run.data or {}) if run.status == "success" else {}
        symbols = [*data.get("symbols", []), *data.get("functions", [])]
        symbols += [data["source"]] if isinstance(data.get("source"), dict) else []
        definitions += [(s["file"], s["line"], s.get("end_line") or s["line"]) for s in symbols if named(s["qualname"])]
        sites = [*data.get("callers", []), *[r for r in data.get("references", []) if r.get("kind") == "call"]]
        calls |= {
            (c["file"], c["line"])
            for c in sites
            if c.get("calls") in names and kind != "path" or c.get("calls") == target
        }
        if kind == "path":
            calls |= {(c["file"], c["line"]) for c in data.get("path", [])}
        if kind == "explain":
            calls |= {(c["file"], c["line"]) for f in data.get("functions", []) for c in f.get("calls", [])}
    return Relevant(definitions, calls)


def answers(kind: str, subjects: Sequence[str], cited: Sequence[str], runs: Sequence[ToolRun]) -> tuple[bool, str]:
    """Whether findings citing `cited` answer a question of this kind, and why not."""
    found = relevant(kind, subjects, runs)
    about = " / ".join(subjects) or "the goal"
    if kind == "callers":
        if not any((parse(ref)) in found.calls for ref in cited):
            return False, f"no finding cites a line that calls {about}"
    elif kind == "path":
        if not found.calls or not any(parse(ref) in found.calls for ref in cited):
            return False, f"no chain of calls from {subjects[0] if subjects else '?'} to {about} is cited"
    elif kind in ("definition", "explain"):
        if not any(found.holds(ref) and parse(ref) not in found.calls for ref in cited):
            return False, f"no finding cites the definition of {about}"
    elif not cited:
        return False, "no finding cites anything"
    return True, "the evidence is of the kind the question asks for"
