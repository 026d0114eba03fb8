"""The OpenAI provider: structured outputs over the Chat Completions API.

This is the only module that imports the openai SDK, and it imports it only when a client is made or a
call handled: importing this module (a stage handler that may call a model) costs its cold start
no SDK; the first model call pays for it (about 0.5 s in Lambda), once per container.

`OpenAIChat` makes one attempt per call (the client is built with ``max_retries=0``); retries, the
circuit breaker, the fallback model, output repair and usage accounting are the ones every provider
shares (missions.adapters.llm.resilient).
"""

from __future__ import annotations

import json
import math
import time
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from missions.adapters.llm.resilient import Answer, RetryableCall, SdkProvider, schema_name
from missions.core.llm.provider import LLMError, LLMRequest

if TYPE_CHECKING:
    import openai

# OpenAI's reasoning models refuse `max_tokens` and take `max_completion_tokens` (reasoning and answer);
# everything else, and every OpenAI-compatible server (llama.cpp's reads `max_tokens`; only its 2026 builds
# also know the other name), takes `max_tokens`
_COMPLETION_TOKENS_MODELS = ("o1", "o3", "o4", "gpt-5")
_JSON_OBJECT_INSTRUCTION = "Reply with a single JSON object, and nothing else, that conforms to this JSON schema:\n"


class OpenAIChat:
    """One attempt at a structured completion on an OpenAI-compatible endpoint.

    It remembers the models whose server refused response_format=json_schema (older models, many
    compatible servers), so the doomed call is skipped next time and JSON mode is asked instead."""

    name = "openai"

    def __init__(self, client: Any, stream: bool = False):
        self._client, self._stream = client, stream
        self._json_object_models: set[str] = set()

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        import httpx2  # the HTTP client this SDK uses (its own, not httpx)
        import openai

        json_object = model in self._json_object_models
        try:
            try:
                response = self._create(model, request, timeout, json_object=json_object)
            except openai.APIStatusError as exc:
                if exc.status_code == 400 and not json_object and _rejects_json_schema(exc):
                    # Older models and many compatible servers only know JSON mode: degrade once.
                    self._json_object_models.add(model)
                    response = self._create(model, request, timeout, json_object=True)
                else:
                    raise
            if isinstance(response, Answer):
                return response
        except openai.APIStatusError as exc:
            if not _is_transient_status(exc):
                raise LLMError(
                    f"{model} rejected the request for stage '{request.stage}' (HTTP {exc.status_code}): {exc.message}"
                ) from exc
            raise RetryableCall(f"HTTP {exc.status_code}: {exc.message}", _retry_after(exc)) from exc
        except openai.APIConnectionError as exc:  # includes APITimeoutError: retried
            raise RetryableCall(f"{type(exc).__name__}: {exc.message}", abandoned=_sent(exc.__cause__)) from exc
        except httpx2.TransportError as exc:  # a stream's read fails as httpx2's own error, after the request went
            raise RetryableCall(f"{type(exc).__name__}: {exc}", abandoned=_sent(exc)) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"{model} call failed for stage '{request.stage}': {exc}") from exc
        content, used_model = _content_of(response, model, request)
        usage = getattr(response, "usage", None)
        return Answer(
            content=content,
            model=used_model,
            tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
            cut_off=getattr(response.choices[0], "finish_reason", None) == "length",
        )

    def _create(self, model: str, request: LLMRequest, timeout: float, *, json_object: bool) -> Any:
        """The completion; streamed when streaming is on and the request takes the text as it comes
        (`on_text`): each piece goes to it, and the whole is the answer (the last chunk carries the usage)."""
        params = self._params(model, request, json_object=json_object)
        if not self._stream or request.on_text is None:
            return self._client.chat.completions.create(**params, timeout=timeout)
        stream = self._client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}, timeout=timeout
        )
        parts: list[str] = []
        used_model, usage, refusal, finish = model, None, "", None
        ends = time.monotonic() + timeout  # the client's timeout bounds each read, not the whole stream
        with stream:
            for chunk in stream:
                if time.monotonic() > ends:
                    raise RetryableCall(f"the answer took longer than {timeout:.1f} s", abandoned=True)
                used_model = getattr(chunk, "model", None) or used_model
                usage = getattr(chunk, "usage", None) or usage
                for choice in getattr(chunk, "choices", None) or []:
                    finish = getattr(choice, "finish_reason", None) or finish
                    piece = getattr(choice.delta, "content", None)
                    refusal += getattr(choice.delta, "refusal", None) or ""
                    if piece:
                        parts.append(piece)
                        request.on_text(piece)
        if not parts:
            reason = f"refused: {refusal}" if refusal else "returned empty content"
            raise LLMError(f"{used_model} {reason} for stage '{request.stage}'")
        return Answer(
            content="".join(parts),
            model=used_model,
            tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
            cut_off=finish == "length",
        )

    def probe(self, model: str, timeout: float) -> None:
        """GET /models/{model}: the endpoint answers and knows the model (no tokens spent). A server without
        that route (llama.cpp's answers 404 "File Not Found", not OpenAI's model_not_found, and serves its one
        model whatever a request names) is probed by listing its models instead."""
        import openai

        try:
            try:
                self._client.models.retrieve(model, timeout=timeout)
            except openai.NotFoundError as exc:
                if getattr(exc, "code", None) == "model_not_found":
                    raise
                self._client.models.list(timeout=timeout)
        except openai.APIStatusError as exc:
            if _is_transient_status(exc):
                raise RetryableCall(f"HTTP {exc.status_code}: {exc.message}") from exc
            raise LLMError(f"{model}: HTTP {exc.status_code}: {exc.message}") from exc
        except openai.OpenAIError as exc:
            raise RetryableCall(f"{type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _params(model: str, request: LLMRequest, *, json_object: bool) -> dict[str, Any]:
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
                    "name": schema_name(request.output_model),
                    "schema": schema,
                    # Pydantic schemas rarely meet strict mode's rules (all fields required,
                    # no defaults, additionalProperties false); we validate client-side instead.
                    "strict": False,
                },
            }
        params: dict[str, Any] = {"model": model, "messages": messages, "response_format": response_format}
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:  # always set by the shared provider (missions.core.llm.limits)
            limit = "max_completion_tokens" if model.startswith(_COMPLETION_TOKENS_MODELS) else "max_tokens"
            params[limit] = request.max_tokens
        return params


