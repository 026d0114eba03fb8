"""How OpenAIProvider survives a failing server: retries with backoff, the fallback model, the circuit breaker.
OpenAIProvider against a real local OpenAI-compatible server, through the real openai SDK.
"""

from __future__ import annotations

import openai
import pytest

from missions.adapters.llm.openai_provider import OpenAIProvider
from missions.core.cost.pricing import cost_usd
from missions.core.llm.provider import LLMError, TransientLLMError
from tests.support.models.fake_openai import FakeOpenAI, error_body
from tests.support.models.openai_provider import VALID, FakeClock, make_provider, request


def enqueue_failures(fake: FakeOpenAI, status: int, count: int) -> None:
    for _ in range(count):
        fake.enqueue(status=status)


@pytest.mark.parametrize(
    ("headers", "expected_sleep"),
    [
        (None, 0.5),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "120"}, 8.0),
    ],
    ids=["backoff", "retry-after", "retry-after-ms", "retry-after-capped"],
)
def test_rate_limit_then_success_sleeps_once(fake, sleeps, headers, expected_sleep):
    # Given a 429 (optionally with retry-after) followed by a good answer
    fake.enqueue(status=429, headers=headers)
    fake.enqueue(content=VALID)
    provider = make_provider(fake, sleeps)

    # When a completion is requested
    result = provider.complete(request())

    # Then it succeeds after one injected sleep honouring the server's hint, capped at 8s
    assert result.output.answer == "yes"
    assert sleeps == [expected_sleep]
    assert len(fake.requests) == 2


def test_server_errors_beyond_max_retries_raise_transient(fake, sleeps):
    # Given a server failing with 500 more often than the provider retries
    enqueue_failures(fake, 500, 10)
    provider = make_provider(fake, sleeps, max_retries=3)

    # When a completion is requested
    with pytest.raises(TransientLLMError) as caught:
        provider.complete(request())

    # Then it tried 1 + max_retries times with exponential backoff, then gave up
    assert len(fake.requests) == 4
    assert sleeps == [0.5, 1.0, 2.0]
    assert "HTTP 500" in str(caught.value)
    assert isinstance(caught.value.__cause__, openai.InternalServerError)


def test_backoff_is_capped(fake, sleeps):
    # Given a provider allowing many retries against a server that always fails
    enqueue_failures(fake, 503, 8)
    provider = make_provider(fake, sleeps, max_retries=7)

    # When it gives up
    with pytest.raises(TransientLLMError):
        provider.complete(request())

    # Then the doubling backoff never exceeds 8 seconds
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_bad_request_raises_llm_error_without_retry(fake, sleeps):
    # Given a 400 that has nothing to do with response_format
    fake.enqueue(status=400, body=error_body(400, "context length exceeded", param="messages"))
    provider = make_provider(fake, sleeps)

    # When a completion is requested
    with pytest.raises(LLMError) as caught:
        provider.complete(request())

    # Then the error is final: not transient, no retry, no sleep
    assert not isinstance(caught.value, TransientLLMError)
    assert "HTTP 400" in str(caught.value)
    assert len(fake.requests) == 1
    assert sleeps == []


def test_exhausted_quota_is_not_retried(fake, sleeps):
    # Given a 429 that means the account is out of credit
    fake.enqueue(status=429, body=error_body(429, "quota", code="insufficient_quota"))
    provider = make_provider(fake, sleeps)

    # When a completion is requested
    with pytest.raises(LLMError) as caught:
        provider.complete(request())

    # Then waiting would not help, so it fails at once
    assert not isinstance(caught.value, TransientLLMError)
    assert len(fake.requests) == 1 and sleeps == []


def test_timeout_is_retried(fake, sleeps):
    # Given a server slower than the client timeout once, then fast
    fake.enqueue(content=VALID, delay=4.0)
    fake.enqueue(content=VALID)
    # an attempt's time: 1 s to the first token, 16 tokens at 1,000 a second (room for a loaded machine's fast answer)
    provider = make_provider(fake, sleeps, first_token_seconds=1.0, max_tokens=16, tokens_per_second=1000.0)

    # When a completion is requested
    result = provider.complete(request())

    # Then the timeout was retried after one backoff
    assert result.output.answer == "yes"
    assert sleeps == [0.5]


def test_connection_errors_become_transient(sleeps):
    # Given an endpoint where nothing listens any more
    with FakeOpenAI() as gone:
        base_url = gone.base_url
    provider = OpenAIProvider(
        api_key="test-key", base_url=base_url, first_token_seconds=5.0, max_retries=1, sleep=sleeps.append
    )

    # When a completion is requested
    with pytest.raises(TransientLLMError) as caught:
        provider.complete(request())

    # Then connection failures were retried and reported as transient
    assert sleeps == [0.5]
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)


