"""The OpenAI provider: structured outputs over the Chat Completions API.

This is the only module that imports the openai SDK. The runtime imports it lazily, so cold
starts of stages that never call a model (and of the offline provider) do not pay for the SDK.

Resilience lives here rather than in the SDK (the client is built with ``max_retries=0``) so
that retries, the circuit breaker and the fallback model share one clock, one sleep, one deadline
(the stage's remaining time) and one error vocabulary (``LLMError`` / ``TransientLLMError``) that
the pipeline understands. Retries are tenacity's, waiting what the server asks (Retry-After) or
backing off exponentially. The breaker stays our own: it shares the injected clock with the
deadline (so tests drive it deterministically) and allows one trial call when half-open, which
pybreaker's wall clock would make untestable without patching.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import openai
import tenacity
from pydantic import BaseModel, ValidationError

from missions.core.llm import LLMError, LLMRequest, LLMResult, TransientLLMError
from missions.core.pricing import Price, cost_usd, unpriced
from missions.core.redaction import redact

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0

_JSON_OBJECT_INSTRUCTION = "Reply with a single JSON object, and nothing else, that conforms to this JSON schema:\n"


class OpenAIProvider:
    """Calls an OpenAI-compatible endpoint and returns validated pydantic outputs.

    One instance lives for the life of a Lambda container, so the breaker state and the
    per-model "no json_schema support" memory carry across invocations of that container.
    """

    name = "openai"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        models: dict[str, str] | None = None,
        default_model: str = "gpt-4o-mini",
        fallback_model: str | None = None,
        prices: Mapping[str, Price] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        breaker_threshold: int = 5,
        breaker_cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._secrets = (api_key,) if api_key else ()  # a server may quote the key back in its error
        if client is None:
            try:
                # SDK retries are off: ours are the only ones, so backoff and breaker agree.
                client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)
            except openai.OpenAIError as exc:  # e.g. no key in the arguments or OPENAI_API_KEY
                raise LLMError(redact(f"cannot create the OpenAI client: {exc}", self._secrets)) from exc
        self._client = client
        self._models = dict(models or {})
        self._default_model = default_model
        self._fallback_model = fallback_model
        self._prices = dict(prices or {})
        missing = unpriced([default_model, fallback_model, *self._models.values()], self._prices)
        if missing:  # a call the budget cannot count would let a mission spend without limit
            raise LLMError(f"no price for model(s) {missing}: add them to the price overrides")
        self._max_retries = max(0, max_retries)
        self._timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self._breaker_threshold = max(1, breaker_threshold)
        self._breaker_cooldown_s = breaker_cooldown_s
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False
        # Models whose server refused response_format=json_schema: skip the doomed call next time.
        self._json_object_models: set[str] = set()

    # ------------------------------------------------------------------ protocol

    def model_for(self, role: str) -> str:
        """The model an agent role uses (roles can be routed to cheaper or stronger models)."""
        return self._models.get(role, self._default_model)

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
            raise type(exc)(clean) from exc

    def _complete(self, request: LLMRequest) -> LLMResult:
        self._enter_breaker()
        started = time.perf_counter()
        primary = request.model or self.model_for(request.role)  # the mission's or its agent version's first
        try:
            try:
                result = self._complete_with(primary, request)
            except TransientLLMError as primary_exc:
                fallback = request.fallback_model or self._fallback_model
                if not fallback or fallback == primary:
                    raise
                try:
                    result = self._complete_with(fallback, request)
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

    def _complete_with(self, model: str, request: LLMRequest) -> LLMResult:
        response = self._create_with_retries(model, request)
        content, used_model = self._content_of(response, model, request)
        output, repaired = _parse(content, request.output_model, used_model, request.stage)
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        return LLMResult(
            output=output,
            model=used_model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost_usd(used_model, tokens_in, tokens_out, self._prices, asked=model),
            repaired=repaired,
        )

    def _create_with_retries(self, model: str, request: LLMRequest) -> Any:
        """Calls the server, retrying transient failures with capped exponential backoff (tenacity),
        never past the request's deadline: a call gets only the time its stage has left."""
        json_object = model in self._json_object_models

        def create() -> Any:
            nonlocal json_object
            params = self._params(model, request, json_object=json_object)
            if request.deadline is not None:
                left = request.deadline - self._clock()
                if left <= 0:
                    raise _OutOfTime(f"no time left for stage '{request.stage}'")
                params["timeout"] = min(self._timeout, left)
            try:
                return self._client.chat.completions.create(**params)
            except openai.APIStatusError as exc:
                if exc.status_code == 400 and not json_object and _rejects_json_schema(exc):
                    # Older models and many compatible servers only know JSON mode: degrade once.
                    json_object = True
                    self._json_object_models.add(model)
                    return create()
                if not _is_transient_status(exc):
                    raise LLMError(
                        f"{model} rejected the request for stage '{request.stage}' "
                        f"(HTTP {exc.status_code}): {exc.message}"
                    ) from exc
                raise
            except openai.APIConnectionError:  # includes APITimeoutError: retried
                raise
            except openai.OpenAIError as exc:
                raise LLMError(f"{model} call failed for stage '{request.stage}': {exc}") from exc

        def wait(state: tenacity.RetryCallState) -> float:
            return _backoff(state.attempt_number - 1, _failure(state))

        def stop(state: tenacity.RetryCallState) -> bool:
            if state.attempt_number > self._max_retries:
                return True
            return request.deadline is not None and self._clock() + wait(state) >= request.deadline

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type((openai.APIStatusError, openai.APIConnectionError)),
            stop=stop,
            wait=wait,
            sleep=self._sleep,
        )
        try:
            return retrying(create)
        except tenacity.RetryError as exhausted:
            failure = _failure(exhausted.last_attempt)
            raise TransientLLMError(
                f"{model} still failing for stage '{request.stage}' after "
                f"{exhausted.last_attempt.attempt_number} attempt(s): {_describe(failure)}"
            ) from failure
        except _OutOfTime as late:
            raise TransientLLMError(str(late)) from late

    def _params(self, model: str, request: LLMRequest, *, json_object: bool) -> dict[str, Any]:
        schema = request.output_model.model_json_schema()
        if json_object:
            instruction = {
                "role": "system",
                "content": _JSON_OBJECT_INSTRUCTION + json.dumps(schema, separators=(",", ":")),
            }
            messages = [instruction, *request.messages]
            response_format: dict[str, Any] = {"type": "json_object"}
        else:
            messages = list(request.messages)
            response_format = {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(request.output_model),
                    "schema": schema,
                    # Pydantic schemas rarely meet strict mode's rules (all fields required,
                    # no defaults, additionalProperties false); we validate client-side instead.
                    "strict": False,
                },
            }
        params: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "response_format": response_format,
        }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        return params

    @staticmethod
    def _content_of(response: Any, model: str, request: LLMRequest) -> tuple[str, str]:
        used_model = getattr(response, "model", None) or model
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise LLMError(f"{used_model} returned no choices for stage '{request.stage}'")
        message = choices[0].message
        content = getattr(message, "content", None)
        if not content:
            refusal = getattr(message, "refusal", None)
            reason = f"refused: {refusal}" if refusal else "returned empty content"
            raise LLMError(f"{used_model} {reason} for stage '{request.stage}'")
        return content, used_model

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


