"""Amazon Bedrock through the Converse API (boto3), structured output through tool use.

Converse has no JSON-schema response format; a tool does the same job on every model that supports
tools: the stage's output model becomes the one tool's input schema and `toolChoice` forces the model
to call it, so the answer is the tool call's input (an object, validated as the stage's model). When
the request carries `on_text` (the runner's way to put model output on the mission's event stream),
ConverseStream is used and each piece of the tool input is handed over as it arrives.

One attempt per call: the client is made with botocore's retries off (total_max_attempts=1), so the
retries, breaker, fallback and usage accounting are the shared ones (missions.adapters.llm.resilient).
botocore's timeouts are the client's, not a call's: the client waits for each read at most what an
attempt at the ceiling's limit may take (missions.core.llm.limits), a stream stops at its own attempt's
time, and the shared deadline check keeps a retry from starting past the stage's time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from missions.adapters.llm.resilient import Answer, ResilientProvider, RetryableCall, schema_name
from missions.core.cost.pricing import foundation_model_id
from missions.core.llm.limits import (
    DEFAULT_FIRST_TOKEN_SECONDS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TOKENS_PER_SECOND,
    attempt_timeout,
)
from missions.core.llm.provider import LLMError, LLMRequest

# worth retrying: Bedrock is busy, throttles, or the model is loading (https://docs.aws.amazon.com/bedrock/
# latest/APIReference/API_runtime_Converse.html#API_runtime_Converse_Errors); the rest is final
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "ServiceQuotaExceededException",
        "ModelStreamErrorException",
    }
)


class BedrockConverse:
    """One attempt at a structured completion through Converse (or ConverseStream)."""

    name = "bedrock"

    def __init__(self, client: Any, control: Callable[[], Any] | None = None):
        """`client`: a bedrock-runtime client; `control`: makes the bedrock (control plane) client that
        `probe` asks, on first use (only GET /ready needs it)."""
        self._client = client
        self._control = control

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionClosedError,
            ConnectionError,
            ReadTimeoutError,
            ResponseStreamingError,
        )

        params = converse_params(model, request)
        try:
            if request.on_text is not None:
                return self._stream(model, params, request, timeout)
            response = self._client.converse(**params)
        except ClientError as exc:
            raise _classified(exc, model, request) from exc
        except (ReadTimeoutError, ConnectionClosedError, ResponseStreamingError) as exc:
            # sent, and no (whole) answer in time: retried, and counted as possibly billed
            raise RetryableCall(f"{type(exc).__name__}: {exc}", abandoned=True) from exc
        except ConnectionError as exc:  # the endpoint could not be reached: retried
            raise RetryableCall(f"{type(exc).__name__}: {exc}") from exc
        except BotoCoreError as exc:
            raise LLMError(f"{model} call failed for stage '{request.stage}': {exc}") from exc
        content = response.get("output", {}).get("message", {}).get("content", [])
        tool_input = next((block["toolUse"].get("input") for block in content if "toolUse" in block), None)
        text = "".join(block.get("text", "") for block in content)
        answer = tool_input if tool_input is not None else text
        return _answer(model, request, answer, response.get("usage", {}), response.get("stopReason"))

    def _stream(self, model: str, params: dict[str, Any], request: LLMRequest, timeout: float) -> Answer:
        assert request.on_text is not None
        ends = time.monotonic() + timeout  # the client's read timeout bounds each read, not the whole stream
        response = self._client.converse_stream(**params)
        pieces: list[str] = []
        usage: dict[str, Any] = {}
        stop: str | None = None
        for event in response["stream"]:
            if time.monotonic() > ends:
                raise RetryableCall(f"the answer took longer than {timeout:.1f} s", abandoned=True)
            delta = event.get("contentBlockDelta", {}).get("delta", {})
            piece = delta.get("toolUse", {}).get("input") or delta.get("text")
            if piece:
                pieces.append(piece)
                request.on_text(piece)
            if "messageStop" in event:
                stop = event["messageStop"].get("stopReason")
            if "metadata" in event:
                usage = event["metadata"].get("usage", {})
        return _answer(model, request, "".join(pieces), usage, stop)

    def probe(self, model: str, timeout: float) -> None:
        """GetFoundationModel on the control plane: the model exists here and this role may see it."""
        from botocore.exceptions import BotoCoreError, ClientError

        if self._control is None:
            return
        try:
            self._control().get_foundation_model(modelIdentifier=foundation_model_id(model))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in TRANSIENT_CODES:
                raise RetryableCall(f"{code}: {exc}") from exc
            raise LLMError(f"{model}: {code}: {exc}") from exc
        except BotoCoreError as exc:
            raise RetryableCall(f"{type(exc).__name__}: {exc}") from exc


def converse_params(model: str, request: LLMRequest) -> dict[str, Any]:
    """The Converse request: system prompts apart, turns alternating from the user's, one forced tool."""
    system = [{"text": m["content"]} for m in request.messages if m.get("role") == "system" and m.get("content")]
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        role = "assistant" if message.get("role") == "assistant" else "user"
        if message.get("role") == "system" or not message.get("content"):
            continue
        if turns and turns[-1]["role"] == role:  # Converse wants the roles to alternate: join a run of one
            turns[-1]["content"].append({"text": message["content"]})
        else:
            turns.append({"role": role, "content": [{"text": message["content"]}]})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"text": f"Answer for stage '{request.stage}'."}]})
    tool = schema_name(request.output_model)
    inference: dict[str, Any] = {"maxTokens": request.max_tokens or DEFAULT_MAX_TOKENS}  # the provider's, always set
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    params: dict[str, Any] = {
        "modelId": model,
        "messages": turns,
        "inferenceConfig": inference,
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": tool,
                        "description": f"Give the answer of stage '{request.stage}' as this tool's input.",
                        "inputSchema": {"json": request.output_model.model_json_schema()},
                    }
                }
            ],
            "toolChoice": {"tool": {"name": tool}},
        },
    }
    if system:
        params["system"] = system
    return params