def test_fallback_model_is_used_when_the_primary_keeps_failing(fake, sleeps):
    # Given a primary model failing on every retry, and a fallback model that answers
    enqueue_failures(fake, 503, 2)
    fake.enqueue(content=VALID)
    provider = make_provider(fake, sleeps, default_model="gpt-4o", fallback_model="gpt-4o-mini", max_retries=1)

    # When a completion is requested
    result = provider.complete(request())

    # Then the fallback answered, and the result is attributed and priced to it
    assert [r["model"] for r in fake.requests] == ["gpt-4o", "gpt-4o", "gpt-4o-mini"]
    assert result.model == "gpt-4o-mini"
    assert result.cost_usd == cost_usd("gpt-4o-mini", 10, 5)
    assert sleeps == [0.5]


def test_fallback_model_failing_too_raises_transient(fake, sleeps):
    # Given both models failing
    enqueue_failures(fake, 500, 2)
    provider = make_provider(fake, sleeps, fallback_model="gpt-4.1-nano", max_retries=0)

    # When a completion is requested
    with pytest.raises(TransientLLMError) as caught:
        provider.complete(request())

    # Then each model was tried once and the error names both
    assert [r["model"] for r in fake.requests] == ["gpt-4o-mini", "gpt-4.1-nano"]
    assert "gpt-4o-mini" in str(caught.value) and "gpt-4.1-nano" in str(caught.value)


def test_fallback_model_is_not_used_for_non_transient_errors(fake, sleeps):
    # Given a primary model whose answer is unusable (not a transient failure)
    fake.enqueue(content="no json here")
    provider = make_provider(fake, sleeps, fallback_model="gpt-4.1-nano")

    # When a completion is requested
    with pytest.raises(LLMError):
        provider.complete(request())

    # Then the fallback model was not called
    assert len(fake.requests) == 1


def test_circuit_opens_after_threshold_and_closes_after_cooldown(fake, sleeps):
    # Given a breaker opening after 2 failed calls, with a 30s cooldown on a fake clock
    clock = FakeClock()
    provider = make_provider(fake, sleeps, max_retries=0, breaker_threshold=2, breaker_cooldown_s=30.0, clock=clock)
    enqueue_failures(fake, 500, 2)

    # When two calls fail
    for _ in range(2):
        with pytest.raises(TransientLLMError):
            provider.complete(request())

    # Then the next call fails fast without reaching the server
    with pytest.raises(TransientLLMError, match="circuit open"):
        provider.complete(request())
    assert len(fake.requests) == 2

    # And it stays open until the cooldown has passed
    clock.now += 29.9
    with pytest.raises(TransientLLMError, match="circuit open"):
        provider.complete(request())
    assert len(fake.requests) == 2

    # When the cooldown has passed, one trial call goes through and succeeds
    clock.now += 0.2
    fake.enqueue(content=VALID).enqueue(content=VALID)
    assert provider.complete(request()).output.answer == "yes"

    # Then the circuit is closed again
    assert provider.complete(request()).output.answer == "yes"
    assert len(fake.requests) == 4


def test_failed_half_open_trial_reopens_the_circuit(fake, sleeps):
    # Given an open circuit whose cooldown has passed
    clock = FakeClock()
    provider = make_provider(fake, sleeps, max_retries=0, breaker_threshold=1, breaker_cooldown_s=10.0, clock=clock)
    fake.enqueue(status=500)
    with pytest.raises(TransientLLMError):
        provider.complete(request())
    clock.now += 10.0

    # When the trial call fails
    fake.enqueue(status=500)
    with pytest.raises(TransientLLMError, match="HTTP 500"):
        provider.complete(request())

    # Then the circuit is open again for a full cooldown
    clock.now += 9.0
    with pytest.raises(TransientLLMError, match="circuit open"):
        provider.complete(request())
    assert len(fake.requests) == 2


def test_success_resets_the_failure_count(fake, sleeps):
    # Given a threshold of 2 and failures separated by a success
    provider = make_provider(fake, sleeps, max_retries=0, breaker_threshold=2, clock=FakeClock())
    fake.enqueue(status=500).enqueue(content=VALID).enqueue(status=500).enqueue(content=VALID)

    # When calls fail, succeed, fail
    with pytest.raises(TransientLLMError):
        provider.complete(request())
    provider.complete(request())
    with pytest.raises(TransientLLMError):
        provider.complete(request())

    # Then the failures were not consecutive, so the circuit is still closed
    assert provider.complete(request()).output.answer == "yes"
    assert len(fake.requests) == 4
