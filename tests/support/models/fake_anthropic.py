"""A real, local server speaking Anthropic's Messages API, for the CLI's end-to-end tests: the anthropic
SDK in a child process talks to it as to api.anthropic.com. Answers are scripted in a FIFO queue (as
tests.support.models.fake_openai's); a request that asks to stream gets the answer as server-sent events."""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.models.recorded_llm import anthropic_message, anthropic_sse


class FakeAnthropic:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._answers: deque[tuple[dict[str, Any], int, int]] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def enqueue(self, answer: dict[str, Any], tokens_in: int = 10, tokens_out: int = 5) -> None:
        self._answers.append((answer, tokens_in, tokens_out))

    def __enter__(self) -> FakeAnthropic:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    scripted = fake._answers.popleft() if fake._answers else None
                if self.path != "/v1/messages" or scripted is None:
                    self._send(
                        500,
                        "application/json",
                        json.dumps(
                            {"type": "error", "error": {"type": "api_error", "message": "nothing scripted"}}
                        ).encode(),
                    )
                    return
                answer, tokens_in, tokens_out = scripted
                if body.get("stream"):
                    self._send(200, "text/event-stream", anthropic_sse(answer, body["model"], tokens_in, tokens_out))
                else:
                    message = anthropic_message(answer, body["model"], tokens_in, tokens_out)
                    self._send(200, "application/json", json.dumps(message).encode())

            def _send(self, status: int, content_type: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
