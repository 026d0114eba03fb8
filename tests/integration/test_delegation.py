"""Delegation on the emulation: a stage hands part of its work to another capability's mission (a
sub-mission started through the launcher), waits at no compute cost, and resumes with its typed result
or its failure and reason; cycles and depths over the bound are refused; cancelling a parent cancels
its children; a child that asks its user a question is answered like any mission."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from missions.core.capability.registry import Ctx, stage
from missions.core.errors import ConflictError, DelegationFailed, NotFound
from missions.core.mission.envelope import InterruptKind, InterruptResponse
from missions.core.mission.requests import MissionRequest
from missions.local.emulation import LocalCloud
from missions.service.checkpoints import state_at
from tests.integration.conftest import chain, make_capability, with_capabilities
from tests.integration.test_lifecycle_cancel_fork import Gate

WAIT = 30.0
GATE = Gate()


class Found(BaseModel):
    text: str


class Answer(BaseModel):
    answer: str


@stage
def look(ctx: Ctx) -> Found:
    if ctx.context.get("hold"):
        GATE.hold()
    if ctx.context.get("ask"):
        reply = ctx.ask(InterruptKind.CLARIFICATION, "which one?")
        return Found(text=f"{ctx.goal} ({reply.text})")
    if ctx.context.get("fail"):
        raise RuntimeError("the source is down")
    return Found(text=f"found for '{ctx.goal}' with {dict(ctx.context)}")


@stage
def report(look: Found | None) -> Answer:  # None on the failure path: the final stage runs after a failure too
    return Answer(answer=look.text if look is not None else "nothing found")


@stage
def plan(ctx: Ctx) -> Answer:
    """Delegates to the capability its context names (t_child unless told), and says what came back."""
    capability = str(ctx.context.get("to", "t_child"))
    try:
        found = ctx.delegate(capability, f"dinners in {ctx.goal}", Answer, context=dict(ctx.context.get("child", {})))
    except DelegationFailed as failed:
        return Answer(answer=f"without {failed.capability}: {failed.status}: {failed.reason}")
    return Answer(answer=f"planned with {found.answer}")


@stage
def finish(plan: Answer) -> Answer:
    return plan


CHILD = make_capability("t_child", chain("look", "check", "report"), look, report)  # a pause waits before `check`
PARENT = make_capability(
    "t_parent",
    chain("plan", "finish"),
    plan,
    finish,
    delegates_to=["t_child", "t_parent", "t_middle"],
    bounds={"max_cost_usd": 0.5},
)
MIDDLE = make_capability(
    "t_middle", chain("plan", "finish"), plan, finish, delegates_to=["t_child", "t_middle", "t_deep"]
)
DEEP = make_capability("t_deep", chain("plan", "finish"), plan, finish, delegates_to=["t_child"])


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    names, known = with_capabilities(CHILD, PARENT, MIDDLE, DEEP)
    with LocalCloud(names, registry=known, settings={"max_delegation_depth": 2}) as local:
        yield local


def start(cloud: LocalCloud, capability: str, goal: str, user: str, **context: object) -> str:
    request = MissionRequest.parse(capability=capability, goal=goal, user_id=user, context=context)
    return cloud.runtime.launcher.submit(request).mission_id


def ended(cloud: LocalCloud, mission_id: str, statuses: tuple[str, ...] = ("completed", "failed", "cancelled")):
    """The mission once it reached one of `statuses`. A sub-mission is linked to its parent a moment before the
    launcher records it, so a child read from its parent's `children` may not exist yet: that is "not yet"."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            record = cloud.runtime.missions.get(mission_id)
        except NotFound:
            record = None
        if record is not None and record.status in statuses:
            return record
        time.sleep(0.05)
    raise TimeoutError(f"{mission_id} is still {cloud.runtime.missions.get(mission_id).status}")


def event_types(cloud: LocalCloud, mission_id: str) -> list[str]:
    return [event.type.value for event in cloud.events(mission_id)[0]]


