"""The real-model tier's recording proxy (tests/support/models/llama_server.py): it keeps each exchange, and a client
that gives up reaches the server as a closed connection, as it would without the proxy (llama.cpp's server
then stops generating instead of holding its one slot for an answer nobody reads)."""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.support.models.llama_server import RecordingProxy


@contextmanager
def upstream(hold: threading.Event, left: threading.Event) -> Iterator[str]:
    """A server that answers at once, or (while `hold` is set) only notes when its client went away."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            if hold.is_set():
                select.select([self.connection], [], [], 30)
                if not self.connection.recv(1, socket.MSG_PEEK):
                    left.set()
                return
            body = json.dumps({"choices": [{"message": {"content": "{}"}}], "usage": {"prompt_tokens": 3}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def post(base_url: str, timeout: float) -> dict:
    target = urlsplit(base_url)
    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=timeout)
    try:
        body = json.dumps({"model": "m", "response_format": {"type": "json_schema"}})
        connection.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def test_the_proxy_keeps_each_exchange():
    hold, left = threading.Event(), threading.Event()
    with upstream(hold, left) as url:
        proxy = RecordingProxy(url)
        with proxy.serving() as base_url:
            # When a chat completion goes through the proxy
            answer = post(base_url, timeout=30)
    # Then the client got the server's answer, and the proxy kept the request and the answer
    [exchange] = proxy.chat()
    assert answer["usage"] == {"prompt_tokens": 3} == exchange.answer["usage"]
    assert exchange.request["response_format"] == {"type": "json_schema"}
    assert exchange.status == 200 and not exchange.abandoned


def test_a_client_that_gives_up_reaches_the_server_as_a_closed_connection():
    # Given a server that is slow to answer
    hold, left = threading.Event(), threading.Event()
    hold.set()
    with upstream(hold, left) as url:
        proxy = RecordingProxy(url)
        with proxy.serving() as base_url:
            # When the client's timeout runs out and it closes its connection
            with pytest.raises(TimeoutError):
                post(base_url, timeout=0.3)
            # Then the server sees its connection closed, and the exchange is kept as abandoned
            assert left.wait(10), "the server never saw the client go"
    [exchange] = proxy.chat()
    assert exchange.abandoned and exchange.status == 0
