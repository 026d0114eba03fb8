"""A streamed answer on the mission's event stream stays readable when the provider asks again: text an
attempt streamed before it failed is marked as not the answer, so a client never shows two answers run
together."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from missions.adapters.llm.resilient import Answer, ResilientProvider, RetryableCall
from missions.adapters.memory.events import MemoryEventStore
from missions.core.cost.pricing import Price
from missions.core.llm.provider import LLMRequest
from missions.core.mission.events import EventType
from missions.service.runner import ModelOutput

PRICES = {"m": Price((1.0, 1.0)), "backup": Price((1.0, 1.0))}


class Verdict(BaseModel):
    supported: bool


class Streaming:
    """A backend that streams each attempt's text word by word; attempts listed in `fail` fail after
    streaming what they had (a connection dropped mid-answer)."""

    name = "streaming"

    def __init__(self, fail: set[int], texts: list[str]):
        self.fail, self.texts, self.attempts = fail, texts, 0

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        self.attempts += 1
        for word in self.texts[(self.attempts - 1) % len(self.texts)].split(" "):
            assert request.on_text is not None
            request.on_text(word + " ")
        if self.attempts in self.fail:
            raise RetryableCall("connection reset")
        return Answer('{"supported": true}', model, 1, 1)

    def probe(self, model: str, timeout: float) -> None: ...


def shown(events: MemoryEventStore, mission_id: str) -> str:
    """What a client following the stream shows: the text since the last restart."""
    text = ""
    for event in events.read(mission_id, limit=1000)[0]:
        if event.type is EventType.LLM_OUTPUT:
            text = ("" if "restart" in event.payload else text) + event.payload["text"]
    return text


def stream(fail: set[int], texts: list[str], fallback: str | None = None) -> tuple[MemoryEventStore, Any]:
    events = MemoryEventStore()
    ticks = itertools.count()
    output = ModelOutput(events, "m_1", "review", "review@1", clock=lambda: float(next(ticks)))  # flushes each piece
    provider = ResilientProvider(
        Streaming(fail, texts),
        default_model="m",
        fallback_model=fallback,
        prices=PRICES,
        max_retries=2,
        sleep=lambda s: None,
    )
    request = LLMRequest(
        stage="review", role="judge", messages=[{"role": "user", "content": "?"}], output_model=Verdict
    )
    request.on_text, request.on_retry = output.write, output.restart
    result = provider.complete(request)
    output.close()
    return events, result


def test_a_retried_call_marks_what_its_failed_attempt_streamed_as_not_the_answer():
    # Given a model that streams half an answer, drops the connection, then answers in full
    events, result = stream({1}, ["the claim is", "the claim is supported by the evidence"])
    # Then a client following the stream shows the second attempt's text only
    assert shown(events, "m_1") == "the claim is supported by the evidence "
    restarts = [e.payload for e in events.read("m_1", limit=1000)[0] if "restart" in e.payload]
    assert [r["restart"] for r in restarts] == [2]
    assert result.output == Verdict(supported=True)


def test_the_fallback_models_answer_replaces_what_the_primary_streamed():
    # Given a primary that fails every retry, streaming each time, and a fallback that answers
    events, _ = stream({1, 2, 3}, ["no", "no", "no", "yes it is"], fallback="backup")
    # Then what shows is the fallback's answer
    assert shown(events, "m_1") == "yes it is "


@given(st.sets(st.integers(1, 2)), st.lists(st.text("ab ", min_size=1, max_size=12), min_size=3, max_size=3))
def test_whatever_attempts_fail_the_stream_shows_exactly_the_attempt_that_answered(fail, texts):
    events, _ = stream(fail, texts)
    answered = next(n for n in (1, 2, 3) if n not in fail)
    expected = "".join(word + " " for word in texts[answered - 1].split(" "))
    assert shown(events, "m_1") == expected


def test_a_repair_marks_the_invalid_answer_streamed_before_it_as_not_the_answer():
    # Given an invalid answer streamed in full, then the stage asking again (its first repair)
    events = MemoryEventStore()
    ticks = itertools.count()
    invalid = ModelOutput(events, "m_1", "review", "review@1", clock=lambda: float(next(ticks)))
    invalid.write("not json at all")
    invalid.close()
    repaired = ModelOutput(events, "m_1", "review", "review@1", clock=lambda: float(next(ticks)), repair=1)
    # When the repaired answer streams
    repaired.write('{"supported": ')
    repaired.write("true}")
    repaired.close()
    # Then a client shows only the repaired answer, told by the first batch that a repair replaced the rest
    assert shown(events, "m_1") == '{"supported": true}'
    batches = [e.payload for e in events.read("m_1", limit=100)[0] if e.type is EventType.LLM_OUTPUT]
    assert [b.get("repair") for b in batches] == [None, None, 1, None, None]  # invalid: a part and its end
