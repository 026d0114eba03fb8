"""A model that fails like a real one: the real OpenAIProvider over an HTTP transport that, for a share
of attempts, times out, rate-limits, answers 5xx (quoting the key) or answers prose instead of JSON.

The right answers come from each capability's offline policy, so a mission that gets through the faults
ends as it would offline; what is under test is everything between the stage and the wire: the SDK's
error mapping, the provider's retries, fallback model, breaker and JSON repair, then the state machine's
retries and failure path. Faults are drawn per HTTP attempt from one seeded generator, so a run's
fault sequence is reproducible up to thread scheduling.

    model = FlakyModel(seed=7, fault_rate=0.3)
    with LocalCloud(["shopping"], llm=model) as cloud: ...
    model.faults  # Counter({"timeout": .., "rate_limit": .., "server_error": .., "invalid_json": ..})
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from typing import Any

import httpx
import openai
from pydantic import BaseModel

from missions.adapters.llm.openai_provider import OpenAIProvider
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMError, LLMRequest, LLMResult
from tests.support.models.fake_openai import error_body

# long enough to count as a secret (core.redaction), and not shaped like one: only the provider, which
# knows it, can keep it out of errors
API_KEY = "flaky-key-0123456789abcdef"
FAULTS = ("timeout", "rate_limit", "server_error", "invalid_json")
MODEL = "gpt-4o-mini"
FALLBACK_MODEL = "gpt-4o"
# what a model answers instead of JSON: prose, and JSON inside prose and fences (which repair rescues)
NOT_JSON = (
    "I'm sorry, I can't help with that request right now.",
    "Sure! Here is the answer you asked for:\n```json\n{answer}\n```\nLet me know if you need anything else.",
)


class FlakyTransport(httpx.BaseTransport):
    """Answers POST /chat/completions with the thread's prepared content, or with a fault."""

    def __init__(self, seed: int, fault_rate: float, answer: threading.local, faults: tuple[str, ...] = FAULTS):
        self._random = random.Random(seed)
        self._fault_rate = fault_rate
        self._kinds = faults
        self._answer = answer
        self._lock = threading.Lock()
        self.faults: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.models: Counter[str] = Counter()  # attempts per model asked for: the fallback's share

    def _draw(self) -> tuple[str | None, float]:
        with self._lock:  # random.Random is not safe to share between threads
            fault = self._random.choice(self._kinds) if self._random.random() < self._fault_rate else None
            return fault, self._random.random()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        model = str(body.get("model", MODEL))
        fault, toss = self._draw()
        with self._lock:
            self.models[model] += 1
            if fault is not None:
                self.faults[fault] += 1
        if fault == "timeout":  # as httpx raises when the server never answers, without the wait
            raise httpx.ReadTimeout("flaky: the model did not answer in time", request=request)
        if fault == "rate_limit":
            return self._reply(request, 429, error_body(429, "Rate limit reached, slow down"), {"retry-after": "0"})
        if fault == "server_error":
            status = 500 if toss < 0.5 else 503
            # quoting the key back, as some servers and proxies do: it must not reach what is stored
            message = f"The server had an error processing your request (key {API_KEY}), please retry"
            return self._reply(request, status, error_body(status, message))
        content: str = self._answer.content
        if fault == "invalid_json":
            content = NOT_JSON[int(toss * len(NOT_JSON))].replace("{answer}", content)
        completion = {
            "id": f"chatcmpl-flaky-{id(request):x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160},
        }
        return self._reply(request, 200, completion)

    def _reply(
        self, request: httpx.Request, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        with self._lock:
            self.statuses[status] += 1
        return httpx.Response(status, json=body, headers=headers, request=request)


class FlakyModel:
    """An LLMProvider for `LocalCloud(llm=...)`: every stage's call goes through the real OpenAIProvider."""

    name = "flaky"

    def __init__(
        self,
        *,
        seed: int = 0,
        fault_rate: float = 0.3,
        faults: tuple[str, ...] = FAULTS,
        max_retries: int = 1,
        **provider: Any,
    ):
        """`faults`: the kinds drawn from, evenly. `max_retries` is the provider's per model: with 1, a
        primary model that fails twice in a row hands over to the fallback often enough that the
        fallback is exercised too."""
        self._answer = threading.local()
        self.transport = FlakyTransport(seed, fault_rate, self._answer, faults)
        client = openai.OpenAI(
            api_key=API_KEY,
            base_url="http://flaky.invalid/v1",
            max_retries=0,
            http_client=httpx.Client(transport=self.transport),
        )
        self.backoffs: list[float] = []  # what the provider would have slept: no wall time spent
        self.provider = OpenAIProvider(
            api_key=API_KEY,  # as the runtime passes it: the provider keeps it out of its errors
            client=client,
            default_model=MODEL,
            fallback_model=FALLBACK_MODEL,
            max_retries=max_retries,
            sleep=self.backoffs.append,
            **provider,
        )
        self._lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()  # per complete(): ok, repaired, or the error's type

    @property
    def faults(self) -> Counter[str]:
        return self.transport.faults

    def complete(self, request: LLMRequest) -> LLMResult:
        self._answer.content = json.dumps(self._valid_answer(request))
        try:
            result = self.provider.complete(request)
        except LLMError as exc:
            self._count(type(exc).__name__)
            raise
        self._count("repaired" if result.repaired else "ok")
        return result

    @staticmethod
    def _valid_answer(request: LLMRequest) -> Any:
        """What the scripted model would answer (missions.adapters.llm.scripted), as JSON."""
        policy = registry.load(request.envelope.capability).offline_policy
        answer = policy(request)
        if isinstance(answer, BaseModel):
            answer = answer.model_dump(mode="json")
        return request.output_model.model_validate(answer).model_dump(mode="json")

    def _count(self, outcome: str) -> None:
        with self._lock:
            self.outcomes[outcome] += 1