def _schema_name(model: type[BaseModel]) -> str:
    """OpenAI wants ^[a-zA-Z0-9_-]{1,64}$; generic pydantic names contain brackets."""
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in model.__name__)
    return name[:64] or "output"


def _rejects_json_schema(exc: openai.APIStatusError) -> bool:
    """A 400 about response_format means the server lacks structured outputs, not a bad prompt."""
    param = (getattr(exc, "param", None) or "").lower()
    text = f"{exc.message} {exc.body}".lower()
    return param.startswith("response_format") or "response_format" in text or "json_schema" in text


class _OutOfTime(Exception):
    """The stage's time is up: no call (or retry) may start."""


def _failure(state: tenacity.RetryCallState | tenacity.Future) -> openai.APIError:
    """The transient failure an attempt ended with (only those are retried)."""
    outcome = state.outcome if isinstance(state, tenacity.RetryCallState) else state
    assert outcome is not None
    failure = outcome.exception()
    assert isinstance(failure, openai.APIError)
    return failure


def _is_transient_status(exc: openai.APIStatusError) -> bool:
    if exc.status_code >= 500:
        return True
    if exc.status_code == 429:
        # An exhausted quota also comes back as 429, but waiting will not refill it.
        return getattr(exc, "code", None) != "insufficient_quota"
    return False


def _backoff(retry: int, exc: openai.APIError) -> float:
    """Seconds to wait before retry number ``retry`` (0-based): the server's word, else 2^n."""
    retry_after = _retry_after(exc)
    if retry_after is not None:
        return min(max(0.0, retry_after), BACKOFF_CAP_S)
    return min(BACKOFF_BASE_S * (2.0**retry), BACKOFF_CAP_S)


def _retry_after(exc: openai.APIError) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            try:  # HTTP-date form
                seconds = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                continue
        if math.isfinite(seconds):
            return seconds
    return None


def _describe(exc: openai.APIError) -> str:
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}: {exc.message}" if status else f"{type(exc).__name__}: {exc.message}"


def _parse(content: str, output_model: type[BaseModel], model: str, stage: str) -> tuple[BaseModel, bool]:
    """Validates the answer; models without strict schemas often wrap JSON in prose or fences."""
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
    raise LLMError(
        f"{model} answer for stage '{stage}' is not a valid {output_model.__name__}, "
        f"even after JSON repair: {problem}; content: {snippet!r}"
    )
