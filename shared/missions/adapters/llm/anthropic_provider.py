"""Anthropic through its SDK (the Messages API), structured output through tool use.

As on Bedrock, the stage's output model is the input schema of one tool the model must call
(`tool_choice` {"type": "tool"}); the answer is that call's input. With `on_text` on the request, the
answer is streamed (`messages.stream`) and each piece of the tool input is handed over as it arrives.

One attempt per call (the client is made with ``max_retries=0``); retries, breaker, fallback and usage
accounting are the shared ones (missions.adapters.llm.resilient). The SDK is imported by this module
only, and this module only by the runtime when the environment names Anthropic.
"""

from __future__ import annotations

import time
from typing import Any

import anthropic
import httpx2  # the HTTP client this SDK uses (its own, not httpx)

from missions.adapters.llm.resilient import Answer, RetryableCall, SdkProvider, schema_name
from missions.core.llm.limits import DEFAULT_MAX_TOKENS
from missions.core.llm.provider import LLMError, LLMRequest


class AnthropicMessages:
    """One attempt at a structured completion through the Messages API."""

    name = "anthropic"

    def __init__(self, client: Any):
        self._client = client

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        params = messages_params(model, request)
        try:
            if request.on_text is not None:
                ends = time.monotonic() + timeout  # the client's timeout bounds each read, not the whole stream
                with self._client.messages.stream(**params, timeout=timeout) as stream:
                    for event in stream:
                        if time.monotonic() > ends:
                            raise RetryableCall(f"the answer took longer than {timeout:.1f} s", abandoned=True)
                        if event.type == "input_json" and event.partial_json:
                            request.on_text(event.partial_json)
                        elif event.type == "text" and event.text:
                            request.on_text(event.text)
                    message = stream.get_final_message()
            else:
                message = self._client.messages.create(**params, timeout=timeout)
        except anthropic.APIStatusError as exc:
            if _is_transient_status(exc.status_code):
                raise RetryableCall(f"HTTP {exc.status_code}: {exc.message}", _retry_after(exc)) from exc
            raise LLMError(
                f"{model} rejected the request for stage '{request.stage}' (HTTP {exc.status_code}): {exc.message}"
            ) from exc
        except anthropic.APIConnectionError as exc:  # includes APITimeoutError: retried
            raise RetryableCall(f"{type(exc).__name__}: {exc.message}", abandoned=_sent(exc.__cause__)) from exc
        except httpx2.TransportError as exc:  # a stream's read fails as httpx2's own error, after the request went
            raise RetryableCall(f"{type(exc).__name__}: {exc}", abandoned=_sent(exc)) from exc
        except anthropic.AnthropicError as exc:
            raise LLMError(f"{model} call failed for stage '{request.stage}': {exc}") from exc
        tool_input = next((block.input for block in message.content if block.type == "tool_use"), None)
        text = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
        content = tool_input if isinstance(tool_input, dict) else text
        if not content:
            raise LLMError(f"{model} returned no answer for stage '{request.stage}' (stop: {message.stop_reason})")
        return Answer(
            content=content,
            model=message.model or model,
            tokens_in=int(message.usage.input_tokens or 0),
            tokens_out=int(message.usage.output_tokens or 0),
            cut_off=message.stop_reason == "max_tokens",
        )

    def probe(self, model: str, timeout: float) -> None:
        """GET /v1/models/{model}: the key is good and the model exists (no tokens spent)."""
        try:
            self._client.models.retrieve(model, timeout=timeout)
        except anthropic.APIStatusError as exc:
            if _is_transient_status(exc.status_code):
                raise RetryableCall(f"HTTP {exc.status_code}: {exc.message}") from exc
            raise LLMError(f"{model}: HTTP {exc.status_code}: {exc.message}") from exc
        except anthropic.AnthropicError as exc:
            raise RetryableCall(f"{type(exc).__name__}: {exc}") from exc


def messages_params(model: str, request: LLMRequest) -> dict[str, Any]:
    """The Messages request: the system prompt apart, turns alternating from the user's, one forced tool."""
    system = "\n\n".join(m["content"] for m in request.messages if m.get("role") == "system" and m.get("content"))
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        if message.get("role") == "system" or not message.get("content"):
            continue
        role = "assistant" if message.get("role") == "assistant" else "user"
        if turns and turns[-1]["role"] == role:  # consecutive turns of one role are joined
            turns[-1]["content"] += "\n\n" + message["content"]
        else:
            turns.append({"role": role, "content": message["content"]})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": f"Answer for stage '{request.stage}'."})
    tool = schema_name(request.output_model)
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,  # the Messages API requires one
        "messages": turns,
        "tools": [
            {
                "name": tool,
                "description": f"Give the answer of stage '{request.stage}' as this tool's input.",
                "input_schema": request.output_model.model_json_schema(),
            }
        ],
        "tool_choice": {"type": "tool", "name": tool},
    }
    if system:
        params["system"] = system
    if request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def _sent(cause: BaseException | None) -> bool:
    """Whether a failed attempt's request reached the server (so it may have generated, and billed): every
    transport failure but one in connecting."""
    return not isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout)


def _is_transient_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500  # 529: overloaded


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class AnthropicProvider(SdkProvider):
    """Anthropic's Messages API with the shared retries, breaker, fallback and usage accounting (see
    SdkProvider). `http_client`: an httpx client for the SDK (tests serve recorded responses)."""

    vendor = "Anthropic"
    refused = anthropic.AnthropicError
    standard_model = "claude-haiku-4-5"

    def __init__(self, *, http_client: Any = None, **options: Any):
        self._http_client = http_client
        super().__init__(**options)

    def _connect(self, api_key: str | None, base_url: str | None, timeout: float) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0, http_client=self._http_client
        )

    def _api(self, client: Any) -> AnthropicMessages:
        return AnthropicMessages(client)


__all__ = ["AnthropicMessages", "AnthropicProvider", "messages_params"]
