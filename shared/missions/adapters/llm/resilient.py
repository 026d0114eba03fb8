"""What every model provider shares: retries, a circuit breaker, a fallback model, output validation
with JSON repair, usage accounting, and credentials kept out of errors.

A provider is a `ResilientProvider` around a `ModelBackend`: the backend knows one API (OpenAI's Chat
Completions, Bedrock's Converse, Anthropic's Messages) and makes exactly one attempt per call, sorting
each failure into "worth retrying" (`RetryableCall`, with the server's Retry-After if it gave one) or
final (`LLMError`). Everything else lives here, once, so the three providers cannot drift apart: their
SDKs' own retries are off, so backoff, breaker and fallback share one clock, one sleep, one deadline
(the stage's remaining time) and one error vocabulary (`LLMError` / `TransientLLMError`) that the
pipeline understands.

Every call is bounded (missions.core.llm.limits): the request's output limit, capped at the provider's
ceiling (`max_tokens`), is always sent, and each attempt may take the time that limit needs at the
throughput floor (`first_token_seconds` + limit / `tokens_per_second`), never past the stage's deadline.
An attempt the client abandons after sending it (a backend says so: `RetryableCall(abandoned=True)`) is
reported to the request's `on_abandoned` with its estimated cost, whether a later attempt answers or not.

Retries are tenacity's, waiting what the server asks (Retry-After) or backing off exponentially. The
breaker stays our own: it shares the injected clock with the deadline (so tests drive it
deterministically) and allows one trial call when half-open, which pybreaker's wall clock would make
untestable without patching.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import tenacity
from pydantic import BaseModel, ValidationError

from missions.core.cost.pricing import Price, cost_usd, unpriced
from missions.core.llm.limits import (
    DEFAULT_FIRST_TOKEN_SECONDS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TOKENS_PER_SECOND,
    Abandoned,
    attempt_timeout,
    estimated_prompt_tokens,
    output_limit,
)
from missions.core.llm.provider import (
    InvalidOutput,
    LLMError,
    LLMRequest,
    LLMResult,
    TransientLLMError,
    Unparsed,
    validation_errors,
)
from missions.core.redaction import redact

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0


@dataclass
class Answer:
    """One successful attempt: the structured output (JSON text, or the object a tool call carried), the
    model that answered, and the tokens it counted."""

    content: str | dict[str, Any]
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    # the model stopped at the output limit (OpenAI's finish_reason "length", Anthropic's and Bedrock's
    # stop reason "max_tokens"): its JSON unclosed, which JSON repair would close into a valid but truncated
    # output (a summary ending mid-sentence, a list short of items), so it is an invalid answer
    cut_off: bool = False


class RetryableCall(Exception):
    """An attempt failed in a way worth retrying (429, 5xx, throttling, a timeout, a dropped connection).
    `retry_after`: seconds the server asked to wait, if it said. `abandoned`: the request was sent and the
    client stopped waiting for its answer (a timeout, a connection dropped after sending), so the server
    may have generated, and billed, up to the limit; a refusal (429, 5xx) or a connection never made is not."""

    def __init__(self, description: str, retry_after: float | None = None, *, abandoned: bool = False):
        super().__init__(description)
        self.description = description
        self.retry_after = retry_after
        self.abandoned = abandoned


class ModelBackend(Protocol):
    """One model API. `call` makes exactly one attempt within `timeout` seconds and raises `RetryableCall`
    or `LLMError`; `probe` proves, with the API's cheapest call, that the endpoint answers."""

    name: str

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        """`request.max_tokens` is set (the provider bounds it): send it."""
        ...

    def probe(self, model: str, timeout: float) -> None: ...


