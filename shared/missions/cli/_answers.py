"""Answering the question a mission asks, in the terminal: the next --answer, else a prompt."""

from __future__ import annotations

import sys

import typer

from missions.core import approvals
from missions.core.mission.envelope import InterruptKind, InterruptResponse

from ._console import fail


def ask(kind_name: str, question: str, options: list[str], answers: list[str], quiet: bool) -> InterruptResponse:
    """The answer to one question: the first of `answers` (consumed), else asked at the terminal."""
    try:
        kind = InterruptKind(kind_name)
    except ValueError:  # a kind this CLI does not know: its answer is text
        kind = InterruptKind.CLARIFICATION
    if answers:
        text = answers.pop(0)
    elif not sys.stdin.isatty() and quiet:
        fail(f"the mission asks: {question!r}; pass --answer to answer it non-interactively")
    else:
        shown = f" [{'/'.join(options)}]" if options else ""
        hint = " [y/n]" if kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW) else shown
        try:
            text = typer.prompt(f"? {question}{hint}", err=True)
        except (typer.Abort, EOFError):
            fail(f"the mission asks: {question!r}; no answer was given (use --answer)")
    return response(kind, text, options)


def response(kind: InterruptKind, text: str, options: list[str]) -> InterruptResponse:
    """What a typed answer means for the question's kind, read by the core's one parser of answers: a
    confirmation not clearly approved is refused; a review not approved is sent back to be revised with
    the text; a choice the parser cannot place among the options is sent as typed (the mission says)."""
    text = text.strip()
    if kind is InterruptKind.CONFIRMATION:
        return InterruptResponse(approved=approvals.verdict(text) is True, text=text)
    if kind is InterruptKind.AGENT_REVIEW:
        if approvals.verdict(text) is True:
            return InterruptResponse(approved=True)
        return InterruptResponse(approved=False, decision="revise", text=text)
    if kind is InterruptKind.CHOICE:
        return InterruptResponse(decision=approvals.choice(text, options) or text)
    return InterruptResponse(text=text)
