"""The provider protocol every LLM backend implements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from missions.core.errors import InvalidAnswer
from missions.core.llm.limits import Abandoned


class LLMError(Exception):
    """The model could not produce a valid answer; the stage records it and may be retried."""


class LLMBudgetExhausted(LLMError):
    """A stage asked its model once more than the mission's max_llm_calls allows."""


class TransientLLMError(LLMError):
    """A failure worth retrying later (rate limit, 5xx, timeout, open circuit)."""


class InvalidOutput(LLMError, InvalidAnswer):
    """The model answered, but its answer is not a valid output (its schema), even after JSON repair.
    `content`: the answer as the model wrote it, `errors`: what is wrong with it, both for asking the model
    again (missions.service.runner._repair); `spent`: the call's model, tokens and cost, which the provider
    sets (the answer was generated, and is paid for, even though it is not used; its output is `Unparsed`)."""

    def __init__(self, message: str, *, content: str = "", errors: str = "", spent: LLMResult | None = None):
        super().__init__(message)
        self.content, self.errors, self.spent = content, errors, spent


@dataclass
class LLMRequest:
    """One structured completion. `envelope` is for offline policies only and is never sent."""

    stage: str
    role: str
    messages: list[dict[str, str]]
    output_model: type[BaseModel]
    temperature: float | None = None
    # the output limit (missions.core.llm.limits): the runner always sets one; a provider caps what it is
    # given at its ceiling and fills in the ceiling when it is given none
    max_tokens: int | None = None
    envelope: Any = None
    hints: dict[str, Any] = field(default_factory=dict)
    # what a typed stage gave `ctx.think` (also in the messages): offline policies read them here
    facts: dict[str, Any] = field(default_factory=dict)
    # time.monotonic() by which the stage must be done (its Lambda's remaining time): no call or
    # retry may run past it, so a hung model cannot outlive its mission's stage
    deadline: float | None = None
    # the model to ask (the mission's, else its agent configuration's); None: the provider's for the role
    model: str | None = None
    fallback_model: str | None = None  # the agent configuration's; None: the provider's own
    # pieces of the answer as the model writes them, for the mission's event stream; a provider that streams
    # (Bedrock, Anthropic) calls it, one that does not ignores it.
    on_text: Callable[[str], None] | None = None
    # called with the attempt's number (2, 3, ...) before the provider asks again (a retry, the fallback
    # model): whatever an earlier attempt streamed through on_text is not the answer and is dropped
    on_retry: Callable[[int], None] | None = None
    # called for each attempt the client gave up on after sending it (a timeout, a dropped connection),
    # whatever the call's end: the server may have billed it, so the mission counts it (missions.core.llm.limits)
    on_abandoned: Callable[[Abandoned], None] | None = None


class Unparsed(BaseModel):
    """An answer that is no valid output, as the model wrote it (the output of an InvalidOutput's `spent`)."""

    content: str


@dataclass
class LLMResult:
    output: BaseModel
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    repaired: bool = False


def validation_errors(exc: ValidationError) -> str:
    """A validation's errors, `field.path: message` each, as a model reads them back when asked again."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(the answer)'}: {e['msg']}" for e in exc.errors())


@runtime_checkable
class LLMProvider(Protocol):
    name: str

    def complete(self, request: LLMRequest) -> LLMResult: ...


@runtime_checkable
class Probed(Protocol):
    """A provider that can tell, with its cheapest call, whether its endpoint answers (for GET /ready)."""

    def probe(self) -> None:
        """Returns when the endpoint answered; raises LLMError when it did not."""
        ...


# what a capability supplies to answer offline: its stage requests -> valid outputs
OfflinePolicy = Callable[[LLMRequest], BaseModel | dict[str, Any]]