class ResilientProvider:
    """The provider protocol (missions.core.llm.provider) over a backend, with the resilience described above.

    One instance lives for the life of a Lambda container, so the breaker state carries across
    invocations of that container.
    """

    def __init__(
        self,
        backend: ModelBackend,
        *,
        models: dict[str, str] | None = None,
        default_model: str,
        fallback_model: str | None = None,
        prices: Mapping[str, Price] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        tokens_per_second: float = DEFAULT_TOKENS_PER_SECOND,
        first_token_seconds: float = DEFAULT_FIRST_TOKEN_SECONDS,
        max_retries: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        breaker_threshold: int = 5,
        breaker_cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        secrets: tuple[str, ...] = (),
    ):
        self.name = backend.name
        self._backend = backend
        self._models = dict(models or {})
        self._default_model = default_model
        self._fallback_model = fallback_model
        self._prices = dict(prices or {})
        missing = unpriced([default_model, fallback_model, *self._models.values()], self._prices)
        if missing:  # a call the budget cannot count would let a mission spend without limit
            raise LLMError(f"no price for model(s) {missing}: add them to the price overrides")
        if max_tokens < 1 or tokens_per_second <= 0 or first_token_seconds <= 0:
            raise LLMError("max_tokens, tokens_per_second and first_token_seconds must be positive")
        self._max_retries = max(0, max_retries)
        self._max_tokens = max_tokens
        self._tokens_per_second = tokens_per_second
        self._first_token_seconds = first_token_seconds
        self._sleep = sleep
        self._clock = clock
        self._secrets = secrets  # a server may quote the key back in its error
        self._breaker_threshold = max(1, breaker_threshold)
        self._breaker_cooldown_s = breaker_cooldown_s
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False

    # ------------------------------------------------------------------ protocol

    def model_for(self, role: str) -> str:
        """The model an agent role uses (roles can be routed to cheaper or stronger models)."""
        return self._models.get(role, self._default_model)

    def output_limit(self, asked: int | None) -> int:
        """The limit a call carries: the one asked for (the runner always asks one), never past the ceiling."""
        return output_limit(asked, None, self._max_tokens)

    def timeout_for(self, max_tokens: int) -> float:
        """Seconds one attempt with this output limit may take (before the stage's deadline caps it)."""
        return attempt_timeout(max_tokens, self._tokens_per_second, self._first_token_seconds)

    def complete(self, request: LLMRequest) -> LLMResult:
        """One structured completion, with retries, a fallback model and a circuit breaker.

        Raises ``TransientLLMError`` when the failure is worth retrying later (the stage can be
        re-run by the state machine) and ``LLMError`` when it is not (bad request, bad output).
        Their messages quote the server, never a credential: they travel on to logs, the
        execution's history and the mission's errors.
        """
        try:
            return self._complete(request)
        except LLMError as exc:
            message = str(exc)
            clean = redact(message, self._secrets)
            if clean == message:
                raise
            copy = type(exc)(clean)
            copy.__dict__.update(vars(exc))  # what an InvalidOutput carries (the answer, its cost) goes along
            raise copy from exc

    def probe(self) -> None:
        """GET /ready: the endpoint answers for the default model (one attempt, a short timeout)."""
        try:
            self._backend.probe(self._default_model, min(self._first_token_seconds, 5.0))
        except RetryableCall as exc:
            raise TransientLLMError(redact(exc.description, self._secrets)) from exc
        except LLMError as exc:
            raise LLMError(redact(str(exc), self._secrets)) from exc

    def _complete(self, request: LLMRequest) -> LLMResult:
        request = dataclasses.replace(request, max_tokens=self.output_limit(request.max_tokens))
        self._enter_breaker()
        started = time.perf_counter()
        primary = request.model or self.model_for(request.role)  # the mission's or its agent version's first
        attempts = itertools.count(1)  # across the primary's retries and the fallback's: see LLMRequest.on_retry
        try:
            try:
                result = self._complete_with(primary, request, attempts)
            except TransientLLMError as primary_exc:
                fallback = request.fallback_model or self._fallback_model
                if not fallback or fallback == primary:
                    raise
                try:
                    result = self._complete_with(fallback, request, attempts)
                except TransientLLMError as fallback_exc:
                    raise TransientLLMError(
                        f"primary model {primary!r} failed ({primary_exc}); "
                        f"fallback model {fallback!r} failed too ({fallback_exc})"
                    ) from fallback_exc
        except TransientLLMError:
            self._record_failure()
            raise
        except LLMError:
            # The server answered, just not usefully: that says nothing bad about its health.
            self._record_success()
            raise
        except BaseException:
            self._release_trial()  # never leave the breaker stuck half-open on a bug
            raise
        self._record_success()
        result.latency_ms = (time.perf_counter() - started) * 1000
        return result

    # ------------------------------------------------------------------ one model

    def _complete_with(self, model: str, request: LLMRequest, attempts: Iterator[int]) -> LLMResult:
        answer = self._call_with_retries(model, request, attempts)
        used_model = answer.model or model
        spent = cost_usd(used_model, answer.tokens_in, answer.tokens_out, self._prices, asked=model)
        try:
            if answer.cut_off:
                raise cut_off(answer, request, used_model)
            output, repaired = parse_output(answer.content, request.output_model, used_model, request.stage)
        except InvalidOutput as invalid:  # generated and paid for: the stage counts it against the mission's budget
            unparsed = Unparsed(content=invalid.content)
            invalid.spent = LLMResult(unparsed, used_model, answer.tokens_in, answer.tokens_out, spent)
            raise
        return LLMResult(
            output=output,
            model=used_model,
            tokens_in=answer.tokens_in,
            tokens_out=answer.tokens_out,
            cost_usd=spent,
            repaired=repaired,
        )

    def _call_with_retries(self, model: str, request: LLMRequest, attempts: Iterator[int]) -> Answer:
        """Calls the backend, retrying transient failures with capped exponential backoff (tenacity),
        never past the request's deadline: a call gets only the time its stage has left."""
        limit = request.max_tokens or self._max_tokens  # bounded in _complete

        def attempt() -> Answer:
            number = next(attempts)
            if number > 1 and request.on_retry is not None:
                request.on_retry(number)  # what an earlier attempt streamed is not the answer
            timeout = self.timeout_for(limit)
            if request.deadline is not None:
                left = request.deadline - self._clock()
                if left <= 0:
                    raise _OutOfTime(f"no time left for stage '{request.stage}'")
                timeout = min(timeout, left)
            started = time.perf_counter()
            try:
                return self._backend.call(model, request, timeout)
            except RetryableCall as failed:
                if failed.abandoned:
                    self._abandoned(model, request, number, timeout, failed, time.perf_counter() - started)
                raise

        def wait(state: tenacity.RetryCallState) -> float:
            return backoff(state.attempt_number - 1, _failure(state).retry_after)

        def stop(state: tenacity.RetryCallState) -> bool:
            if state.attempt_number > self._max_retries:
                return True
            return request.deadline is not None and self._clock() + wait(state) >= request.deadline

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(RetryableCall), stop=stop, wait=wait, sleep=self._sleep
        )
        try:
            return retrying(attempt)
        except tenacity.RetryError as exhausted:
            failure = _failure(exhausted.last_attempt)
            raise TransientLLMError(
                f"{model} still failing for stage '{request.stage}' after "
                f"{exhausted.last_attempt.attempt_number} attempt(s): {failure.description}"
            ) from (failure.__cause__ or failure)  # the SDK's own error, as its callers know it
        except _OutOfTime as late:
            raise TransientLLMError(str(late)) from late

    def _abandoned(
        self, model: str, request: LLMRequest, number: int, timeout: float, failed: RetryableCall, elapsed: float
    ) -> None:
        """Tell the caller what an attempt it gave up on may have cost: the prompt (estimated) and the limit."""
        if request.on_abandoned is None:
            return
        limit = request.max_tokens or self._max_tokens
        tokens_in = estimated_prompt_tokens(request.messages, request.output_model)
        request.on_abandoned(
            Abandoned(
                model=model,
                attempt=number,
                max_tokens=limit,
                timeout_s=round(timeout, 3),
                tokens_in=tokens_in,
                tokens_out=limit,
                cost_usd=cost_usd(model, tokens_in, limit, self._prices, asked=model),
                reason=redact(failed.description, self._secrets),
                elapsed_ms=round(elapsed * 1000, 3),
            )
        )

    # ------------------------------------------------------------------ circuit breaker

    def _enter_breaker(self) -> None:
        """Fails fast while the circuit is open, so a dead endpoint does not burn Lambda time."""
        with self._lock:
            if self._opened_at is None:
                return
            waited = self._clock() - self._opened_at
            if waited < self._breaker_cooldown_s or self._trial_in_flight:
                remaining = max(0.0, self._breaker_cooldown_s - waited)
                raise TransientLLMError(
                    f"circuit open after {self._consecutive_failures} consecutive transient "
                    f"failures; next trial in {remaining:.1f}s"
                )
            self._trial_in_flight = True  # half-open: this call is the one trial

    def _record_success(self) -> None:
        with self._lock:
            self._consecutive_failures = 0
            self._opened_at = None
            self._trial_in_flight = False

    def _release_trial(self) -> None:
        with self._lock:
            self._trial_in_flight = False

    def _record_failure(self) -> None:
        with self._lock:
            self._consecutive_failures += 1
            if self._trial_in_flight or self._consecutive_failures >= self._breaker_threshold:
                self._opened_at = self._clock()
            self._trial_in_flight = False