def _answer(model: str, request: LLMRequest, content: Any, usage: Mapping[str, Any], stop: str | None) -> Answer:
    if content in (None, "", {}):
        raise LLMError(f"{model} returned no answer for stage '{request.stage}'")
    return Answer(
        content=content if isinstance(content, dict) else str(content),
        model=model,
        tokens_in=int(usage.get("inputTokens", 0) or 0),
        tokens_out=int(usage.get("outputTokens", 0) or 0),
        cut_off=stop == "max_tokens",
    )


def _classified(exc: Any, model: str, request: LLMRequest) -> Exception:
    error = exc.response.get("Error", {})
    code, message = error.get("Code", ""), error.get("Message", str(exc))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in TRANSIENT_CODES or (isinstance(status, int) and status >= 500):
        return RetryableCall(f"{code or 'HTTP ' + str(status)}: {message}")
    return LLMError(f"{model} rejected the request for stage '{request.stage}' ({code}): {message}")


class BedrockProvider(ResilientProvider):
    """Bedrock Converse with the shared retries, breaker, fallback and usage accounting (`options`: see
    ResilientProvider). `control_client`: the bedrock control plane's, for `probe` (made on first use)."""

    def __init__(
        self,
        *,
        region: str | None = None,
        default_model: str = "amazon.nova-lite-v1:0",
        client: Any = None,
        control_client: Any = None,
        **options: Any,
    ):
        timeout = attempt_timeout(
            options.get("max_tokens", DEFAULT_MAX_TOKENS),
            options.get("tokens_per_second", DEFAULT_TOKENS_PER_SECOND),
            options.get("first_token_seconds", DEFAULT_FIRST_TOKEN_SECONDS),
        )
        if client is None:
            client = _client("bedrock-runtime", region, timeout)

        def control() -> Any:
            return control_client if control_client is not None else _client("bedrock", region, timeout)

        super().__init__(BedrockConverse(client, control), default_model=default_model, **options)


def _client(service: str, region: str | None, timeout: float) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(read_timeout=timeout, connect_timeout=min(timeout, 10.0), retries={"total_max_attempts": 1})
    return boto3.client(service, region_name=region, config=config)  # type: ignore[call-overload]


__all__ = ["BedrockConverse", "BedrockProvider", "converse_params"]
