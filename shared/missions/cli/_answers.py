"""Answering the question a mission asks, in the terminal: the next --answer, else a prompt."""

from __future__ import annotations

import sys

import typer

from missions.core import approvals
from missions.core.mission.envelope import InterruptKind, InterruptResponse


class Unanswered(Exception):
    """The mission asks a question this run has no answer for (no --answer left, no terminal to ask at)."""

    def __init__(self, kind: str, question: str, options: list[str]) -> None:
        super().__init__(question)
        self.kind, self.question, self.options = kind, question, options


class AnswerRefused(Exception):
    """A scripted --answer is not one of the question's options: nothing is sent."""

    def __init__(self, question: str, options: list[str], answer: str) -> None:
        super().__init__(f"{answer!r} is not one of the options: {', '.join(options)}")
        self.question, self.options, self.answer = question, options, answer


def ask(kind_name: str, question: str, options: list[str], answers: list[str], quiet: bool) -> InterruptResponse:
    """The answer to one question: the first of `answers` (consumed), else asked at the terminal (again,
    while a choice names none of the options). Unanswered when there is neither; AnswerRefused when a
    scripted answer to a choice names none of its options."""
    try:
        kind = InterruptKind(kind_name)
    except ValueError:  # a kind this CLI does not know: its answer is text
        kind = InterruptKind.CLARIFICATION
    choosing = kind is InterruptKind.CHOICE and bool(options)
    if answers:
        text = answers.pop(0)
        if choosing and approvals.choice(text, options) is None:
            raise AnswerRefused(question, options, text)
        return response(kind, text, options)
    if quiet and not sys.stdin.isatty():
        raise Unanswered(kind.value, question, options)
    shown = f" [{'/'.join(options)}]" if options else ""
    hint = " [y/n]" if kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW) else shown
    while True:
        try:
            text = typer.prompt(f"? {question}{hint}", err=True)
        except (typer.Abort, EOFError):
            raise Unanswered(kind.value, question, options) from None
        if not choosing or approvals.choice(text, options) is not None:
            return response(kind, text, options)
        typer.echo(f"{text!r} is not one of the options: {', '.join(options)}", err=True)


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
