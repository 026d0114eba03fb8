"""The offline provider: deterministic answers from a capability's offline policy."""

from __future__ import annotations

import json
import time

from pydantic import BaseModel, ValidationError

from missions.core.cost.pricing import Price, cost_usd
from missions.core.llm.provider import InvalidOutput, LLMRequest, LLMResult, OfflinePolicy, Unparsed, validation_errors


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedProvider:
    """Answers each request by calling the capability's policy for that stage.

    Tokens are estimated (4 characters a token) so counters and budgets behave as they would
    with a real model; the cost is zero, unless a price is given (the settings' `openai_prices` may
    price the model "scripted"), so dollar budgets can be tried without a key.
    """

    name = "scripted"

    def __init__(self, policy: OfflinePolicy, price: Price | None = None):
        self._policy = policy
        self._price = price

    def _cost(self, tokens_in: int, tokens_out: int) -> float:
        if self._price is None:
            return 0.0
        return cost_usd("scripted", tokens_in, tokens_out, {"scripted": self._price})

    def complete(self, request: LLMRequest) -> LLMResult:
        started = time.perf_counter()
        answer = self._policy(request)
        prompt = "".join(m.get("content", "") for m in request.messages)
        try:
            output = (
                answer
                if isinstance(answer, request.output_model)
                else request.output_model.model_validate(
                    answer.model_dump() if isinstance(answer, BaseModel) else answer
                )
            )
        except ValidationError as exc:  # as a real model's invalid answer: the stage may ask again
            content = json.dumps(answer.model_dump() if isinstance(answer, BaseModel) else answer, default=str)
            raise InvalidOutput(
                f"offline policy for '{request.stage}' gave an invalid answer: {exc}",
                content=content,
                errors=validation_errors(exc),
                spent=LLMResult(
                    Unparsed(content=content), "scripted", estimate_tokens(prompt), estimate_tokens(content)
                ),
            ) from exc
        tokens_in, tokens_out = estimate_tokens(prompt), estimate_tokens(json.dumps(output.model_dump(mode="json")))
        return LLMResult(
            output=output,
            model="scripted",
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self._cost(tokens_in, tokens_out),
            latency_ms=(time.perf_counter() - started) * 1000,
        )
