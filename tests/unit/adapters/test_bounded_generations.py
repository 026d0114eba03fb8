"""Bounded generations (missions.core.llm.limits) in the shared provider and on each API's wire: every call
carries an output limit, an attempt's time follows from that limit, and an attempt the client abandons is
reported at its estimated cost, whether a later attempt answers or not."""

from __future__ import annotations

import json
from collections import deque

import boto3
import httpx2
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from pydantic import BaseModel

from missions.adapters.llm.anthropic_provider import AnthropicProvider
from missions.adapters.llm.bedrock_provider import BedrockProvider
from missions.adapters.llm.openai_provider import OpenAIProvider
from missions.adapters.llm.resilient import Answer, ResilientProvider, RetryableCall
from missions.core.cost.pricing import cost_usd
from missions.core.llm.limits import Abandoned, estimated_prompt_tokens, output_limit
from missions.core.llm.provider import LLMRequest, TransientLLMError
from tests.support.models.openai_provider import FakeClock
from tests.support.models.recorded_llm import (
    AnthropicTransport,
    anthropic_message,
    converse_response,
    serve_bedrock,
)

PRICES = {"m": (2.0, 8.0)}  # USD per million tokens
VALID = {"supported": True}


class Verdict(BaseModel):
    supported: bool


def request(**overrides) -> LLMRequest:
    options = dict(
        stage="review",
        role="judge",
        messages=[{"role": "system", "content": "You judge."}, {"role": "user", "content": "Supported? " * 40}],
        output_model=Verdict,
    )
    options.update(overrides)
    return LLMRequest(**options)


class Scripted:
    """A backend that plays one step per attempt (an answer, or a failure to raise) and keeps what each
    attempt was given."""

    name = "scripted-backend"

    def __init__(self, *steps: RetryableCall | None):
        self.steps = deque(steps)
        self.seen: list[tuple[int | None, float]] = []  # (max_tokens, timeout) per attempt

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        self.seen.append((request.max_tokens, timeout))
        step = self.steps.popleft() if self.steps else None
        if step is not None:
            raise step
        return Answer(json.dumps(VALID), model, 100, 10)

    def probe(self, model: str, timeout: float) -> None: ...


def provider(backend: Scripted, **options) -> ResilientProvider:
    return ResilientProvider(backend, default_model="m", prices=PRICES, sleep=lambda s: None, **options)


def timed_out() -> RetryableCall:
    return RetryableCall("APITimeoutError: Request timed out.", abandoned=True)


# ---------------------------------------------------------------------- the limit and the time


def test_the_output_limit_is_the_agents_else_the_roles_else_the_ceiling_never_past_the_ceiling():
    assert output_limit(300, 1000, 4096) == 300
    assert output_limit(None, 1000, 4096) == 1000
    assert output_limit(None, None, 4096) == 4096
    assert output_limit(None, 50_000, 4096) == output_limit(9_000, None, 4096) == 4096


def test_every_call_carries_a_limit_capped_at_the_providers_ceiling():
    # Given a provider whose ceiling is 2,000 tokens
    backend = Scripted()
    bounded = provider(backend, max_tokens=2000)
    # When calls ask for no limit, for more than the ceiling, and for less
    for asked in (None, 50_000, 300):
        bounded.complete(request(max_tokens=asked))
    # Then each attempt was given a limit, and none more than the ceiling
    assert [limit for limit, _ in backend.seen] == [2000, 2000, 300]


def test_an_attempts_time_follows_from_its_limit_and_the_floor_and_never_passes_the_deadline():
    # Given 5 s to the first token and a floor of 20 tokens a second
    clock = FakeClock()
    backend = Scripted()
    bounded = provider(backend, first_token_seconds=5.0, tokens_per_second=20.0, clock=clock)
    # When a call with a 400-token limit has all the time it needs, then one whose stage has 7 s left
    bounded.complete(request(max_tokens=400))
    bounded.complete(request(max_tokens=400, deadline=clock.now + 7.0))
    # Then the first attempt may take 5 + 400 / 20 = 25 s, the second only the 7 s its stage has
    assert [timeout for _, timeout in backend.seen] == [25.0, 7.0]


# ---------------------------------------------------------------------- abandoned attempts


def test_an_abandoned_attempt_is_reported_at_prompt_plus_limit_even_when_a_retry_answers():
    # Given a model that times out once, then answers
    backend = Scripted(timed_out(), None)
    reported: list[Abandoned] = []
    # When a call with a 500-token limit is made
    result = provider(backend, first_token_seconds=5.0, tokens_per_second=50.0).complete(
        request(max_tokens=500, on_abandoned=reported.append)
    )
    # Then the answer is the second attempt's, and the first is reported with its worst-case cost
    assert result.output == Verdict(supported=True)
    (abandoned,) = reported
    prompt = estimated_prompt_tokens(request().messages, Verdict)
    assert prompt > 100  # the messages and the schema, at four characters a token
    assert (abandoned.attempt, abandoned.tokens_in, abandoned.tokens_out) == (1, prompt, 500)
    assert abandoned.cost_usd == cost_usd("m", prompt, 500, PRICES) > 0
    assert abandoned.timeout_s == 15.0 and "timed out" in abandoned.reason


