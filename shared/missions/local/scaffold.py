"""`missions new capability NAME`: a new mission type that runs (and passes the conformance suite) as made.

Two stages, `plan` (the model, typed) and `answer` (plain code, also the failure path's final stage),
with canned offline answers, so the capability runs without an API key before its author writes a line.
"""

from __future__ import annotations

import re
from pathlib import Path

from missions.core.capability.config import CONFIG_FILE
from missions.core.pipeline.config import NAME_PATTERN

CONFIG = '''# {name}: plan -> answer. Add stages to [pipeline] and one function per stage to __init__.py.
name = "{name}"
description = "Plans how to reach the user's goal and answers with the steps."
complexity = 1
keywords = ["{words}"]
example_goal = "Help me get started with {words}."

[prompts]
plan = """You plan how to reach the user's goal. Give the steps, in order, each one line."""

[offline.plan]  # what the offline model answers (no API key); unlisted fields follow the schema
steps = ["Understand the goal: {{goal}}", "Do the work", "Report back"]

[bounds]
max_llm_calls = 4
max_agent_hops = 8

[pipeline]
agents = [
  {{ name = "plan", has_llm = true, phase = "planning", default_next = "answer", description = "the steps" }},
  {{ name = "answer", description = "the steps as the mission's answer (also on the failure path)" }},
]
'''

STAGES = '''"""{name}: a mission type (capability.toml holds its pipeline, prompts, bounds and offline answers)."""

from __future__ import annotations

from pydantic import BaseModel

from missions.core.capability.registry import Ctx, stage


class Plan(BaseModel):
    steps: list[str]


class Answer(BaseModel):
    answer: str


@stage
def plan(ctx: Ctx) -> Plan:
    return ctx.think(Plan)


@stage
def answer(plan: Plan | None) -> Answer:
    """Also the failure path's final stage: then there may be no plan."""
    if plan is None:
        return Answer(answer="No plan was made.")
    return Answer(answer="\\n".join(f"{{n}}. {{step}}" for n, step in enumerate(plan.steps, 1)))
'''


class ScaffoldError(ValueError):
    """The capability cannot be made here; the message says why."""


def new_capability(name: str, package_dir: Path) -> list[Path]:
    """Write `<package_dir>/<name>/` (capability.toml and __init__.py); the files written."""
    if not re.fullmatch(NAME_PATTERN, name):
        raise ScaffoldError(f"'{name}' is not a capability name: lowercase letters, digits and _, a letter first")
    if not package_dir.is_dir():
        raise ScaffoldError(f"{package_dir} is not a directory")
    folder = package_dir / name
    if folder.exists():
        raise ScaffoldError(f"{folder} exists already")
    folder.mkdir()
    files = {
        CONFIG_FILE: CONFIG.format(name=name, words=name.replace("_", " ")),
        "__init__.py": STAGES.format(name=name),
    }
    for file, text in files.items():
        (folder / file).write_text(text, encoding="utf-8")
    return [folder / file for file in files]