# ---------------------------------------------------------------------- helpers


class SdkProvider(ResilientProvider):
    """A provider on a vendor SDK's client, made from a key, a base URL and a timeout (or given, in tests).
    `options`: the shared resilience and accounting (ResilientProvider: models, fallback_model, prices,
    max_tokens, tokens_per_second, first_token_seconds, max_retries, sleep, breaker_threshold,
    breaker_cooldown_s, clock). The client's own timeout is the longest an attempt may take (each call
    passes its own, shorter one where the SDK allows)."""

    vendor: ClassVar[str]
    refused: ClassVar[type[Exception]]  # what the SDK raises when it cannot make a client (e.g. no key)
    standard_model: ClassVar[str]

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        default_model: str | None = None,
        client: Any = None,
        **options: Any,
    ):
        secrets = (api_key,) if api_key else ()
        if client is None:
            timeout = attempt_timeout(
                options.get("max_tokens", DEFAULT_MAX_TOKENS),
                options.get("tokens_per_second", DEFAULT_TOKENS_PER_SECOND),
                options.get("first_token_seconds", DEFAULT_FIRST_TOKEN_SECONDS),
            )
            try:
                client = self._connect(api_key, base_url, timeout)
            except self.refused as exc:
                raise LLMError(redact(f"cannot create the {self.vendor} client: {exc}", secrets)) from exc
        backend = self._api(client)
        model = default_model or self.standard_model
        super().__init__(backend, default_model=model, secrets=secrets, **options)

    def _connect(self, api_key: str | None, base_url: str | None, timeout: float) -> Any:
        """The SDK's client, with the SDK's own retries off: the shared ones are the only ones, so backoff and
        breaker agree."""
        raise NotImplementedError

    def _api(self, client: Any) -> ModelBackend:
        raise NotImplementedError