def test_when_every_attempt_fails_each_abandoned_one_is_reported_and_a_refused_one_is_not():
    # Given a model that times out, is refused (429: nothing generated), then times out again
    backend = Scripted(timed_out(), RetryableCall("HTTP 429: slow down"), timed_out())
    reported: list[Abandoned] = []
    # When the call runs out of retries
    with pytest.raises(TransientLLMError):
        provider(backend, max_retries=2).complete(request(max_tokens=64, on_abandoned=reported.append))
    # Then the two abandoned attempts were reported, the refusal was not
    assert [a.attempt for a in reported] == [1, 3]
    assert all(a.tokens_out == 64 for a in reported)


# ---------------------------------------------------------------------- on each API's wire


def test_openai_sends_max_tokens_and_a_reasoning_model_max_completion_tokens():
    # Given an OpenAI-compatible endpoint that keeps what it is sent
    sent: list[dict] = []

    def serve(http_request: httpx2.Request) -> httpx2.Response:
        body = json.loads(http_request.content)
        sent.append(body)
        message = {"role": "assistant", "content": json.dumps(VALID)}
        return httpx2.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            },
        )

    client = openai.OpenAI(
        api_key="k",
        base_url="http://model.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(serve)),
        max_retries=0,
    )
    model = OpenAIProvider(client=client, max_tokens=1024, sleep=lambda s: None)
    # When a call without a limit is made, then one to a reasoning model
    model.complete(request())
    model.complete(request(max_tokens=200, model="gpt-5-mini"))
    # Then the first carries the ceiling as max_tokens (what compatible servers read), the second its own
    # limit under the name reasoning models take
    assert sent[0]["max_tokens"] == 1024 and "max_completion_tokens" not in sent[0]
    assert sent[1]["max_completion_tokens"] == 200 and "max_tokens" not in sent[1]


def test_openai_a_read_timeout_is_abandoned_and_a_refused_connection_is_not():
    # Given an endpoint whose first answer never comes in time, and one nobody listens on
    answers = deque([httpx2.ReadTimeout("timed out"), None])

    def serve(http_request: httpx2.Request) -> httpx2.Response:
        failure = answers.popleft()
        if failure is not None:
            raise failure
        message = {"role": "assistant", "content": json.dumps(VALID)}
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini"}
        return httpx2.Response(200, json={**body, "choices": [{"index": 0, "message": message}]})

    def refused(http_request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    def provider_on(handler) -> OpenAIProvider:
        transport = httpx2.MockTransport(handler)
        client = openai.OpenAI(api_key="k", base_url="http://model.test/v1", max_retries=0,
                               http_client=httpx2.Client(transport=transport))  # fmt: skip
        return OpenAIProvider(client=client, max_retries=1, sleep=lambda s: None)

    reported: list[Abandoned] = []
    # When a call is made to each
    provider_on(serve).complete(request(on_abandoned=reported.append))
    with pytest.raises(TransientLLMError):
        provider_on(refused).complete(request(on_abandoned=reported.append))
    # Then only the timed-out attempt, which the server had received, counts as abandoned
    assert [(a.model, a.attempt, a.tokens_out) for a in reported] == [("gpt-4o-mini", 1, 4096)]


def test_anthropic_sends_the_limit_and_a_timeout_is_abandoned():
    # Given the Messages API timing out once, then answering
    answers = deque(
        [httpx2.ReadTimeout("timed out"), httpx2.Response(200, json=anthropic_message(VALID, "claude-haiku-4-5"))]
    )

    def answer(body: dict) -> httpx2.Response:
        step = answers.popleft()
        if isinstance(step, Exception):
            raise step
        return step

    transport = AnthropicTransport(answer)
    claude = AnthropicProvider(
        api_key="k", http_client=httpx2.Client(transport=transport), max_tokens=700, sleep=lambda s: None
    )
    reported: list[Abandoned] = []
    # When a call without a limit of its own is made
    result = claude.complete(request(on_abandoned=reported.append))
    # Then both attempts carried the ceiling, and the first is reported abandoned
    assert result.output == Verdict(supported=True)
    assert [body["max_tokens"] for body in transport.requests] == [700, 700]
    assert [(a.attempt, a.tokens_out) for a in reported] == [(1, 700)]


def test_bedrock_sends_the_limit_and_a_read_timeout_is_abandoned():
    # Given Converse timing out once, then answering
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="k",
        aws_secret_access_key="s",
        config=Config(retries={"total_max_attempts": 1}),  # as the provider makes it: one attempt per call
    )
    answers = deque([None, (200, {}, json.dumps(converse_response(VALID, 50, 5)).encode())])

    def answer(body: dict) -> tuple[int, dict[str, str], bytes]:
        step = answers.popleft()
        if step is None:
            raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")
        return step

    sent = serve_bedrock(client, answer)
    bedrock = BedrockProvider(
        client=client, default_model="amazon.nova-lite-v1:0", max_tokens=900, sleep=lambda s: None
    )
    reported: list[Abandoned] = []
    # When a call with a limit past the ceiling is made
    result = bedrock.complete(request(max_tokens=5000, on_abandoned=reported.append))
    # Then both attempts carried the ceiling, and the first is reported abandoned
    assert result.output == Verdict(supported=True)
    assert [body["inferenceConfig"]["maxTokens"] for body in sent] == [900, 900]
    assert [(a.attempt, a.tokens_out) for a in reported] == [(1, 900)]
