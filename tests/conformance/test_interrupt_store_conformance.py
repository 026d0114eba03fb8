"""Interrupt stores (the questions a mission asks), in memory and on DynamoDB in moto:
a backend conforms when it behaves exactly like the in-memory reference adapter."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from missions.core.errors import ConflictError, NotFound
from missions.core.mission.envelope import InterruptKind, InterruptResponse
from missions.core.specs import INTERRUPTS
from missions.ports.interrupts import InterruptRecord

if TYPE_CHECKING:
    from tests.conformance.conftest import Moto


@dataclass
class Backend:
    name: str
    interrupts: Any


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        from missions.adapters.memory.interrupts import MemoryInterruptStore

        yield Backend("memory", MemoryInterruptStore())
        return
    from missions.adapters.dynamodb.interrupts import DynamoInterruptStore

    aws: Moto = request.getfixturevalue("aws")
    yield Backend("dynamodb", DynamoInterruptStore(aws.table(INTERRUPTS), client=aws.ddb))


def interrupt(mission_id: str, interrupt_id: str, token: str = "token-1") -> InterruptRecord:
    return InterruptRecord(
        mission_id=mission_id,
        interrupt_id=interrupt_id,
        kind=InterruptKind.CHOICE,
        stage="review",
        question="which one?",
        options=["a", "b"],
        data={"score": 0.75, "nested": {"items": [1, 2.5, "x"], "flag": True, "none": None}},
        task_token=token,
    )


def test_an_answer_that_was_not_delivered_can_be_reopened(backend):
    # Given an answered question
    backend.interrupts.put(
        InterruptRecord(
            mission_id="m1", interrupt_id="i1", kind="clarification", stage="s", question="q?", task_token="t"
        )
    )
    backend.interrupts.answer("m1", "i1", InterruptResponse(text="a"))
    # When its answer could not be handed over / Then it is pending again, waiting, and takes a new answer
    backend.interrupts.reopen("m1", "i1")
    record = backend.interrupts.get("m1", "i1")
    assert (record.status, record.response, record.answered_at) == ("pending", None, None)
    assert [r.interrupt_id for r in backend.interrupts.pending("m1")] == ["i1"]
    assert backend.interrupts.answer("m1", "i1", InterruptResponse(text="b")).response.text == "b"
    # and only an answered question reopens
    backend.interrupts.expire("m1", "i1")
    with pytest.raises(ConflictError):
        backend.interrupts.reopen("m1", "i1")
    with pytest.raises(NotFound):
        backend.interrupts.reopen("m1", "nope")


def test_interrupt_put_get(backend):
    record = interrupt("m1", "int_1")
    backend.interrupts.put(record)
    assert backend.interrupts.get("m1", "int_1") == record
    with pytest.raises(NotFound):
        backend.interrupts.get("m1", "int_2")
    # a retried put while pending keeps the newest token
    backend.interrupts.put(interrupt("m1", "int_1", token="token-2"))
    assert backend.interrupts.get("m1", "int_1").task_token == "token-2"


def test_interrupt_answer_exactly_once(backend):
    backend.interrupts.put(interrupt("m1", "int_1"))
    response = InterruptResponse(decision="a", data={"weight": 0.5})
    answered = backend.interrupts.answer("m1", "int_1", response)
    assert answered.status == "answered"
    assert answered.response == response
    assert answered.answered_at
    assert answered.task_token == "token-1"
    assert backend.interrupts.get("m1", "int_1") == answered

    with pytest.raises(ConflictError):
        backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="b"))
    assert backend.interrupts.get("m1", "int_1").response == response


def test_interrupt_answer_missing_is_not_found(backend):
    with pytest.raises(NotFound):
        backend.interrupts.answer("m1", "nope", InterruptResponse(decision="a"))


def test_interrupt_put_after_answer_conflicts(backend):
    backend.interrupts.put(interrupt("m1", "int_1"))
    backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="a"))
    with pytest.raises(ConflictError):
        backend.interrupts.put(interrupt("m1", "int_1", token="late-retry"))
    got = backend.interrupts.get("m1", "int_1")
    assert got.status == "answered"
    assert got.task_token == "token-1"


def test_interrupt_expire_drops_an_undelivered_answer(backend):
    # Given an answer that Step Functions then refused (the token had timed out)
    backend.interrupts.put(interrupt("m1", "int_1"))
    backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="late"))
    # When it is expired
    backend.interrupts.expire("m1", "int_1")
    # Then it is neither pending nor answered, and cannot be answered again
    got = backend.interrupts.get("m1", "int_1")
    assert (got.status, got.response, got.answered_at) == ("expired", None, None)
    assert backend.interrupts.pending("m1") == []
    with pytest.raises(ConflictError):
        backend.interrupts.answer("m1", "int_1", InterruptResponse(decision="again"))
    with pytest.raises(NotFound):
        backend.interrupts.expire("m1", "missing")


def test_interrupt_pending(backend):
    backend.interrupts.put(interrupt("m1", "int_1"))
    backend.interrupts.put(interrupt("m1", "int_2"))
    backend.interrupts.put(interrupt("m1", "int_3"))
    backend.interrupts.put(interrupt("m2", "int_9"))
    backend.interrupts.answer("m1", "int_2", InterruptResponse(decision="a"))
    pending = backend.interrupts.pending("m1")
    assert sorted(r.interrupt_id for r in pending) == ["int_1", "int_3"]
    assert all(r.status == "pending" and r.mission_id == "m1" for r in pending)
    assert backend.interrupts.pending("nobody") == []


def test_interrupt_overdue_lists_only_old_unanswered_questions_oldest_first(backend):
    # Given questions asked at different times, one answered and one expired since
    for interrupt_id, asked in [
        ("old", "2026-01-01T00:00:00.000+00:00"),
        ("older", "2025-12-31T00:00:00.000+00:00"),
        ("new", "2026-01-03T00:00:00.000+00:00"),
        ("done", "2025-12-01T00:00:00.000+00:00"),
        ("gone", "2025-12-02T00:00:00.000+00:00"),
    ]:
        backend.interrupts.put(interrupt(f"m-{interrupt_id}", interrupt_id).model_copy(update={"created_at": asked}))
    backend.interrupts.answer("m-done", "done", InterruptResponse(decision="a"))
    backend.interrupts.expire("m-gone", "gone")
    # When asking for those asked before Jan 2nd
    overdue = backend.interrupts.overdue("2026-01-02T00:00:00.000+00:00")
    # Then only the two pending older ones come back, oldest first, across missions
    assert [r.interrupt_id for r in overdue] == ["older", "old"]
    assert backend.interrupts.overdue("2026-01-02T00:00:00.000+00:00", limit=1)[0].interrupt_id == "older"
    assert backend.interrupts.get("m-old", "old") == overdue[1]  # the index attribute never leaks
