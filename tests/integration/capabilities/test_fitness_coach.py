"""fitness_coach end to end on the emulation: the capability exactly as installed (capability.toml + stage
functions, answered by the generic offline model from its canned values), compiled, run by moto's Step
Functions and the real stage and interrupt handlers.

It proves the extensibility claim from the outside: workout and nutrition run as branches of one
Parallel state, the mission waits for the user's acceptance, an adjustment replans, and what the user
said (goal, stored profile, preferences, adjustments) reaches the model that plans.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from missions.adapters.llm.scripted import ScriptedProvider
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMRequest, LLMResult
from missions.core.mission.envelope import Envelope, InterruptKind
from missions.local.emulation import LocalCloud
from missions.ports.interrupts import InterruptRecord
from missions.service.checkpoints import stage_history

CAPABILITY = "fitness_coach"
PARALLEL = "parallel.workout+nutrition"
WAIT = 30.0  # seconds; a round of planning here takes well under 2
MEAT_OR_FISH = re.compile(r"Chicken|beef|Salmon|Tuna", re.I)


class Recording:
    """The offline model, keeping every request it was sent (to see what reached the planner)."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []
        self._model = ScriptedProvider(registry.load(CAPABILITY).offline_policy)

    def complete(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        return self._model.complete(request)

    def prompts(self, mission_id: str, stage: str) -> list[str]:
        return [
            r.messages[-1]["content"] for r in self.requests if r.stage == stage and r.envelope.mission_id == mission_id
        ]


@pytest.fixture(scope="module")
def recorded() -> Iterator[tuple[LocalCloud, Recording]]:
    """One emulation for the module (moto is process-wide), answered by the recorded offline model."""
    model = Recording()
    with LocalCloud([CAPABILITY], llm=model) as local:
        yield local, model


@pytest.fixture()
def cloud(recorded: tuple[LocalCloud, Recording]) -> LocalCloud:
    return recorded[0]


def _asked(cloud: LocalCloud, mission_id: str) -> InterruptRecord:
    """The question the mission waits on (failing with the mission's errors if it never asks)."""
    status = cloud.wait(mission_id, timeout=WAIT, until_interrupt=True)
    if status != "INTERRUPTED":
        envelope = cloud.outcome(mission_id).envelope
        pytest.fail(f"the mission never asked: {status}, {envelope and (envelope.terminal_reason, envelope.errors)}")
    [record] = cloud.runtime.interrupts.pending(mission_id)
    return record


def _finished(cloud: LocalCloud, mission_id: str) -> Envelope:
    assert cloud.wait(mission_id, timeout=WAIT) == "SUCCEEDED"
    envelope = cloud.outcome(mission_id).envelope
    assert envelope is not None
    return envelope


def _details(event: dict[str, Any]) -> dict[str, Any]:
    """A history event's own details (`stateEnteredEventDetails`, ...), whatever its type."""
    return next(value for value in event.values() if isinstance(value, dict))


def _training_days(week: list[dict[str, Any]]) -> list[str]:
    return [day["day"] for day in week if not day["workout"].startswith("Rest")]


def _menu(week: list[dict[str, Any]]) -> str:
    return " ".join(meal for day in week for meal in day["meals"].values())


def test_the_plan_is_made_in_parallel_presented_and_completed_on_acceptance(cloud: LocalCloud) -> None:
    # Given a beginner training 3 days a week at home, vegetarian
    goal = "I'm a beginner, 3 days a week at home with no equipment, and I'm vegetarian: help me get stronger."
    mission_id = cloud.start(CAPABILITY, goal)

    # When the plan is ready, the mission asks the user to accept or adjust it, and waits
    record = _asked(cloud, mission_id)
    assert (record.kind, record.stage, record.options) == (InterruptKind.AGENT_REVIEW, "present", ["accept", "adjust"])
    assert "Accept this plan" in record.question and "beginner, 3 days" in record.question
    assert cloud.runtime.missions.get(mission_id).status == "interrupted"
    assert cloud.status(mission_id) == "RUNNING"

    # Then the plan it shows follows the goal: Mon/Wed/Fri bodyweight sessions at beginner volume, no meat
    week = record.data["week"]
    assert [day["day"] for day in week] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert _training_days(week) == ["Mon", "Wed", "Fri"]
    assert "Push-up 2x10" in week[0]["workout"]
    assert not MEAT_OR_FISH.search(_menu(week))

    # When the user accepts
    cloud.answer(mission_id, record.interrupt_id, {"approved": True})

    # Then the mission completes with the weekly plan as its answer
    envelope = _finished(cloud, mission_id)
    assert envelope.terminal_reason == "completed" and not envelope.errors
    output = envelope.output("complete")
    assert output["accepted"] is True and output["plan"]["week"] == week
    assert output["answer"].startswith("Your week (beginner, 3 days") and "Wed: Full body B" in output["answer"]
    mission = cloud.runtime.missions.get(mission_id)
    assert (mission.status, mission.pending_interrupt) == ("completed", None)
    assert mission.result is not None and mission.result["answer"] == output["answer"]
    assert cloud.runtime.interrupts.get(mission_id, record.interrupt_id).status == "answered"

    # And workout and nutrition ran as the two branches of one Parallel state, never as sequential Tasks
    states = list(cloud.iter_states(mission_id))
    assert states.count(PARALLEL) == 1 and "workout" not in states and "nutrition" not in states
    after = states[states.index(PARALLEL) + 1 :]
    assert sorted(after[:2]) == ["nutrition.branch", "workout.branch"] and "synthesize" in after[2:4]
    history = cloud.history(mission_id)
    types = [event["type"] for event in history]
    assert types.count("ParallelStateEntered") == 1 and types.count("ParallelStateSucceeded") == 1
    inside = history[types.index("ParallelStateStarted") : types.index("ParallelStateSucceeded")]
    branches = [_details(e)["name"] for e in inside if e["type"] == "TaskStateEntered"]
    assert sorted(branches) == ["nutrition.branch", "workout.branch"]
    ran = [state for state in states if state in ("assess", "synthesize", "present", "complete", "await.agent_review")]
    assert ran == ["assess", "synthesize", "present", "await.agent_review", "present", "complete"]
    assert sorted(h.stage for h in stage_history(cloud.runtime.checkpoints, mission_id)) == sorted(
        ["assess", "workout", "nutrition", "synthesize", "present", "present", "complete"]
    )
    assert envelope.counters.llm_calls == 3  # assess, workout, nutrition


def test_an_adjustment_replans_with_what_the_user_said(recorded: tuple[LocalCloud, Recording]) -> None:
    cloud, model = recorded
    # Given a first plan, shown for acceptance
    mission_id = cloud.start(CAPABILITY, "Advanced lifter, full gym, 5 days a week, 60 minutes: build muscle.")
    first = _asked(cloud, mission_id)

    # When the user asks for fewer days and a vegan diet
    adjustment = "Only 3 days a week please, and I'm vegan now."
    cloud.answer(mission_id, first.interrupt_id, {"approved": False, "decision": "adjust", "text": adjustment})

    # Then the mission replans from the assessment, which is told the adjustment, and asks again
    second = _asked(cloud, mission_id)
    assert second.interrupt_id != first.interrupt_id
    [before, after] = model.prompts(mission_id, "assess")
    assert "Advanced lifter, full gym" in before and adjustment not in before
    assert adjustment in after
    assert len(model.prompts(mission_id, "workout")) == len(model.prompts(mission_id, "nutrition")) == 2

    # When the user accepts (by naming the option)
    cloud.answer(mission_id, second.interrupt_id, {"decision": "accept"})

    # Then it completes with the second plan, after two rounds of planning (each with its Parallel state)
    envelope = _finished(cloud, mission_id)
    assert envelope.terminal_reason == "completed"
    assert envelope.output("complete")["accepted"] is True
    assert envelope.output("complete")["plan"]["week"] == second.data["week"]
    assert [answer["response"].get("text") for answer in envelope.answers] == [adjustment, None]
    assert envelope.edge_counts.get("present->assess") == 1
    assert list(cloud.iter_states(mission_id)).count(PARALLEL) == 2
    assert envelope.counters.llm_calls == 6


def test_the_stored_profile_and_preferences_reach_the_planner(recorded: tuple[LocalCloud, Recording]) -> None:
    cloud, model = recorded
    # Given a stored profile (intermediate, 4 days, dumbbells) and preferences (pescatarian, a nut allergy)
    context = {
        "fitness_level": "intermediate",
        "days_per_week": 4,
        "equipment": ["dumbbells"],
        "preferences": {"dietary_restrictions": ["pescatarian"], "allergies": ["peanuts"]},
    }
    # When a goal says nothing about any of it
    mission_id = cloud.start(CAPABILITY, "Plan my training and meals for this week.", context=context)
    record = _asked(cloud, mission_id)
    # Then the assessment is made from them, and the planners work from the assessment
    [prompt] = model.prompts(mission_id, "assess")
    assert '"days_per_week": 4' in prompt and "pescatarian" in prompt and "peanuts" in prompt
    assert "Assessment: {" in model.prompts(mission_id, "workout")[0]
    cloud.answer(mission_id, record.interrupt_id, {"approved": True})
    assert _finished(cloud, mission_id).output("complete")["accepted"] is True


def test_adjusting_past_the_edge_limit_ends_the_mission_with_the_last_plan(cloud: LocalCloud) -> None:
    # Given a user who never accepts
    mission_id = cloud.start(CAPABILITY, "Help me run a 10k, 4 days a week.")
    for round_ in range(3):
        record = _asked(cloud, mission_id)
        cloud.answer(mission_id, record.interrupt_id, {"approved": False, "text": f"change {round_}"})

    # Then the third adjustment passes the present->assess edge limit (2): the mission ends, not loops
    envelope = _finished(cloud, mission_id)
    assert envelope.terminal_reason == "edge_limit:present->assess"
    output = envelope.output("complete")
    assert output["accepted"] is False and _training_days(output["plan"]["week"]) == ["Mon", "Wed", "Fri"]
    assert "Full body B" in output["answer"]
    assert cloud.runtime.missions.get(mission_id).status == "completed"
    assert not cloud.runtime.interrupts.pending(mission_id)
