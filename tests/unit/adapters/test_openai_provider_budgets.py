"""What OpenAIProvider spends: tokens and dollars accounted and priced, and the stage's deadline. OpenAIProvider
against a real local OpenAI-compatible server, through the real openai SDK.
"""

from __future__ import annotations

import pytest

from missions.core.cost.pricing import cost_usd
from missions.core.llm.provider import LLMError, TransientLLMError
from tests.support.models.openai_provider import VALID, FakeClock, make_provider, request


def test_tokens_and_dollars_are_accounted(fake, sleeps):
    # Given gpt-4o-mini reporting 1000 prompt and 500 completion tokens
    fake.enqueue(content=VALID, prompt_tokens=1000, completion_tokens=500)
    provider = make_provider(fake, sleeps)

    # When a completion is made
    result = provider.complete(request())

    # Then tokens come from usage and the cost from the price list ($0.15 / $0.60 per 1M)
    assert (result.tokens_in, result.tokens_out) == (1000, 500)
    assert result.cost_usd == cost_usd("gpt-4o-mini", 1000, 500) == pytest.approx(0.00045)
    assert result.latency_ms > 0


def test_the_served_model_name_is_reported_and_priced(fake, sleeps):
    # Given a server answering with a dated snapshot of the requested model
    fake.enqueue(content=VALID, model="gpt-4o-2024-08-06", prompt_tokens=2000, completion_tokens=100)
    provider = make_provider(fake, sleeps, default_model="gpt-4o")

    # When a completion is made
    result = provider.complete(request())

    # Then the result names the snapshot and prices it as its family
    assert result.model == "gpt-4o-2024-08-06"
    assert result.cost_usd == cost_usd("gpt-4o", 2000, 100)


def test_missing_usage_counts_zero_tokens(fake, sleeps):
    # Given a compatible server that omits usage
    fake.enqueue(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": VALID},
                    "finish_reason": "stop",
                }
            ],
        }
    )
    provider = make_provider(fake, sleeps)

    # When a completion is made
    result = provider.complete(request())

    # Then tokens and cost are zero rather than an error
    assert (result.tokens_in, result.tokens_out, result.cost_usd) == (0, 0, 0.0)


def test_a_hung_model_call_ends_with_its_stage(fake, sleeps):
    # Given a server that would answer only after 30 s, and a stage with 1 s left
    import time as wall

    fake.enqueue(content=VALID, delay=30.0)
    provider = make_provider(fake, sleeps, first_token_seconds=60.0, max_retries=0)
    started = wall.monotonic()
    # When the stage calls the model / Then the call gives up when the stage's time does
    with pytest.raises(TransientLLMError):
        provider.complete(request(deadline=wall.monotonic() + 1.0))
    assert wall.monotonic() - started < 5.0


def test_no_call_starts_once_the_stage_is_out_of_time(fake, sleeps):
    clock = FakeClock()
    provider = make_provider(fake, sleeps, clock=clock)
    with pytest.raises(TransientLLMError, match="no time left"):
        provider.complete(request(deadline=clock.now - 0.1))
    assert fake.requests == []


def test_no_retry_waits_past_the_deadline(fake, sleeps):
    # Given a server failing with 503, asking to retry after 5 s, and a stage with 2 s left
    clock = FakeClock()
    fake.enqueue(status=503, headers={"retry-after": "5"})
    fake.enqueue(content=VALID)
    provider = make_provider(fake, sleeps, clock=clock, max_retries=3)
    # When the stage calls / Then it does not sleep into the time it does not have
    with pytest.raises(TransientLLMError, match="after 1 attempt"):
        provider.complete(request(deadline=clock.now + 2.0))
    assert sleeps == []


def test_a_model_without_a_price_is_refused_before_any_call(fake, sleeps):
    # Given a role routed to a model nobody priced / When the provider is made
    with pytest.raises(LLMError, match=r"no price for model\(s\) \['llama-3-70b'\]"):
        make_provider(fake, sleeps, models={"judge": "llama-3-70b"})
    # Then no request was sent
    assert fake.requests == []


def test_a_model_priced_by_configuration_is_charged_at_that_price(fake, sleeps):
    # Given a local model priced in the settings, served under the server's own name for it
    fake.enqueue(content=VALID, model="llama-3-70b-instruct-q4", prompt_tokens=1_000_000, completion_tokens=500_000)
    provider = make_provider(fake, sleeps, default_model="llama-3-70b", prices={"llama-3-70b": (0.5, 2.0)})

    # When a completion is made
    result = provider.complete(request())

    # Then it costs what the configuration says (priced as its family, the model asked for)
    assert result.cost_usd == pytest.approx(0.5 + 1.0)


def test_an_answer_under_an_unpriced_name_is_charged_as_the_model_asked_for(fake, sleeps):
    # Given a compatible server that names the listed model it serves in its own way
    fake.enqueue(content=VALID, model="my-proxy/4o-mini", prompt_tokens=1000, completion_tokens=500)
    provider = make_provider(fake, sleeps)
    # When a completion is made / Then it is not free: priced as gpt-4o-mini, which was asked for
    assert provider.complete(request()).cost_usd == cost_usd("gpt-4o-mini", 1000, 500) > 0
