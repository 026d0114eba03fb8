"""Bounded generations: the output limit every model call carries, the time one attempt may take, and what
an attempt the client gave up on is assumed to have cost.

Why a limit on every call: a model that rambles (a small local model often does) otherwise writes until
the client's timeout, and a hosted API bills what it generated before the disconnect. The limit is the
agent's own (`max_tokens` of its stage or configuration version), else its role's default in the
capability (`[pipeline.max_tokens]`), else the environment's ceiling (`llm_max_output_tokens`), and never
more than that ceiling.

Why the timeout follows from the limit: an attempt needs time to reach the model and read the prompt
(`first_token_seconds`), then at most `max_tokens` tokens at no less than the throughput floor
(`tokens_per_second`). A fixed number is either too short for a long answer or lets a hung server hold a
stage for minutes. The stage's deadline still caps it (missions.adapters.llm.resilient).

Why an abandoned attempt is charged prompt + limit: the client cannot know how much the server generated
before it stopped listening, and a budget (`max_cost_usd`) only binds if it counts the worst case. The
prompt is estimated at CHARS_PER_TOKEN characters a token (messages and the output schema, both sent).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

DEFAULT_MAX_TOKENS = 4096  # the ceiling when the environment names none
DEFAULT_TOKENS_PER_SECOND = 10.0  # slower than any hosted API; a small CPU model on two cores manages ~20
DEFAULT_FIRST_TOKEN_SECONDS = 30.0  # connection, queueing and reading the prompt
CHARS_PER_TOKEN = 4


def output_limit(agent: int | None, role_default: int | None, ceiling: int) -> int:
    """The output limit a call carries: the agent's, else its role's default, else the ceiling; never past
    the ceiling."""
    chosen = agent if agent is not None else role_default if role_default is not None else ceiling
    return max(1, min(chosen, ceiling))


def attempt_timeout(max_tokens: int, tokens_per_second: float, first_token_seconds: float) -> float:
    """Seconds one attempt may take: time to the first token, then the limit at the throughput floor."""
    return first_token_seconds + max_tokens / tokens_per_second


def estimated_prompt_tokens(messages: Iterable[Mapping[str, str]], output_model: type[BaseModel] | None) -> int:
    """Tokens a prompt is assumed to hold when the server did not say: its characters (messages and the
    output schema the request sends along) over CHARS_PER_TOKEN, rounded up."""
    chars = sum(len(str(message.get("content") or "")) + len(str(message.get("role") or "")) for message in messages)
    if output_model is not None:
        chars += len(json.dumps(output_model.model_json_schema(), separators=(",", ":")))
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Abandoned:
    """An attempt the client gave up on after sending it (a timeout, a dropped connection): the server may
    have generated up to the limit, so it is charged as if it did (see the module doc)."""

    model: str
    attempt: int  # its number across the call's retries and fallback (1, 2, ...)
    max_tokens: int
    timeout_s: float
    tokens_in: int  # estimated
    tokens_out: int  # the limit
    cost_usd: float
    reason: str
    elapsed_ms: float = 0.0


__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_FIRST_TOKEN_SECONDS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TOKENS_PER_SECOND",
    "Abandoned",
    "attempt_timeout",
    "estimated_prompt_tokens",
    "output_limit",
]
