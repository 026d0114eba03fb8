"""Questions in parallel on the emulation: branches of a group (and items of a fan-out) each ask their user;
every question is its own interrupt, answered in any order and exactly once; the join runs once all are
answered, and nothing a branch did before asking runs again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.core.errors import ConflictError
from missions.core.mission.events import EventType
from missions.local.emulation import LocalCloud
from missions.service.interrupts import waiting_questions
from tests.integration.conftest import with_capabilities
from tests.support.asking import ITEMS, RAN, TRIP, TRIP_UNANSWERED


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    names, known = with_capabilities(TRIP, ITEMS, TRIP_UNANSWERED)
    with LocalCloud(names, registry=known) as local:
        yield local


def questions(cloud: LocalCloud, mission_id: str) -> list[tuple[str, str, str]]:
    record = cloud.runtime.missions.get(mission_id)
    return [(q.interrupt_id, q.stage, q.question) for q in waiting_questions(cloud.runtime.interrupts, record)]


def test_two_branches_ask_are_answered_in_reverse_order_and_the_group_joins(cloud: LocalCloud) -> None:
    RAN.clear()
    # Given a trip whose flights and hotel branches each ask, while its car branch just finishes
    mission_id = cloud.start(TRIP.name, "Lisbon in May")
    assert cloud.wait(mission_id, until_interrupt=True) == "INTERRUPTED"
    (seat_id, seat_stage, _), (area_id, area_stage, _) = asked = questions(cloud, mission_id)
    assert [stage for _, stage, _ in asked] == ["flights", "hotel"] and seat_id != area_id
    record = cloud.runtime.missions.get(mission_id)
    assert record.status == "interrupted" and record.pending_interrupts == [seat_id, area_id]

    # When the hotel's question (asked second) is answered first
    answered, resumed = cloud.runtime.interrupt_service.answer(mission_id, area_id, {"text": "Alfama"})
    # Then the answer is kept, the mission still waits, on the flights' question alone
    assert answered.interrupt_id == area_id and resumed is None
    assert [i for i, _, _ in questions(cloud, mission_id)] == [seat_id]
    assert cloud.status(mission_id) == "RUNNING"  # the execution waits on its task token
    # And a second answer to the same question is refused
    with pytest.raises(ConflictError):
        cloud.runtime.interrupt_service.answer(mission_id, area_id, {"text": "Baixa"})

    # When the flights' question is answered
    answered, resumed = cloud.runtime.interrupt_service.answer(mission_id, seat_id, {"decision": "window"})
    assert answered.interrupt_id == seat_id and resumed is True
    # Then the group runs again and joins: each branch has its own answer
    assert cloud.wait(mission_id) == "SUCCEEDED"
    outcome = cloud.outcome(mission_id)
    assert outcome.envelope is not None
    assert outcome.envelope.outputs["book"]["answer"] == "window seat, Alfama, compact car (asked: flights, hotel)"
    # And nothing a branch did before asking ran again: one model call per branch, the car ran once
    assert outcome.envelope.counters.llm_calls == 3
    assert RAN == {"flights": 1, "hotel": 1, "car": 1}
    assert outcome.envelope.waiting_branches is None and outcome.envelope.interrupt is None
    # And the events tell each question and each answer once
    events, _ = cloud.events(mission_id)
    raised = [e.payload["interrupt_id"] for e in events if e.type is EventType.INTERRUPT_RAISED]
    answers = [e.payload["interrupt_id"] for e in events if e.type is EventType.INTERRUPT_ANSWERED]
    assert raised == [seat_id, area_id] and answers == [area_id, seat_id]
    final = cloud.runtime.missions.get(mission_id)
    assert final.status == "completed" and not final.pending_interrupts and final.pending_interrupt is None


def test_items_of_a_fan_out_ask_and_the_join_gets_every_item_in_order(cloud: LocalCloud) -> None:
    # Given a fan-out over [1, 2, 3] whose odd items ask whether to keep them
    mission_id = cloud.start(ITEMS.name, "keep some")
    assert cloud.wait(mission_id, until_interrupt=True) == "INTERRUPTED"
    asked = questions(cloud, mission_id)
    assert [text for _, _, text in asked] == ["Keep item 1?", "Keep item 3?"]
    # When item 3 is answered, then item 1
    (first, _, _), (third, _, _) = asked
    assert cloud.runtime.interrupt_service.answer(mission_id, third, {"decision": "yes"})[1] is None
    assert cloud.runtime.interrupt_service.answer(mission_id, first, {"decision": "no"})[1] is True
    # Then the join gets all three items, in order, with their answers
    assert cloud.wait(mission_id) == "SUCCEEDED"
    outcome = cloud.outcome(mission_id)
    assert outcome.envelope is not None and outcome.envelope.outputs["tally"]["answer"] == "kept 2, 3"


def test_a_mission_waiting_on_two_questions_cancels_and_shows_neither(cloud: LocalCloud) -> None:
    # Given a trip waiting on both its questions, one of them answered
    mission_id = cloud.start(TRIP.name, "Porto")
    cloud.wait(mission_id, until_interrupt=True)
    (seat_id, _, _), (area_id, _, _) = questions(cloud, mission_id)
    cloud.runtime.interrupt_service.answer(mission_id, seat_id, {"decision": "aisle"})
    # When the user cancels it
    cloud.runtime.control.cancel(cloud.runtime.missions.get(mission_id))
    # Then it ends cancelled, and its other question can no longer be answered
    cloud.wait(mission_id)
    record = cloud.runtime.missions.get(mission_id)
    assert record.status == "cancelled" and not record.pending_interrupts and questions(cloud, mission_id) == []
    with pytest.raises(ConflictError):
        cloud.runtime.interrupt_service.answer(mission_id, area_id, {"text": "Ribeira"})


def test_on_one_standard_machine_the_answers_run_the_group_again_too() -> None:
    # Given the trip compiled as one Standard machine (a pipeline whose stages do not fit a segment)
    names, known = with_capabilities(TRIP)
    with LocalCloud(names, registry=known, single_level=True, prefix="asks-single") as cloud:
        mission_id = cloud.start(TRIP.name, "Faro")
        cloud.wait(mission_id, until_interrupt=True)
        (seat_id, _, _), (area_id, _, _) = questions(cloud, mission_id)
        # When both are answered, the second first
        cloud.runtime.interrupt_service.answer(mission_id, area_id, {"text": "the old town"})
        cloud.runtime.interrupt_service.answer(mission_id, seat_id, {"decision": "aisle"})
        # Then it joins with both answers
        assert cloud.wait(mission_id) == "SUCCEEDED"
        envelope = cloud.outcome(mission_id).envelope
        assert envelope is not None and envelope.outputs["book"]["answer"].startswith("aisle seat, the old town")


def test_a_fork_from_where_the_branches_asked_asks_them_again_and_the_finished_one_does_not_run(
    cloud: LocalCloud,
) -> None:
    RAN.clear()
    # Given a trip waiting on its branches' questions, and the checkpoint of its join that waits
    mission_id = cloud.start(TRIP.name, "Braga")
    cloud.wait(mission_id, until_interrupt=True)
    waiting = [c for c in cloud.runtime.checkpoints.list(mission_id) if c.stage == "book"]
    assert waiting, "the join's checkpoint was not written"
    # When the user forks from it
    forked = cloud.runtime.launcher.fork(mission_id, waiting[-1].checkpoint_id, "local").mission_id
    # Then the fork asks both questions again (its own), and its car branch returns what it returned
    assert cloud.wait(forked, until_interrupt=True) == "INTERRUPTED"
    asked = questions(cloud, forked)
    assert [stage for _, stage, _ in asked] == ["flights", "hotel"]
    assert {i for i, _, _ in asked}.isdisjoint(i for i, _, _ in questions(cloud, mission_id))
    assert RAN["car"] == 1
    # And answered, it joins
    for interrupt_id, stage, _ in reversed(asked):
        cloud.runtime.interrupt_service.answer(forked, interrupt_id, {"decision": "aisle", "text": f"by {stage}"})
    assert cloud.wait(forked) == "SUCCEEDED"
    envelope = cloud.outcome(forked).envelope
    assert envelope is not None and envelope.outputs["book"]["answer"].startswith("aisle seat, by hotel, compact")
    cloud.runtime.control.cancel(cloud.runtime.missions.get(mission_id))


def test_questions_left_unanswered_expire_together_and_the_mission_ends_through_its_final_stage(
    cloud: LocalCloud,
) -> None:
    # Given a trip whose branches' questions wait 2 seconds at most, one of them answered
    mission_id = cloud.start(TRIP_UNANSWERED.name, "Evora")
    cloud.wait(mission_id, until_interrupt=True)
    (seat_id, _, _), (area_id, _, _) = questions(cloud, mission_id)
    cloud.runtime.interrupt_service.answer(mission_id, seat_id, {"decision": "window"})
    # When the other is never answered
    assert cloud.wait(mission_id, timeout=60) == "SUCCEEDED"
    # Then the mission ends failed with the reason, through its final stage, and the question expired
    record = cloud.runtime.missions.get(mission_id)
    assert (record.status, record.terminal_reason) == ("failed", "interrupt_timeout")
    assert record.result is not None and record.result["answer"] == "nothing booked"
    assert cloud.runtime.interrupts.get(mission_id, area_id).status == "expired"
    assert questions(cloud, mission_id) == []