class ClientRefused(Exception):
    """The SDK could not make a client (no key, say): its reason, without importing the SDK to name its error."""


class OpenAIProvider(SdkProvider):
    """Calls an OpenAI-compatible endpoint and returns validated pydantic outputs (see the module doc and
    SdkProvider). `stream`: ask for server-sent chunks, so a stage can stream its text as it comes."""

    vendor = "OpenAI"
    refused = ClientRefused
    standard_model = "gpt-4o-mini"

    def __init__(self, *, stream: bool = False, **options: Any):
        self._stream = stream
        super().__init__(**options)

    def _connect(self, api_key: str | None, base_url: str | None, timeout: float) -> openai.OpenAI:
        import openai

        try:
            return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)
        except openai.OpenAIError as exc:
            raise ClientRefused(str(exc)) from exc

    def _api(self, client: Any) -> OpenAIChat:
        return OpenAIChat(client, self._stream)


# ---------------------------------------------------------------------- helpers


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


def _sent(cause: BaseException | None) -> bool:
    """Whether a failed attempt's request reached the server (so it may have generated, and billed): every
    transport failure but one in connecting."""
    import httpx2

    return not isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout)


def _rejects_json_schema(exc: openai.APIStatusError) -> bool:
    """A 400 about response_format means the server lacks structured outputs, not a bad prompt."""
    param = (getattr(exc, "param", None) or "").lower()
    text = f"{exc.message} {exc.body}".lower()
    return param.startswith("response_format") or "response_format" in text or "json_schema" in text


def _is_transient_status(exc: openai.APIStatusError) -> bool:
    if exc.status_code >= 500:
        return True
    if exc.status_code == 429:
        # An exhausted quota also comes back as 429, but waiting will not refill it.
        return getattr(exc, "code", None) != "insufficient_quota"
    return False


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


__all__ = ["OpenAIChat", "OpenAIProvider"]
