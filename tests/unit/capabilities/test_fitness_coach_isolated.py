"""fitness_coach is the extensibility proof: a mission type added by one folder and nothing else.

These tests hold that claim: no source outside capabilities/fitness_coach/ names it (the core,
the handlers, the CDK app, the benchmarks and the other capabilities know nothing of it), and the
registry still finds it, validates it and compiles it, with workout and nutrition in parallel.
"""

from __future__ import annotations

import os
from pathlib import Path

from missions.core.capability import registry as registry
from missions.core.capability.offline import SchemaAnswers
from missions.core.memory.longterm import MemoryChange
from missions.core.mission.envelope import InterruptKind
from missions.core.pipeline.compiler import compile_pipeline
from missions.core.triggers.specs import memory_change_event, schedule_specs
from missions.service.triggers.rules import requests_for_event
from tests.support.stages import stage_functions

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "capabilities" / "fitness_coach"
SCANNED = (".py", ".toml", ".json")
SKIPPED_TOP = {"tests", "docs"}  # tests and docs may name the example; README.md is not scanned (.md)
GENERATED = {"node_modules", "cdk.out", "build", "dist", "__pycache__"}  # outputs (cdk.out lists every capability)


def _sources() -> list[Path]:
    """The repository's .py/.toml/.json sources outside the folder, tests/ and docs/ (no caches, no outputs)."""
    found = []
    for directory, subdirectories, files in os.walk(ROOT):
        here = Path(directory)
        subdirectories[:] = [
            name
            for name in subdirectories
            if not name.startswith(".")
            and name not in GENERATED
            and not name.endswith(".egg-info")
            and here / name != FOLDER
            and not (here == ROOT and name in SKIPPED_TOP)
        ]
        found += [here / name for name in files if name.endswith(SCANNED)]
    return found


def test_no_file_outside_its_folder_names_the_capability() -> None:
    # Given every source file of the repository but the capability's own folder, tests/ and docs/
    sources = _sources()
    assert ROOT / "shared" / "missions" / "core" / "capability" / "registry.py" in sources  # the scan reaches the core
    assert ROOT / "capabilities" / "code_analysis" / "__init__.py" in sources  # and the other capabilities
    assert not any(FOLDER in path.parents for path in sources)

    # When each is searched for the capability's name or its domain ("fitness" covers "fitness_coach")
    naming = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if "fitness" in line.lower()
    ]

    # Then none names it: adding fitness_coach touched nothing outside its folder
    assert naming == [], "\n".join(naming)


def test_the_registry_discovers_and_validates_it() -> None:
    # When the registry scans the capabilities package
    assert "fitness_coach" in registry.installed() and "fitness_coach" in registry.available()
    capability = registry.load("fitness_coach")

    # Then it comes from capability.toml + the package's stage functions (one per stage, found by name),
    # answered offline by the generic model from the toml's canned values (no hand-written fake)
    assert sorted(stage_functions(capability)) == sorted(capability.pipeline.stage_names())
    assert isinstance(capability.offline_policy, SchemaAnswers)
    assert capability.complexity == 2 and capability.example_goal
    assert set(capability.prompts) == {"assess", "workout", "nutrition"}
    assert capability.default_context["days_per_week"] == 3
    assert [t.id for t in capability.triggers.schedules] == ["weekly-checkin"]
    assert [t.id for t in capability.triggers.memory] == ["goal-changed"]
    pipeline = capability.pipeline
    assert pipeline.stage_names() == ["assess", "workout", "nutrition", "synthesize", "present", "complete"]
    assert pipeline.final == "complete" and pipeline.resume_stage(InterruptKind.AGENT_REVIEW) == "present"
    assert capability.describe()["name"] == "fitness_coach"


def test_workout_and_nutrition_compile_to_one_parallel_state() -> None:
    pipeline = registry.load("fitness_coach").pipeline
    assert pipeline.parallel_groups() == [["workout", "nutrition"]]
    states = compile_pipeline(pipeline)["States"]
    parallel = states["parallel.workout+nutrition"]
    assert parallel["Type"] == "Parallel"
    assert [branch["StartAt"] for branch in parallel["Branches"]] == ["workout.branch", "nutrition.branch"]
    assert states["assess.route"]["Choices"][-1]["Next"] == "parallel.workout+nutrition"
    assert parallel["Next"] == "parallel.workout+nutrition.count"
    assert states["parallel.workout+nutrition.count"]["Next"] == "synthesize"
    assert "workout" not in states and "nutrition" not in states


def test_its_triggers_need_no_core_code() -> None:
    capability = registry.load("fitness_coach")
    # A weekly schedule, deployed as an EventBridge Scheduler schedule
    [schedule] = schedule_specs([capability])
    assert (schedule.capability, schedule.expression) == ("fitness_coach", "cron(0 7 ? * MON *)")

    # A new goal in the user's fitness profile starts a mission with that goal
    def changed(old: object, new: object) -> list:
        change = MemoryChange(
            user_id="alice", namespace=["fitness_profile"], key="me", kind="updated", old=old, new=new
        )
        return requests_for_event(memory_change_event(change), [capability])

    [request] = changed({"goal": "get stronger"}, {"goal": "run a marathon"})
    assert (request.capability, request.user_id) == ("fitness_coach", "alice")
    assert request.goal == "My new fitness goal: run a marathon. Update my weekly workout and meal plan."
    # while a change that leaves the goal alone starts nothing
    assert changed({"goal": "run a marathon"}, {"goal": "run a marathon", "weight_kg": 70}) == []