def test_a_stage_gets_its_sub_missions_typed_result_and_both_are_linked(cloud: LocalCloud):
    # Given a parent whose first stage delegates to t_child with a context of its own
    parent_id = start(cloud, "t_parent", "Lyon", "ada", child={"budget": 40})
    # When both run
    parent = ended(cloud, parent_id)
    # Then the parent completed with what the child found, the child being a mission of the same user
    assert parent.status == "completed", parent.terminal_reason
    (child_id,) = parent.children
    child = cloud.runtime.missions.get(child_id)
    assert parent.result["answer"] == "planned with found for 'dinners in Lyon' with {'budget': 40}"
    assert (child.user_id, child.capability, child.trigger, child.status) == (
        "ada",
        "t_child",
        "delegation",
        "completed",
    )
    assert child.parent["mission_id"] == parent_id and child.lineage == ["t_parent"]
    # and the child may spend what its parent had left (0.5 of t_parent's bound), not t_child's own 1.0
    first = cloud.runtime.checkpoints.list(child_id)[0]
    assert state_at(cloud.runtime.checkpoints, child_id, first.checkpoint_id)["bounds"]["max_cost_usd"] == 0.5
    # and the parent's timeline says when it delegated and how the child ended
    types = event_types(cloud, parent_id)
    assert types.index("delegation.started") < types.index("delegation.ended") < types.index("orchestrator.completed")
    # and its question was never one for its user: it is not shown, and cannot be answered
    interrupt_id = child.parent["interrupt_id"]
    with pytest.raises(ConflictError, match="waits for a sub-mission"):
        cloud.runtime.interrupt_service.answer(parent_id, interrupt_id, InterruptResponse(text="me"))


def test_a_failed_sub_mission_resumes_its_parent_with_the_reason(cloud: LocalCloud):
    parent = ended(cloud, start(cloud, "t_parent", "Oslo", "bo", child={"fail": True}))
    assert parent.status == "completed"
    assert parent.result["answer"].startswith("without t_child: failed: ")
    assert "the source is down" in parent.result["answer"]


def test_a_cycle_and_a_depth_over_the_bound_are_refused_with_the_reason(cloud: LocalCloud):
    # a parent delegating to its own capability: a cycle, refused before any child starts
    looped = ended(cloud, start(cloud, "t_parent", "Rome", "cy", to="t_parent"))
    assert looped.result["answer"] == "without t_parent: refused: a delegation cycle: t_parent -> t_parent"
    assert looped.children == []
    # t_parent -> t_middle -> t_middle is a cycle too; depth: the bound here is 2 levels
    chained = ended(cloud, start(cloud, "t_parent", "Nice", "cy", to="t_middle", child={"to": "t_middle"}))
    (middle_id,) = chained.children
    middle = cloud.runtime.missions.get(middle_id)
    assert middle.result["answer"] == "without t_middle: refused: a delegation cycle: t_parent -> t_middle -> t_middle"
    assert chained.result["answer"] == f"planned with {middle.result['answer']}"
    # t_parent -> t_middle -> t_deep is 2 levels (allowed); t_deep's own delegation would be a 3rd
    deep = ended(cloud, start(cloud, "t_parent", "Bern", "cy", to="t_middle", child={"to": "t_deep"}))
    middle = cloud.runtime.missions.get(deep.children[0])
    leaf = cloud.runtime.missions.get(middle.children[0])
    assert leaf.lineage == ["t_parent", "t_middle"] and leaf.children == []
    assert leaf.result["answer"] == (
        "without t_child: refused: too deep: t_parent -> t_middle -> t_deep -> t_child is over the 2 levels of "
        "sub-missions allowed"
    )


