"""Answers to questions asked together (parallel branches): any order, each once, the last one resumes the
mission with all of them, and an outage on that last hand-over loses nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.interrupts import MemoryInterruptStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.errors import ConflictError
from missions.ports.interrupts import InterruptRecord
from missions.ports.missions import MissionRecord
from missions.service.interrupts import answer_interrupt, waiting_questions
from missions.service.lifecycle import Lifecycle

TOGETHER = ["i1", "i2"]


class Stores:
    def __init__(self) -> None:
        self.missions, self.interrupts, self.events = MemoryMissionStore(), MemoryInterruptStore(), MemoryEventStore()
        self.missions.create(MissionRecord(mission_id="m1", user_id="u", capability="trip", goal="Lisbon"))
        Lifecycle(self.missions).start("m1")
        kinds = {"i1": ("choice", "Window or aisle?", ["window", "aisle"]), "i2": ("clarification", "Where?", [])}
        for interrupt_id, (kind, question, options) in kinds.items():
            self.interrupts.put(
                InterruptRecord(
                    mission_id="m1",
                    interrupt_id=interrupt_id,
                    kind=kind,
                    stage=interrupt_id,
                    question=question,
                    options=options,
                    task_token="token",
                    together=TOGETHER,
                )
            )
        Lifecycle(self.missions).waiting("m1", "i1", TOGETHER)
        self.handed: list[tuple[str, dict[str, Any]]] = []
        self.fail_next = False

    def resume(self, record: InterruptRecord, output: str) -> bool:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("throttled")
        self.handed.append((record.interrupt_id, json.loads(output)))
        return True

    def answer(self, interrupt_id: str, response: dict[str, Any]) -> bool | None:
        return answer_interrupt(
            interrupts=self.interrupts,
            events=self.events,
            missions=self.missions,
            resume=self.resume,
            mission=self.missions.get("m1"),
            interrupt_id=interrupt_id,
            response=response,
        )[1]


def test_the_last_answer_hands_over_every_answer_whichever_it_is():
    stores = Stores()
    # When the second question is answered first, nothing is handed over and the first still waits
    assert stores.answer("i2", {"text": "Alfama"}) is None and stores.handed == []
    assert [q.interrupt_id for q in waiting_questions(stores.interrupts, stores.missions.get("m1"))] == ["i1"]
    with pytest.raises(ConflictError):
        stores.answer("i2", {"text": "Baixa"})
    # When the first is answered, both answers are handed over with the wait's token, named by the first
    assert stores.answer("i1", {"decision": "window"}) is True
    ((named, handed),) = stores.handed
    assert named == "i1" and handed["answers"] == {"i1": {"decision": "window"}, "i2": {"text": "Alfama"}}


def test_an_outage_on_the_last_hand_over_leaves_that_question_open_and_the_retry_resumes():
    stores = Stores()
    stores.answer("i1", {"decision": "aisle"})
    # When the last answer cannot be handed over
    stores.fail_next = True
    with pytest.raises(RuntimeError):
        stores.answer("i2", {"text": "Graça"})
    # Then that question is open again (the other stays answered), and the mission waits on it
    record = stores.missions.get("m1")
    assert record.pending_interrupts == ["i2"] and record.pending_interrupt == "i1"
    assert [q.interrupt_id for q in waiting_questions(stores.interrupts, record)] == ["i2"]
    # And the retry resumes the mission with both answers
    assert stores.answer("i2", {"text": "Graça"}) is True
    assert stores.handed[0][1]["answers"]["i2"] == {"text": "Graça"}
