"""OpenAIProvider against a real local OpenAI-compatible server, through the real openai SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from pydantic import BaseModel

from missions.adapters.llm.openai_provider import OpenAIProvider
from missions.core.cost.pricing import cost_usd
from missions.core.llm.provider import LLMError, LLMProvider, LLMRequest, TransientLLMError
from tests.support.fake_openai import FakeOpenAI, error_body

REPO = Path(__file__).resolve().parents[2]


class Verdict(BaseModel):
    answer: str
    confidence: float


VALID = '{"answer": "yes", "confidence": 0.9}'


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make_provider(fake: FakeOpenAI, sleeps: list[float], **overrides) -> OpenAIProvider:
    options = dict(
        api_key="test-key",
        base_url=fake.base_url,
        timeout=5.0,
        sleep=sleeps.append,
    )
    options.update(overrides)
    return OpenAIProvider(**options)


def request(role: str = "judge", **overrides) -> LLMRequest:
    options = dict(
        stage="review",
        role=role,
        messages=[{"role": "user", "content": "Is the claim supported?"}],
        output_model=Verdict,
    )
    options.update(overrides)
    return LLMRequest(**options)


def enqueue_failures(fake: FakeOpenAI, status: int, count: int) -> None:
    for _ in range(count):
        fake.enqueue(status=status)


# ---------------------------------------------------------------------- structured outputs


def test_provider_satisfies_the_protocol(fake, sleeps):
    # Given a provider
    provider = make_provider(fake, sleeps)
    # Then it is an LLMProvider named "openai"
    assert isinstance(provider, LLMProvider)
    assert provider.name == "openai"


def test_structured_output_is_parsed(fake, sleeps):
    # Given a server that answers with schema-conforming JSON
    fake.enqueue(content=VALID)
    provider = make_provider(fake, sleeps)

    # When a structured completion is requested
    result = provider.complete(request())

    # Then the output is the validated pydantic model, unrepaired, from one call
    assert result.output == Verdict(answer="yes", confidence=0.9)
    assert result.repaired is False
    assert result.model == "gpt-4o-mini"
    assert len(fake.requests) == 1
    assert sleeps == []


def test_request_carries_json_schema_and_the_role_model(fake, sleeps):
    # Given a provider routing the "judge" role to its own model
    fake.enqueue(content=VALID).enqueue(content=VALID)
    provider = make_provider(fake, sleeps, models={"judge": "gpt-4.1-mini"})

    # When a judge request with sampling options and a role-less default request are made
    provider.complete(request(temperature=0.2, max_tokens=300))
    provider.complete(request(role="writer"))

    # Then the judge request names its model and asks for the output model's JSON schema
    judge, writer = fake.requests
    assert judge["model"] == "gpt-4.1-mini"
    assert judge["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema(), "strict": False},
    }
    assert judge["messages"] == [{"role": "user", "content": "Is the claim supported?"}]
    assert judge["temperature"] == 0.2 and judge["max_tokens"] == 300
    assert fake.request_headers[0]["authorization"] == "Bearer test-key"
    # And other roles use the default model, without sampling options they did not set
    assert writer["model"] == "gpt-4o-mini"
    assert "temperature" not in writer and "max_tokens" not in writer


def test_an_injected_client_is_used(fake, sleeps):
    # Given an openai client built by the caller
    client = openai.OpenAI(api_key="test-key", base_url=fake.base_url, timeout=5.0, max_retries=0)
    fake.enqueue(content=VALID)
    provider = OpenAIProvider(client=client, sleep=sleeps.append)

    # When it completes
    result = provider.complete(request())

    # Then the call went through that client to the server
    assert result.output.answer == "yes"
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "content",
    [
        f"```json\n{VALID}\n```",
        f"Sure! Here is my verdict:\n```json\n{VALID}\n```\nLet me know if you need more.",
        f"The verdict is {VALID} as requested.",
        '{"answer": "yes", "confidence": 0.9,}',
        "{'answer': 'yes', 'confidence': 0.9}",
    ],
    ids=["fence", "prose-and-fence", "prose", "trailing-comma", "single-quotes"],
)
def test_json_wrapped_in_prose_or_fences_is_repaired(fake, sleeps, content):
    # Given a model that wraps or mangles its JSON
    fake.enqueue(content=content)
    provider = make_provider(fake, sleeps)

    # When the answer is parsed
    result = provider.complete(request())

    # Then it is repaired, validated and flagged as repaired
    assert result.output == Verdict(answer="yes", confidence=0.9)
    assert result.repaired is True


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("I am sorry, I cannot judge this claim.", "Verdict"),
        ('{"answer": "yes"}', "confidence"),
        ('{"answer": "yes", "confidence": "very"}', "confidence"),
    ],
    ids=["prose-only", "missing-field", "wrong-type"],
)
def test_irreparable_content_raises_llm_error(fake, sleeps, content, problem):
    # Given a model whose answer cannot be made to fit the schema
    fake.enqueue(content=content)
    provider = make_provider(fake, sleeps)

    # When it is parsed
    with pytest.raises(LLMError) as caught:
        provider.complete(request())

    # Then a non-transient LLMError explains the validation problem, and nothing is retried
    assert not isinstance(caught.value, TransientLLMError)
    assert "not a valid Verdict" in str(caught.value)
    assert problem in str(caught.value)
    assert len(fake.requests) == 1


# ---------------------------------------------------------------------- retries


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
    provider = make_provider(fake, sleeps, timeout=1.0)  # room for a loaded machine's fast answer

    # When a completion is requested
    result = provider.complete(request())

    # Then the timeout was retried after one backoff
    assert result.output.answer == "yes"
    assert sleeps == [0.5]


def test_connection_errors_become_transient(sleeps):
    # Given an endpoint where nothing listens any more
    with FakeOpenAI() as gone:
        base_url = gone.base_url
    provider = OpenAIProvider(api_key="test-key", base_url=base_url, timeout=5.0, max_retries=1, sleep=sleeps.append)

    # When a completion is requested
    with pytest.raises(TransientLLMError) as caught:
        provider.complete(request())

    # Then connection failures were retried and reported as transient
    assert sleeps == [0.5]
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)


# ---------------------------------------------------------------------- json_object fallback


def test_json_schema_rejection_falls_back_to_json_object(fake, sleeps):
    # Given a server that rejects response_format json_schema but supports JSON mode
    rejection = error_body(
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
        param="response_format",
    )
    fake.enqueue(status=400, body=rejection)
    fake.enqueue(content=VALID)
    fake.enqueue(content=VALID)
    provider = make_provider(fake, sleeps)

    # When a completion is requested
    result = provider.complete(request())

    # Then it retried once in JSON mode with the schema in a system message
    assert result.output == Verdict(answer="yes", confidence=0.9)
    first, second = fake.requests
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object"}
    system = second["messages"][0]
    assert system["role"] == "system" and "JSON schema" in system["content"]
    assert json.dumps(Verdict.model_json_schema(), separators=(",", ":")) in system["content"]
    assert second["messages"][1:] == first["messages"]
    assert sleeps == []

    # And the next request for that model goes straight to JSON mode
    provider.complete(request())
    assert fake.requests[2]["response_format"] == {"type": "json_object"}


def test_json_object_rejection_is_final(fake, sleeps):
    # Given a server rejecting both structured-output modes
    for _ in range(2):
        fake.enqueue(status=400, body=error_body(400, "bad response_format", param="response_format"))
    provider = make_provider(fake, sleeps)

    # When a completion is requested
    with pytest.raises(LLMError):
        provider.complete(request())

    # Then JSON mode was tried only once
    assert len(fake.requests) == 2


# ---------------------------------------------------------------------- fallback model


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


# ---------------------------------------------------------------------- circuit breaker


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


# ---------------------------------------------------------------------- accounting


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


# ---------------------------------------------------------------------- cold start


def test_importing_the_llm_package_does_not_import_openai():
    # Given a fresh interpreter with the runtime on its path
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'shared'}{os.pathsep}{REPO}"}

    # When the LLM core and the scripted provider are imported
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import missions.core.llm.provider, missions.adapters.llm.scripted, sys;"
            " assert 'openai' not in sys.modules",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    # Then the openai SDK was not loaded
    assert completed.returncode == 0, completed.stderr


# ---------------------------------------------------------------------- deadlines


def test_a_hung_model_call_ends_with_its_stage(fake, sleeps):
    # Given a server that would answer only after 30 s, and a stage with 1 s left
    import time as wall

    fake.enqueue(content=VALID, delay=30.0)
    provider = make_provider(fake, sleeps, timeout=60.0, max_retries=0)
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


# ---------------------------------------------------------------------- a dollar budget always binds


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


def _sse(*chunks: dict) -> bytes:
    return b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + b"data: [DONE]\n\n"


def _chunk(content: str | None = None, usage: dict | None = None) -> dict:
    choices = [] if content is None else [{"index": 0, "delta": {"content": content}, "finish_reason": None}]
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o-mini", "choices": choices}
    return {**chunk, "usage": usage} if usage else chunk


def test_a_streamed_answer_goes_to_on_text_as_it_comes_and_is_validated_whole():
    import httpx2

    # Given streaming on, and an endpoint that streams the answer in three pieces, then its usage (recorded SSE)
    seen: list[dict] = []

    def serve(http_request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(http_request.content))
        body = _sse(
            _chunk('{"answer": '),
            _chunk('"yes", "confid'),
            _chunk('ence": 0.9}'),
            _chunk(usage={"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}),
        )
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = openai.OpenAI(
        api_key="k",
        base_url="http://model.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(serve)),
        max_retries=0,
    )
    pieces: list[str] = []
    # When a stage asks, taking the text as it comes
    result = OpenAIProvider(client=client, stream=True, sleep=lambda s: None).complete(request(on_text=pieces.append))
    # Then each piece reached on_text in order, the whole is the validated output, and the usage is counted
    assert pieces == ['{"answer": ', '"yes", "confid', 'ence": 0.9}']
    assert result.output == Verdict(answer="yes", confidence=0.9)
    assert (result.tokens_in, result.tokens_out) == (120, 12)
    assert seen[0]["stream"] is True and seen[0]["stream_options"] == {"include_usage": True}
