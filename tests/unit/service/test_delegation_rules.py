"""The rules of delegation that hold without a cloud: a sub-mission's spend is its parent's spend, a stage
can only delegate to a capability its pipeline declares, and a sub-mission's end comes back as the model
the stage asked for, or as DelegationFailed with its reason."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from missions.core.capability.registry import stage
from missions.core.capability.stages import Ctx, delegated_output
from missions.core.errors import DelegationFailed, StageDefinitionError
from missions.core.mission.envelope import (
    Bounds,
    Counters,
    Envelope,
    Interrupt,
    InterruptKind,
    InterruptResponse,
    Resume,
)
from missions.core.pipeline.config import AgentConfig, PipelineConfig
from missions.service.runner._absorb import absorb_resume
from tests.support.driver import DirectDriver
from tests.support.stages import typed_capability


class Dinners(BaseModel):
    places: list[str]


def ended(status: str, **data: object) -> InterruptResponse:
    return InterruptResponse(data={"status": status, "capability": "dining", "child": "m_c", **data})


def test_the_sub_missions_spend_is_added_to_the_parents_when_it_resumes():
    # Given a parent that spent 0.04 and waits on a delegation
    asked = Interrupt(kind=InterruptKind.DELEGATION, stage="plan", question="dinners", data={"capability": "dining"})
    envelope = Envelope(capability="travel", raw_input="trip", interrupt=asked, counters=Counters(cost_usd=0.04))
    envelope.resume = Resume(interrupt_id=asked.id, response=ended("completed", output={"places": []}, cost_usd=0.0125))
    # When it resumes with the child's end
    response, _ = absorb_resume(envelope)
    # Then what the child spent counts against the parent's own bound
    assert envelope.counters.cost_usd == 0.0525
    assert response is not None and response.data["status"] == "completed"


def test_a_question_answered_adds_no_spend():
    asked = Interrupt(kind=InterruptKind.CLARIFICATION, stage="plan", question="when?")
    envelope = Envelope(capability="travel", raw_input="trip", interrupt=asked, counters=Counters(cost_usd=0.04))
    envelope.resume = Resume(interrupt_id=asked.id, response=InterruptResponse(text="May", data={"cost_usd": 9}))
    absorb_resume(envelope)
    assert envelope.counters.cost_usd == 0.04


def ctx(delegates_to: tuple[str, ...], asked: list[InterruptResponse] | None = None) -> Ctx:
    return Ctx(
        stage="plan",
        goal="trip",
        context={},
        answers=[],
        counters=Counters(),
        bounds=Bounds(),
        answer=None,
        think=lambda *a: None,  # type: ignore[arg-type,return-value]
        tools=None,
        fan_out=lambda items: None,
        save_artifact=lambda path, content: None,
        repository_root=lambda: "",
        asked=asked,
        delegates_to=delegates_to,
    )


def test_a_stage_delegates_only_to_what_its_pipeline_declares_and_gets_the_typed_result():
    with pytest.raises(StageDefinitionError, match="does not declare in delegates_to"):
        ctx(()).delegate("dining", "dinners", Dinners)
    assert ctx(("dining",), [ended("completed", output={"places": ["Chez A"]})]).delegate(
        "dining", "d", Dinners
    ) == Dinners(places=["Chez A"])


@pytest.mark.parametrize(
    ("end", "why"),
    [
        (ended("failed", reason="stage_failed:maps: timeout"), "the dining sub-mission m_c failed: stage_failed:maps"),
        (ended("cancelled", reason="cancelled"), "cancelled: cancelled"),
        (
            ended("refused", reason="a delegation cycle: travel -> travel", child=None),
            "sub-mission refused: a delegation",
        ),
        (ended("completed", output={"places": "none"}), "gave a result that does not fit"),
    ],
)
def test_a_sub_mission_that_gave_no_result_raises_with_its_reason(end, why):
    with pytest.raises(DelegationFailed, match=why):
        delegated_output("dining", end, Dinners)


def test_the_machine_waits_for_a_sub_mission_only_in_a_pipeline_that_delegates():
    plain = PipelineConfig(name="p", agents=[AgentConfig(name="a")])
    delegating = plain.model_copy(update={"delegates_to": ["dining"]})
    assert InterruptKind.DELEGATION not in plain.awaited()
    assert delegating.awaited() == list(InterruptKind)


# -- in memory: the test driver runs a sub-mission to its end, as the platform does ----------------


class Found(BaseModel):
    text: str


@stage
def look(ctx: Ctx) -> Found:
    reply = ctx.ask(InterruptKind.CLARIFICATION, "which area?")
    return Found(text=f"{ctx.goal} near {reply.text}")


@stage
def plan(ctx: Ctx) -> Found:
    return ctx.delegate("u_child", f"dinners in {ctx.goal}", Found, context={"party": 2})


CHILD = typed_capability("u_child", [AgentConfig(name="look")], look)
PARENT = typed_capability("u_parent", [AgentConfig(name="plan")], plan, pipeline={"delegates_to": ["u_child"]})


def test_the_driver_runs_a_sub_mission_and_the_stage_gets_its_result():
    driver = DirectDriver(PARENT)
    driver.registry = driver.registry.including(CHILD)
    ended = driver.run("Lyon", answer_with=lambda interrupt: {"text": "the old town"})
    assert ended.terminal_reason == "completed", ended.errors
    assert ended.outputs["plan"] == {"text": "dinners in Lyon near the old town"}
    (child,) = driver.children
    assert child.last_state is not None and child.last_state["context"]["party"] == 2


def test_a_deployment_runs_what_its_capabilities_delegate_to_and_leaves_out_what_it_cannot_have() -> None:
    from missions.core.capability import registry
    from tests.integration.test_delegation import CHILD, DEEP, MIDDLE, PARENT

    # Given capabilities that delegate in a chain (and to themselves), and one whose target this registry lacks
    known = registry.Registry(package="no_such_package", plugins=dict).including(CHILD, PARENT, MIDDLE, DEEP)
    # When a deployment names only the top one / Then it runs every one below it, each once, in the order met
    assert known.with_delegates(["t_parent"]) == ["t_parent", "t_child", "t_middle", "t_deep"]
    assert known.with_delegates(["t_deep", "t_child"]) == ["t_deep", "t_child"]
    # And a target the registry lacks is left out (a delegation to it is refused, with that reason, at run time)
    partial = registry.Registry(package="no_such_package", plugins=dict).including(PARENT, CHILD)
    assert partial.with_delegates(["t_parent"]) == ["t_parent", "t_child"]
    # And the shipped ones: travel brings dining
    assert registry.with_delegates(["travel"]) == ["travel", "dining"]
