"""A request and an OpenAIProvider against the local fake OpenAI server, for the provider's tests."""

from __future__ import annotations

from pydantic import BaseModel

from missions.adapters.llm.openai_provider import OpenAIProvider
from missions.core.llm.provider import LLMRequest
from tests.support.models.fake_openai import FakeOpenAI


class Verdict(BaseModel):
    answer: str
    confidence: float


VALID = '{"answer": "yes", "confidence": 0.9}'


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_provider(fake: FakeOpenAI, sleeps: list[float], **overrides) -> OpenAIProvider:
    options = dict(
        api_key="test-key",
        base_url=fake.base_url,
        first_token_seconds=5.0,
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
