"""Recorded model APIs for the Bedrock and Anthropic providers: the real SDKs (boto3, anthropic) parse
bodies recorded in each API's wire format, so no network and no key are needed.

- Bedrock: `converse_response` is a Converse body (for botocore's Stubber); `bedrock_stream_body` encodes
  ConverseStream events as AWS event-stream frames, served through botocore's `before-send` hook
  (`serve_bedrock`), so the SDK's own event-stream parser reads them.
- Anthropic: `anthropic_message` is a Messages body, `anthropic_sse` the same answer as the SSE events
  the API streams; `AnthropicTransport` serves them to the real client through an httpx MockTransport.
- `RecordedAnswers`: a mission's right answers, recorded from the offline model (each capability's offline
  policy) per stage, so a mission replayed through a provider ends as it ends offline.
"""

from __future__ import annotations

import binascii
import json
import re
import struct
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

import httpx2 as httpx  # the HTTP client the anthropic SDK uses (httpx objects are refused)
from pydantic import BaseModel

from missions.adapters.llm.scripted import ScriptedProvider
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMRequest, LLMResult

STAGE = re.compile(r"stage '([^']+)'")


# --------------------------------------------------------------------------- Bedrock


def converse_response(answer: dict[str, Any], tokens_in: int = 100, tokens_out: int = 30) -> dict[str, Any]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "tooluse_1", "name": "answer", "input": answer}}],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out},
        "metrics": {"latencyMs": 12},
    }


def _frame(event_type: str, payload: dict[str, Any], message_type: str = "event") -> bytes:
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", message_type),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


def bedrock_stream_body(answer: dict[str, Any], tokens_in: int = 100, tokens_out: int = 30, pieces: int = 3) -> bytes:
    """ConverseStream's events for a tool call whose input is `answer`, written in `pieces`."""
    text = json.dumps(answer)
    size = max(1, -(-len(text) // pieces))
    frames = [
        _frame("messageStart", {"role": "assistant"}),
        _frame("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "a"}}}),
    ]
    for start in range(0, len(text), size):
        delta = {"contentBlockIndex": 0, "delta": {"toolUse": {"input": text[start : start + size]}}}
        frames.append(_frame("contentBlockDelta", delta))
    frames += [
        _frame("contentBlockStop", {"contentBlockIndex": 0}),
        _frame("messageStop", {"stopReason": "tool_use"}),
        _frame(
            "metadata",
            {
                "usage": {"inputTokens": tokens_in, "outputTokens": tokens_out, "totalTokens": tokens_in + tokens_out},
                "metrics": {"latencyMs": 12},
            },
        ),
    ]
    return b"".join(frames)


class _Raw:
    """What botocore reads an HTTP response's body from (urllib3's response, as far as it goes)."""

    def __init__(self, body: bytes):
        self._body = body

    def stream(self, amt: int = 1024, decode_content: bool = True) -> Any:
        for start in range(0, len(self._body), amt):
            yield self._body[start : start + amt]

    def read(self, amt: int | None = None) -> bytes:
        body, self._body = self._body, b""
        return body

    def close(self) -> None:
        pass


def bedrock_client(service: str = "bedrock-runtime") -> Any:
    """A client of Bedrock at an address no one serves, with fake credentials: moto (when a test runs the
    emulation) answers only the AWS addresses it knows, so this client's requests reach `serve_bedrock`."""
    import boto3

    return boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url=f"https://{service}.recorded.invalid",
        aws_access_key_id="recorded",
        aws_secret_access_key="recorded",
    )


def serve_bedrock(client: Any, answer_for: Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]) -> list[dict]:
    """Answer the client's Converse and ConverseStream requests with `answer_for(request body)`: (status,
    headers, body) as the service would send them. Returns the request bodies, in order."""
    from botocore.awsrequest import AWSResponse

    seen: list[dict[str, Any]] = []

    def send(request: Any, **_: Any) -> AWSResponse:
        body = json.loads(request.body or b"{}")
        seen.append(body)
        status, headers, raw = answer_for(body)
        return AWSResponse(request.url, status, headers, _Raw(raw))

    client.meta.events.register_first("before-send", send)
    return seen


# --------------------------------------------------------------------------- Anthropic


def anthropic_message(answer: dict[str, Any], model: str, tokens_in: int = 100, tokens_out: int = 30) -> dict:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "tool_use", "id": "toolu_01", "name": "answer", "input": answer}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
    }


def anthropic_sse(
    answer: dict[str, Any], model: str, tokens_in: int = 100, tokens_out: int = 30, pieces: int = 3
) -> bytes:
    """The Messages API's stream of the same answer: message_start, the tool_use block's input_json_delta
    pieces, message_delta with the output tokens, message_stop."""
    text = json.dumps(answer)
    size = max(1, -(-len(text) // pieces))
    start = anthropic_message({}, model, tokens_in, 1)
    start["content"] = []
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_01", "name": "answer", "input": {}},
            },
        ),
    ]
    for offset in range(0, len(text), size):
        delta = {"type": "input_json_delta", "partial_json": text[offset : offset + size]}
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": tokens_out},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


class AnthropicTransport(httpx.BaseTransport):
    """Serves POST /v1/messages (and GET /v1/models/<id>) with `answer_for(request body)`; keeps the bodies."""

    def __init__(self, answer_for: Callable[[dict[str, Any]], httpx.Response]):
        self._answer_for = answer_for
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.startswith("/v1/models/"):
            model = request.url.path.rsplit("/", 1)[1]
            return httpx.Response(
                200, json={"type": "model", "id": model, "display_name": model, "created_at": "2025-10-01T00:00:00Z"}
            )
        body = json.loads(request.content or b"{}")
        with self._lock:
            self.requests.append(body)
        return self._answer_for(body)


# --------------------------------------------------------------------------- a mission's right answers


class RecordedAnswers:
    """The offline model's answers, recorded per stage while a mission runs offline (`recorder`), then
    handed out again in the same order per stage (`next_for`: the stage is named in the request's tool)."""

    def __init__(self) -> None:
        self._answers: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._lock = threading.Lock()

    def recorder(self) -> Any:
        answers = self

        class Recorder:
            name = "scripted"

            def complete(self, request: LLMRequest) -> LLMResult:
                policy = registry.load(request.envelope.capability).offline_policy
                result = ScriptedProvider(policy).complete(request)
                output = result.output
                assert isinstance(output, BaseModel)
                with answers._lock:
                    answers._answers[request.stage].append(output.model_dump(mode="json"))
                return result

        return Recorder()

    def next_for(self, description: str) -> dict[str, Any]:
        found = STAGE.search(description)
        assert found, description
        with self._lock:
            return self._answers[found.group(1)].popleft()

    def replay(self) -> RecordedAnswers:
        """A copy to hand out again from the start (one per mission replayed)."""
        copy = RecordedAnswers()
        with self._lock:
            copy._answers.update({stage: deque(queue) for stage, queue in self._answers.items()})
        return copy

    def left(self) -> int:
        return sum(len(queue) for queue in self._answers.values())
