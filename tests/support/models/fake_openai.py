"""A real, local OpenAI-compatible HTTP server for tests.

Tests drive the real openai SDK against it, so request encoding, status-to-exception mapping
and headers such as ``retry-after`` are exercised exactly as in production, without network
access or a key. Responses are scripted in a FIFO queue; an empty queue answers 500.
POST /v1/embeddings is not scripted: it answers `FakeOpenAI.embedding_of(text, dimensions)`
for every input and records the request in `embedding_requests`.

    with FakeOpenAI() as fake:
        fake.enqueue(content='{"answer": 42}')
        client = openai.OpenAI(api_key="test-key", base_url=fake.base_url, max_retries=0)
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
DEFAULT_EMBEDDING_DIMENSIONS = 1536  # text-embedding-3-small without `dimensions`


@dataclass
class ScriptedResponse:
    status: int = 200
    body: Any = None
    content: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    model: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None):
    """The error envelope the OpenAI API uses, which the SDK unpacks into its exceptions."""
    kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
    return {
        "error": {
            "message": message,
            "type": kind.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }


class FakeOpenAI:
    """Serves POST /v1/chat/completions (and /v1/embeddings) on 127.0.0.1 (ephemeral port) from a daemon thread."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self._queue: deque[ScriptedResponse] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-openai-{port}",
            daemon=True,
        )
        self._thread.start()

    # ------------------------------------------------------------------ scripting

    def enqueue(
        self,
        status: int = 200,
        body: Any = None,
        content: str | None = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        *,
        model: str | None = None,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
    ) -> FakeOpenAI:
        """Queues one response.

        ``body`` (dict/list: sent as JSON; str/bytes: sent raw) wins over ``content``, which is
        wrapped in a chat.completion. A non-200 status without a body gets an OpenAI-style error.
        ``model`` overrides the echoed model; the token counts fill ``usage``.
        """
        with self._lock:
            self._queue.append(
                ScriptedResponse(
                    status=status,
                    body=body,
                    content=content,
                    headers=dict(headers or {}),
                    delay=delay,
                    model=model,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                )
            )
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()  # wakes handlers sleeping on a scripted delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ serving

    def _next(self, request: dict[str, Any], headers: dict[str, str]) -> ScriptedResponse:
        with self._lock:
            self.requests.append(request)
            self.request_headers.append(headers)
            if self._queue:
                return self._queue.popleft()
        return ScriptedResponse(status=500, body=error_body(500, "FakeOpenAI: no scripted response left"))

    @staticmethod
    def _completion(request: dict[str, Any], scripted: ScriptedResponse) -> dict[str, Any]:
        created = int(time.time())
        return {
            "id": f"chatcmpl-fake-{created}-{id(scripted):x}",
            "object": "chat.completion",
            "created": created,
            "model": scripted.model or request.get("model", "unknown"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": scripted.content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": scripted.prompt_tokens,
                "completion_tokens": scripted.completion_tokens,
                "total_tokens": scripted.prompt_tokens + scripted.completion_tokens,
            },
        }

    @staticmethod
    def embedding_of(text: str, dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS) -> list[float]:
        """The unit vector the fake answers for a text: a pure function of (text, dimensions)."""
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        rng = random.Random(seed)
        vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def _embeddings(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.embedding_requests.append(request)
        inputs = request.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        dimensions = int(request.get("dimensions") or DEFAULT_EMBEDDING_DIMENSIONS)
        data = []
        for index, text in enumerate(inputs):
            vector = self.embedding_of(str(text), dimensions)
            if request.get("encoding_format") == "base64":  # the SDK's default: little-endian float32
                embedding: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            else:
                embedding = vector
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(len(str(text).split()) for text in inputs)
        return {
            "object": "list",
            "data": data,
            "model": request.get("model", "unknown"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: one request per connection, so no idle keep-alive threads outlive close().
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.split("?")[0] == EMBEDDINGS_PATH:
                    try:
                        embedding_request = json.loads(raw or b"{}")
                    except ValueError:
                        self._send(400, error_body(400, "FakeOpenAI: body is not JSON"), {})
                        return
                    self._send(200, fake._embeddings(embedding_request), {})
                    return
                if self.path.split("?")[0] != CHAT_COMPLETIONS_PATH:
                    self._send(404, error_body(404, f"FakeOpenAI: no route {self.path}"), {})
                    return
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, error_body(400, "FakeOpenAI: body is not JSON"), {})
                    return
                scripted = fake._next(request, {k.lower(): v for k, v in self.headers.items()})
                if scripted.delay and fake._closing.wait(scripted.delay):
                    return  # server closing: drop the connection
                if scripted.body is not None:
                    body = scripted.body
                elif scripted.status == 200:
                    body = fake._completion(request, scripted)
                else:
                    body = error_body(scripted.status, f"FakeOpenAI scripted {scripted.status}")
                self._send(scripted.status, body, scripted.headers)

            def do_GET(self) -> None:
                self._send(404, error_body(404, f"FakeOpenAI: no route {self.path}"), {})

            def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
                if isinstance(body, bytes):
                    data = body
                elif isinstance(body, str):
                    data = body.encode()
                else:
                    data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (e.g. its timeout fired first)

        return Handler
