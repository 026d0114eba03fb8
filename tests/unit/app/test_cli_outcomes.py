"""`missions run --json` keeps its promise when the mission has not ended: one JSON document on stdout
and an exit code of its own, for a question it cannot answer and for a wait that ran out."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
import typer

from missions.cli.commands.run import _follow
from missions.core.mission.envelope import InterruptKind


class StillRunning:
    """The emulation as `_follow` reads it, with a mission that runs on and, if told, asks a question."""

    def __init__(self, asks: bool = False) -> None:
        question = SimpleNamespace(
            interrupt_id="i1",
            kind=InterruptKind.CLARIFICATION,
            question="Which module?",
            options=[],
            status="pending",
            together=[],
            stage="plan",
        )
        mission = SimpleNamespace(
            mission_id="m", status="interrupted" if asks else "running", pending_interrupt="i1" if asks else None
        )
        self.runtime = SimpleNamespace(
            interrupts=SimpleNamespace(get=lambda _id, _interrupt: question),
            missions=SimpleNamespace(get=lambda _id: mission),
        )

    def events(self, mission_id: str, after: str | None = None) -> tuple[list[Any], str | None]:
        return [], after

    def status(self, mission_id: str) -> str:
        return "RUNNING"


def test_a_wait_that_runs_out_is_one_document_with_exit_code_5(capsys: pytest.CaptureFixture[str]):
    # When the mission is still running when --timeout runs out, with --json
    with pytest.raises(typer.Exit) as ended:
        _follow(StillRunning(), "m_1", [], timeout=0.01, quiet=True)  # type: ignore[arg-type]
    # Then stdout is one JSON document saying so, and the exit code is 5
    assert ended.value.exit_code == 5
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "outcome": "timed_out",
        "mission_id": "m_1",
        "timeout_seconds": 0.01,
        "follow_with": "run it again with a longer --timeout",
    }


def test_a_question_without_an_answer_is_one_document_with_exit_code_3(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(typer.Exit) as ended:
        _follow(StillRunning(asks=True), "m_2", [], timeout=5, quiet=True)  # type: ignore[arg-type]
    assert ended.value.exit_code == 3
    document = json.loads(capsys.readouterr().out)
    assert document["outcome"] == "waiting" and document["question"]["text"] == "Which module?"
    # and every question the mission waits on, with what answers it
    assert document["questions"] == [
        {"interrupt_id": "i1", "kind": "clarification", "text": "Which module?", "options": [], "stage": "plan"}
    ]


def test_without_json_the_outcome_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(typer.Exit) as ended:
        _follow(StillRunning(), "m_3", [], timeout=0.01, quiet=False)  # type: ignore[arg-type]
    captured = capsys.readouterr()
    assert ended.value.exit_code == 5 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "did not finish within" in captured.err


def test_a_scripted_answer_to_a_choice_must_name_one_of_its_options():
    from missions.cli._answers import AnswerRefused, ask

    # When a choice is answered by a script with what names none of its options
    with pytest.raises(AnswerRefused) as refused:
        ask("choice", "Which offer?", ["amazon", "bestbuy", "none"], ["the blue one"], quiet=True)
    # Then it is refused, naming the options; by number or name it is the option
    assert "amazon, bestbuy, none" in str(refused.value)
    assert ask("choice", "Which offer?", ["amazon", "bestbuy", "none"], ["2"], quiet=True).decision == "bestbuy"
    assert ask("choice", "Which offer?", ["amazon", "bestbuy", "none"], ["Amazon"], quiet=True).decision == "amazon"