def test_a_sub_mission_that_asks_its_user_is_answered_and_cancelling_the_parent_cancels_it(cloud: LocalCloud):
    # Given a child that asks its user a question
    parent_id = start(cloud, "t_parent", "Kyiv", "di", child={"ask": True})
    deadline = time.monotonic() + WAIT
    while not cloud.runtime.missions.get(parent_id).children and time.monotonic() < deadline:
        time.sleep(0.05)
    (child_id,) = cloud.runtime.missions.get(parent_id).children
    ended(cloud, child_id, ("interrupted",))
    # the parent waits without a question of its own for its user
    parent = cloud.runtime.missions.get(parent_id)
    assert parent.status == "interrupted" and parent.pending_interrupt is not None
    child = cloud.runtime.missions.get(child_id)
    # When the user answers the child, the parent resumes with what the child made of it
    cloud.runtime.interrupt_service.answer(child_id, child.pending_interrupt, InterruptResponse(text="the blue one"))
    assert ended(cloud, parent_id).result["answer"] == "planned with dinners in Kyiv (the blue one)"
    # Given another such pair, when the parent is cancelled, then its child is cancelled too
    parent_id = start(cloud, "t_parent", "Riga", "di", child={"ask": True})
    while not cloud.runtime.missions.get(parent_id).children and time.monotonic() < deadline + WAIT:
        time.sleep(0.05)
    (child_id,) = cloud.runtime.missions.get(parent_id).children
    ended(cloud, child_id, ("interrupted",))
    cloud.runtime.control.cancel(cloud.runtime.missions.get(parent_id))
    child = ended(cloud, child_id)
    assert (child.status, child.terminal_reason) == ("cancelled", "parent_cancelled: cancelled")
    assert ended(cloud, parent_id).status == "cancelled"


def test_pausing_a_parent_that_waits_pauses_its_running_child_and_resuming_resumes_it(cloud: LocalCloud):
    # Given a parent waiting on a child whose stage is in flight
    GATE.close()
    parent_id = start(cloud, "t_parent", "Gent", "ed", child={"hold": True})
    GATE.until_entered(1)
    (child_id,) = cloud.runtime.missions.get(parent_id).children
    # When the user pauses the parent, then the child's stage ends
    cloud.runtime.control.pause(cloud.runtime.missions.get(parent_id))
    assert cloud.runtime.missions.get(child_id).status == "pausing"
    GATE.open()
    # Then the child is paused, and the parent still waits for it
    assert ended(cloud, child_id, ("paused",)).status == "paused"
    assert cloud.runtime.missions.get(parent_id).status == "interrupted"
    # When the user resumes the parent, the child goes on and the parent completes with its result
    assert cloud.runtime.control.resume(cloud.runtime.missions.get(parent_id)) is True
    assert ended(cloud, parent_id).result["answer"].startswith("planned with found for 'dinners in Gent'")


def test_a_missions_metered_usage_counts_its_sub_missions_and_still_refuses_a_stranger(cloud: LocalCloud):
    from missions.local.metering import Meter

    # Given a parent that delegates to a child, under a meter
    with Meter(cloud) as meter:
        parent_id = start(cloud, "t_parent", "Nice", "grace")
        parent = ended(cloud, parent_id)
        (child_id,) = parent.children
        ended(cloud, child_id)
        # both executions end a moment after their records do (the last segment hands back)
        assert {cloud.wait(mission) for mission in (parent_id, child_id)} == {"SUCCEEDED"}

        # When its usage is asked
        usage = meter.usage_for(parent_id)

        # Then its state transitions are both machines' (the child's is a mission of its own)
        entered = [
            event
            for mission in (parent_id, child_id)
            for event in cloud.history(mission, segments=False)
            if event["type"].endswith("StateEntered")
        ]
        assert usage.state_transitions == len(entered) > 0
        assert all(cloud.history(mission, segments=False) for mission in (parent_id, child_id))

        # When a mission that is not below it runs under the same meter
        stranger = start(cloud, "t_child", "Arles", "grace")
        ended(cloud, stranger)

        # Then the meter refuses to blame the parent for it
        with pytest.raises(ValueError, match="one mission at a time"):
            meter.usage_for(parent_id)
