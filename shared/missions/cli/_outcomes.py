"""How `missions run` ends when the mission has not: it waits for an answer this run was not given, a
scripted answer names none of the options, or the wait ran out. Each is one line on stderr, or with
--json one JSON document on stdout, and an exit code of its own (listed in `missions run --help`)."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.markup import escape

from ._answers import AnswerRefused, Unanswered
from ._console import err

ENDED_OK, ENDED_OTHERWISE, BAD_INPUT, WAITING, REFUSED, TIMED_OUT = 0, 1, 2, 3, 4, 5


def waiting(
    mission_id: str,
    asked: Unanswered,
    answer_with: str,
    as_json: bool,
    open_questions: list[dict[str, Any]] | None = None,
) -> NoReturn:
    """The mission asks what this run cannot answer: the question, and how to answer it; `open_questions`:
    every question it waits on (several when parallel branches asked), each {interrupt_id, kind, text,
    options, stage}."""
    document: dict[str, Any] = {
        "outcome": "waiting",
        "mission_id": mission_id,
        "question": {"kind": asked.kind, "text": asked.question, "options": asked.options},
        "answer_with": answer_with,
    }
    if open_questions:
        document["questions"] = open_questions
    _end(document, f"mission {mission_id} asks: {asked.question!r}; answer with {answer_with}", WAITING, as_json)


def refused(mission_id: str, refusal: AnswerRefused, as_json: bool) -> NoReturn:
    """A scripted answer names none of the options: nothing was sent."""
    document = {
        "outcome": "answer_refused",
        "mission_id": mission_id,
        "question": refusal.question,
        "answer": refusal.answer,
        "options": refusal.options,
    }
    _end(document, f"mission {mission_id}: {refusal}; nothing was sent", REFUSED, as_json)


def timed_out(mission_id: str, timeout: float, follow_with: str, as_json: bool) -> NoReturn:
    document = {
        "outcome": "timed_out",
        "mission_id": mission_id,
        "timeout_seconds": timeout,
        "follow_with": follow_with,
    }
    message = f"mission {mission_id} did not finish within {timeout:.0f}s; {follow_with}"
    _end(document, message, TIMED_OUT, as_json)


def _end(document: dict[str, Any], message: str, code: int, as_json: bool) -> NoReturn:
    if as_json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        err.print(f"[bold yellow]{escape(message)}[/]", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
