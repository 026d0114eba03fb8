"""When and why a line changed, read from the repository's history through a git MCP server.

Why this shape: the server (mcp-server-git) has no blame and no path filter on its log, so the traverser
walks the log newest first and shows each commit until every line it located has been attributed: a
line's change is the newest commit whose diff adds that line's text to its file. What the commit says of
itself (author, date, message) and what the line was before (the lines the same hunk removed) are the
answer; the line itself is cited from the code tools, as every finding is.

The texts parsed are the server's own formats (`git_log`: "Commit: <sha>" blocks; `git_show`: a header
like `git show`, then "--- a\n+++ b" and the hunks of each file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

LOG_COMMIT = re.compile(r"^Commit: ([0-9a-f]{40})$", re.MULTILINE)
SHOW_HEADER = re.compile(
    r"^commit (?P<sha>[0-9a-f]{40})\nAuthor: (?P<author>[^\n]*)\nDate: +(?P<date>[^\n]*)\n\n"
    r"(?P<body>(?:    [^\n]*\n|\n)*)"
)
MAX_COMMITS = 30  # asked of the log: how far back a question looks
MAX_SHOWS = 15  # commits shown at the most (one tool call each)


@dataclass
class FileDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    hunks: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (removed, added) per hunk


@dataclass(frozen=True)
class Commit:
    sha: str
    author: str
    date: str
    message: str
    files: dict[str, FileDiff]


def commits_in_log(text: str) -> list[str]:
    """The commit shas of a git_log answer, newest first."""
    return LOG_COMMIT.findall(text)


def parse_show(text: str) -> Commit | None:
    """A git_show answer: the commit's header and, per file, the lines its diff removed and added."""
    header = SHOW_HEADER.match(text)
    if header is None:
        return None
    message = "\n".join(line[4:] for line in header["body"].splitlines()).strip()
    files: dict[str, FileDiff] = {}
    current: FileDiff | None = None
    for line in text[header.end() :].splitlines():
        if line.startswith("+++ "):
            name = line[4:].strip()
            current = files.setdefault(name, FileDiff()) if name != "/dev/null" else None
        elif line.startswith("--- "):
            current = None
        elif current is not None and line.startswith("@@"):
            current.hunks.append(([], []))
        elif current is not None and current.hunks and line.startswith(("+", "-")):
            side = 1 if line.startswith("+") else 0
            current.hunks[-1][side].append(line[1:])
            (current.added if side else current.removed).append(line[1:])
    return Commit(header["sha"], header["author"].strip(), header["date"].strip(), message, files)


def _in(path: str, diffs: dict[str, FileDiff]) -> FileDiff | None:
    """The diff of a file the code tools name relative to the repository root (the diff's paths are
    relative to the git top, which may be above it)."""
    for name, diff in diffs.items():
        if name == path or name.endswith(f"/{path}"):
            return diff
    return None


def attribute(commit: Commit, pending: dict[tuple[str, int], str]) -> list[dict[str, Any]]:
    """The located lines (file, line) -> text this commit added, removed from `pending`, as changes."""
    changes = []
    for (path, number), text in list(pending.items()):
        diff = _in(path, commit.files)
        wanted = text.strip()
        if diff is None or not wanted:
            continue
        for removed, added in diff.hunks:
            if any(line.strip() == wanted for line in added):
                changes.append(
                    {
                        "file": path,
                        "line": number,
                        "text": wanted,
                        "commit": commit.sha,
                        "author": commit.author,
                        "date": commit.date,
                        "message": commit.message,
                        "before": [line.strip() for line in removed if line.strip()][:3],
                    }
                )
                del pending[(path, number)]
                break
    return changes


def change_line(change: dict[str, Any]) -> str:
    """A change as an evidence line: 'file:line: text  # changed in <sha> on <date> by <author>: <why>'."""
    subject = change["message"].splitlines()[0] if change["message"] else "(no message)"
    before = f"; before: {' / '.join(change['before'])}" if change["before"] else "; it was added then"
    return (
        f"{change['file']}:{change['line']}: {change['text']}  # changed in {change['commit'][:12]} on "
        f"{change['date']} by {change['author']}: {subject}{before}"
    )


CHANGE = re.compile(
    r"^(?P<text>.*)  # changed in (?P<commit>[0-9a-f]{12}) on (?P<date>.*?) by (?P<author>.*?): (?P<why>.*?)"
    r"(?:; before: (?P<before>.*)|; it was added then)$",
    re.DOTALL,
)
