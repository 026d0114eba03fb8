"""AnthropicProvider: the real anthropic client over an httpx MockTransport serving recorded Messages API
bodies (JSON and SSE); the retries, fallback and breaker are the ones every provider shares."""

from __future__ import annotations

from collections import deque

import httpx2 as httpx  # the HTTP client the anthropic SDK uses (httpx objects are refused)
import pytest
from pydantic import BaseModel

from missions.adapters.llm.anthropic_provider import AnthropicProvider
from missions.core.cost.pricing import cost_usd
from missions.core.llm.provider import LLMError, LLMProvider, LLMRequest, Probed, TransientLLMError
from tests.support.models.recorded_llm import AnthropicTransport, anthropic_message, anthropic_sse

MODEL = "claude-haiku-4-5"
KEY = "sk-ant-api03-recorded-0123456789abcdefghij"


class Verdict(BaseModel):
    answer: str
    confidence: float


def request(**overrides) -> LLMRequest:
    options = dict(
        stage="review",
        role="judge",
        messages=[{"role": "system", "content": "You judge claims."}, {"role": "user", "content": "Supported?"}],
        output_model=Verdict,
        max_tokens=512,
    )
    options.update(overrides)
    return LLMRequest(**options)


def serving(*responses: httpx.Response) -> AnthropicTransport:
    queue = deque(responses)
    return AnthropicTransport(lambda body: queue.popleft())


def provider(transport: AnthropicTransport, sleeps: list[float] | None = None, **options) -> AnthropicProvider:
    slept = sleeps if sleeps is not None else []
    http = httpx.Client(transport=transport)
    return AnthropicProvider(api_key=KEY, http_client=http, default_model=MODEL, sleep=slept.append, **options)


def error(status: int, kind: str, message: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"type": "error", "error": {"type": kind, "message": message}}, headers=headers)


def test_a_tool_use_answer_is_the_validated_output_with_its_usage_and_cost():
    # Given the Messages API answering the forced tool call
    transport = serving(
        httpx.Response(200, json=anthropic_message({"answer": "no", "confidence": 0.8}, MODEL, 150, 45))
    )
    claude = provider(transport)
    # When a stage asks / Then the tool input is the output, priced from the answer's usage
    result = claude.complete(request())
    assert result.output == Verdict(answer="no", confidence=0.8)
    assert (result.model, result.tokens_in, result.tokens_out) == (MODEL, 150, 45)
    assert result.cost_usd == cost_usd(MODEL, 150, 45) > 0
    # and the request carried the system prompt apart, one forced tool and the stage's token limit
    (sent,) = transport.requests
    assert sent["system"] == "You judge claims." and sent["messages"] == [{"role": "user", "content": "Supported?"}]
    assert sent["tool_choice"] == {"type": "tool", "name": "Verdict"} and sent["max_tokens"] == 512
    assert isinstance(claude, LLMProvider) and isinstance(claude, Probed)
    claude.probe()  # GET /v1/models/<model> answered


def test_overloaded_is_retried_as_the_server_asks_and_a_bad_request_is_final():
    # Given an overloaded API (529, retry-after 2), then an answer
    transport = serving(
        error(529, "overloaded_error", "Overloaded", **{"retry-after": "2"}),
        httpx.Response(200, json=anthropic_message({"answer": "yes", "confidence": 1}, MODEL)),
        error(400, "invalid_request_error", f"bad tool schema (key {KEY})"),
    )
    sleeps: list[float] = []
    claude = provider(transport, sleeps)
    # When a stage asks / Then it waited what the server asked, once, and got its answer
    assert claude.complete(request()).output.answer == "yes"  # type: ignore[attr-defined]
    assert sleeps == [2.0]
    # When the request is refused / Then no retry, and the key the server quoted is not in the error
    with pytest.raises(LLMError) as refused:
        claude.complete(request())
    assert not isinstance(refused.value, TransientLLMError) and "HTTP 400" in str(refused.value)
    assert KEY not in str(refused.value) and sleeps == [2.0]


def test_rate_limits_hand_over_to_the_fallback_then_open_the_breaker():
    # Given the primary rate-limited twice and the fallback answering
    transport = serving(
        error(429, "rate_limit_error", "slow down"),
        error(429, "rate_limit_error", "slow down"),
        httpx.Response(200, json=anthropic_message({"answer": "maybe", "confidence": 0.5}, "claude-sonnet-4-5")),
        *[error(500, "api_error", "internal") for _ in range(4)],
    )
    claude = provider(transport, max_retries=1, fallback_model="claude-sonnet-4-5", breaker_threshold=1)
    # When a stage asks / Then the fallback answered and is priced as itself
    result = claude.complete(request())
    assert result.model == "claude-sonnet-4-5" and result.cost_usd == cost_usd("claude-sonnet-4-5", 100, 30)
    assert [body["model"] for body in transport.requests] == [MODEL, MODEL, "claude-sonnet-4-5"]
    # Given both failing / Then transient, and the breaker fails the next call without a request
    with pytest.raises(TransientLLMError, match="fallback model"):
        claude.complete(request())
    with pytest.raises(TransientLLMError, match="circuit open"):
        claude.complete(request())
    assert len(transport.requests) == 7


def test_with_on_text_the_answer_streams_as_server_sent_events():
    # Given the Messages API streaming the tool input in three pieces (recorded SSE)
    answer = {"answer": "streamed", "confidence": 0.7}
    sse = anthropic_sse(answer, MODEL, 80, 20)
    transport = serving(httpx.Response(200, content=sse, headers={"content-type": "text/event-stream"}))
    pieces: list[str] = []
    # When a stage asks with on_text
    result = provider(transport).complete(request(on_text=pieces.append))
    # Then the pieces came as written, and the final message is the output with the stream's usage
    assert len(pieces) == 3 and "".join(pieces) == '{"answer": "streamed", "confidence": 0.7}'
    assert result.output == Verdict(**answer) and (result.tokens_in, result.tokens_out) == (80, 20)
    assert transport.requests[0]["stream"] is True
