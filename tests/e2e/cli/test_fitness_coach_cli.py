"""fitness_coach through the CLI as a user runs it: a real process, the embedded emulation, no key.

The CLI has no code for this capability: `missions run fitness_coach ...` works because the registry
found the folder, and `--answer` (or the terminal) answers the plan's review like any interrupt.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.e2e
GOAL = "I'm an advanced lifter with a full gym, 5 days a week: build muscle."


def missions(*args: str, stdin: str | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "missions.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_run_adjusts_then_accepts_the_plan_with_answer_flags() -> None:
    # When the user asks for a plan, answers the first review with a change and the second with yes
    result = missions(
        "run",
        "fitness_coach",
        GOAL,
        "--answer",
        "make it 3 days a week, I'm vegetarian now",
        "--answer",
        "yes",
        "--json",
    )
    # Then the mission replanned once and completed with the adjusted weekly plan as its answer
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "SUCCEEDED" and outcome["terminal_reason"] == "completed"
    round_ = ["assess", "workout", "nutrition", "synthesize", "present", "present"]  # present asks, then resumes
    assert outcome["stages"] == [*round_, *round_, "complete"]
    answer = outcome["answer"]
    # (the offline model answers with the canned values of capability.toml)
    assert answer.startswith("Your week (beginner, 3 days x 45 min, strength, vegetarian): 3 sessions")
    assert "Mon: Full body A: Split squat 2x10" in answer and "Tue: Rest" in answer
    assert "Chicken" not in answer and "beef" not in answer
    assert outcome["counters"]["llm_calls"] == 6


def test_the_review_is_asked_in_the_terminal_and_yes_completes_the_mission() -> None:
    # When the user answers the review on stdin
    result = missions("run", "fitness_coach", "Help me lose weight, 4 days a week at home", stdin="yes\n")
    # Then the question, the stages and the plan are shown, and the mission completed
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    for text in (
        "▶ assess",
        "▶ workout",
        "▶ nutrition",
        "▶ synthesize",
        "▶ present",
        "Accept this plan",
        "Full body A",
        "completed",
    ):
        assert text in shown, text


def test_it_is_listed_and_its_state_machine_has_the_parallel_state() -> None:
    listed = missions("capabilities", "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    [fitness] = [c for c in json.loads(listed.stdout) if c["name"] == "fitness_coach"]
    assert fitness["complexity"] == 2 and fitness["llm_stages"] == ["assess", "workout", "nutrition"]
    asl = missions("asl", "fitness_coach", timeout=60)
    assert asl.returncode == 0, asl.stderr
    assert json.loads(asl.stdout)["segment"]["States"]["parallel.workout+nutrition"]["Type"] == "Parallel"