class _OutOfTime(Exception):
    """The stage's time is up: no call (or retry) may start."""


def _failure(state: tenacity.RetryCallState | tenacity.Future) -> RetryableCall:
    """The transient failure an attempt ended with (only those are retried)."""
    outcome = state.outcome if isinstance(state, tenacity.RetryCallState) else state
    assert outcome is not None
    failure = outcome.exception()
    assert isinstance(failure, RetryableCall)
    return failure


def backoff(retry: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number ``retry`` (0-based): the server's word, else 2^n."""
    if retry_after is not None:
        return min(max(0.0, retry_after), BACKOFF_CAP_S)
    return min(BACKOFF_BASE_S * (2.0**retry), BACKOFF_CAP_S)


def schema_name(model: type[BaseModel]) -> str:
    """A name every API accepts for a schema or tool (^[a-zA-Z0-9_-]{1,64}$); generic pydantic names
    contain brackets."""
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in model.__name__)
    return name[:64] or "output"


def cut_off(answer: Answer, request: LLMRequest, model: str) -> InvalidOutput:
    """An answer that stopped at its output limit: invalid, and the repair asks for a shorter one."""
    content = answer.content if isinstance(answer.content, str) else json.dumps(answer.content)
    # a server may stop sooner than the limit asked (its own cap): then that is the limit that cut it
    ours = request.max_tokens and (answer.tokens_out == 0 or answer.tokens_out >= request.max_tokens)
    limit = f"max_tokens {request.max_tokens}" if ours else "the server's limit"
    return InvalidOutput(
        f"{model} answer for stage '{request.stage}' was cut off at the output limit "
        f"({answer.tokens_out} tokens, {limit})",
        content=content,
        errors=f"the answer was cut off at the output limit ({limit}): write a shorter, complete answer",
    )


def parse_output(
    content: str | dict[str, Any], output_model: type[BaseModel], model: str, stage: str
) -> tuple[BaseModel, bool]:
    """Validates the answer; models without strict schemas often wrap JSON in prose or fences. A tool call's
    input (an object already) is validated as it is. An answer that is not valid is an `InvalidOutput`
    carrying the answer and its errors, so the stage can show them to the model and ask again."""
    if isinstance(content, dict):
        try:
            return output_model.model_validate(content), False
        except ValidationError as exc:
            raise InvalidOutput(
                f"{model} answer for stage '{stage}' is not a valid {output_model.__name__}: {exc}",
                content=json.dumps(content, ensure_ascii=False, default=str),
                errors=validation_errors(exc),
            ) from exc
    try:
        return output_model.model_validate_json(content), False
    except ValidationError as first:
        problem: Exception = first
    import json_repair  # only for answers that are not valid as they are: a stage's cold start does not pay it

    try:
        candidate = json_repair.repair_json(content, return_objects=True)
    except Exception as exc:  # json_repair is best effort; an internal failure means "no"
        candidate, problem = None, exc
    if candidate not in (None, ""):
        try:
            return output_model.model_validate(candidate), True
        except ValidationError as exc:
            problem = exc
    snippet = content if len(content) <= 200 else content[:200] + "..."
    raise InvalidOutput(
        f"{model} answer for stage '{stage}' is not a valid {output_model.__name__}, "
        f"even after JSON repair: {problem}; content: {snippet!r}",
        content=content,
        errors=validation_errors(problem) if isinstance(problem, ValidationError) else f"not JSON: {problem}",
    )


__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_CAP_S",
    "Answer",
    "ModelBackend",
    "ResilientProvider",
    "RetryableCall",
    "backoff",
    "parse_output",
    "schema_name",
]
