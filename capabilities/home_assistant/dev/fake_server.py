"""A fake Home Assistant on localhost: HA's REST paths, answered from a SampleHome over real HTTP.

So RestHomeAssistant is tested against real sockets, status codes and headers, not mocks, and the
conformance suite can hold it to the same answers as the SampleHome it wraps. The wire format is
HA's (ISO times, history as one list per entity with minimal points, plain-text error log and
templates, 401 "401: Unauthorized" without the right bearer token). Switches simulate a house in
trouble: `fail(status, times=N, retry_after=...)`, `slow(seconds)`, `down()` / `up()`.

Standard library only (http.server in threads): it serves tests and local demos, never AWS.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from capabilities.home_assistant.dev.fake_websocket import serve_websocket
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.dev.sample_data import NEED_ATTRIBUTE_DOMAINS, home_zone
from capabilities.home_assistant.ha.port import HABadRequest, HAError, HAUnknownEntity, HistoryPoint, State

DEFAULT_TOKEN = "sample-long-lived-access-token"


@dataclass(frozen=True)
class Received:
    """A request the fake received (never its token: only whether it was the right one)."""

    method: str
    path: str
    query: dict[str, list[str]]
    authorized: bool


@dataclass
class _Trouble:
    status: int = 0
    failures_left: int = 0
    retry_after: str | None = None
    delay: float = 0.0
    delays_left: int | None = None  # None: every request
    requests: list[Received] = field(default_factory=list)


class _Answer(Exception):
    """An HTTP answer other than 200, raised from a route."""

    def __init__(self, status: int, body: Any, content_type: str = "application/json") -> None:
        super().__init__(status)
        self.status, self.body, self.content_type = status, body, content_type


class FakeHomeAssistant:
    """The fake server: `start()` (or `with`) binds a free localhost port; `url` is its base URL."""

    def __init__(self, home: SampleHome | None = None, *, token: str = DEFAULT_TOKEN, port: int = 0) -> None:
        self.home = home if home is not None else SampleHome()
        self.token = token
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._trouble = _Trouble()
        self._connections: set[socket.socket] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._trouble.requests)

    # ------------------------------------------------------------------ switches

    def fail(self, status: int = 500, *, times: int = 1, retry_after: float | str | None = None) -> None:
        """Answer the next `times` requests with `status` (and a Retry-After header, if given)."""
        with self._lock:
            self._trouble.status, self._trouble.failures_left = status, times
            self._trouble.retry_after = None if retry_after is None else str(retry_after)

    def slow(self, seconds: float, *, times: int | None = None) -> None:
        """Wait `seconds` before answering (the next `times` requests; None: all of them)."""
        with self._lock:
            self._trouble.delay, self._trouble.delays_left = seconds, times

    def healthy(self) -> None:
        """No more failures or delays."""
        with self._lock:
            self._trouble.failures_left, self._trouble.delay, self._trouble.delays_left = 0, 0.0, None

    def down(self) -> None:
        """Stop listening: connections are refused until `up()`."""
        self._close()

    def up(self) -> None:
        if self._server is None:
            self.start()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeHomeAssistant:
        fake = self

        class Handler(_Handler):
            owner = fake

        server = _Server(("127.0.0.1", self._port), Handler)
        server.daemon_threads = True
        server.block_on_close = False  # a slow answer still sleeping must not hold up a stop
        self._port = server.server_address[1]
        self._stopping.clear()
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._close()

    def _close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        with self._lock:
            connections, self._connections = self._connections, set()
        for connection in connections:  # a host that is down drops the connections it had too
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeHomeAssistant:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ handling

    def _admit(
        self, method: str, path: str, query: dict[str, list[str]], authorized: bool
    ) -> tuple[float, int, str | None]:
        with self._lock:
            trouble = self._trouble
            trouble.requests.append(Received(method, path, query, authorized))
            delay = 0.0
            if trouble.delay and (trouble.delays_left is None or trouble.delays_left > 0):
                delay = trouble.delay
                if trouble.delays_left is not None:
                    trouble.delays_left -= 1
            status, retry_after = 0, None
            if trouble.failures_left > 0:
                trouble.failures_left -= 1
                status, retry_after = trouble.status, trouble.retry_after
            return delay, status, retry_after

    def handle(self, method: str, target: str, headers: Any, body: bytes) -> tuple[int, Any, str, dict[str, str]]:
        """(status, body, content type, extra headers) for one request."""
        parts = urlsplit(target)
        path = parts.path
        query = parse_qs(parts.query, keep_blank_values=True)
        authorized = headers.get("Authorization") == f"Bearer {self.token}"
        delay, status, retry_after = self._admit(method, path, query, authorized)
        if delay:
            self._stopping.wait(delay)
        if status:
            extra = {"Retry-After": retry_after} if retry_after is not None else {}
            return status, {"message": f"Simulated failure (HTTP {status})"}, "application/json", extra
        if not authorized:
            return 401, "401: Unauthorized", "text/plain", {}
        try:
            with self._lock:
                result, content_type = self._route(method, path, query, body)
            return 200, result, content_type, {}
        except _Answer as answer:
            return answer.status, answer.body, answer.content_type, {}

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> tuple[Any, str]:
        home = self.home
        segments = [unquote(s) for s in path.strip("/").split("/")]
        if segments[:1] != ["api"]:
            raise _Answer(404, "404: Not Found", "text/plain")
        rest = segments[1:]
        routes: dict[tuple[str, ...], Callable[[], tuple[Any, str]]] = {
            ("GET",): lambda: ({"message": "API running."}, "application/json"),
            ("GET", "config"): lambda: (home.config().model_dump(mode="json"), "application/json"),
            ("GET", "services"): lambda: (
                [d.model_dump(mode="json", exclude_defaults=True) for d in home.services()],
                "application/json",
            ),
            ("GET", "states"): lambda: ([_state(s) for s in home.states()], "application/json"),
            ("GET", "error_log"): lambda: (home.error_log(), "text/plain"),
            ("POST", "template"): lambda: (home.render_template(str(_body(body).get("template", ""))), "text/plain"),
            ("POST", "config", "core", "check_config"): lambda: (
                home.check_config().model_dump(mode="json"),
                "application/json",
            ),
        }
        key = (method, *[s for s in rest if s])
        try:
            if key in routes:
                return routes[key]()
            if method == "GET" and len(rest) == 2 and rest[0] == "states":
                return _state(home.state(rest[1])), "application/json"
            if method == "GET" and rest[:2] == ["history", "period"]:
                return self._history(rest[2] if len(rest) > 2 else None, query), "application/json"
            if method == "GET" and rest[:1] == ["logbook"]:
                return self._logbook(rest[1] if len(rest) > 1 else None, query), "application/json"
            if rest[:3] == ["config", "automation", "config"] and len(rest) == 4:
                return self._automation(method, rest[3], body), "application/json"
            if method == "GET" and rest[:3] == ["config", "script", "config"] and len(rest) == 4:
                return home.script_config(rest[3]), "application/json"
            if method == "POST" and rest[:1] == ["services"] and len(rest) == 3:
                try:
                    changed = home.call_service(rest[1], rest[2], _body(body))
                except HABadRequest as exc:
                    if str(exc).endswith(" not found"):  # HA raises a bare HTTPBadRequest on ServiceNotFound
                        raise _Answer(400, "400: Bad Request", "text/plain") from exc
                    raise
                return [_state(s) for s in changed], "application/json"
        except HAUnknownEntity as exc:
            message = "Entity not found." if rest[:1] == ["states"] else "Resource not found"
            raise _Answer(404, {"message": message}) from exc
        except (HABadRequest, ValueError) as exc:
            raise _Answer(400, {"message": str(exc)}) from exc
        except HAError as exc:  # pragma: no cover - the sample raises no other
            raise _Answer(500, {"message": str(exc)}) from exc
        known = ("states", "history", "logbook", "config", "services", "template", "error_log")
        if rest and rest[0] in known:
            raise _Answer(405, "405: Method Not Allowed", "text/plain")
        raise _Answer(404, "404: Not Found", "text/plain")

    def _automation(self, method: str, automation_id: str, body: bytes) -> Any:
        if method == "GET":
            return self.home.automation_config(automation_id)
        if method == "POST":
            self.home.save_automation_config(automation_id, _body(body))
            return {"result": "ok"}
        if method == "DELETE":
            try:
                self.home.delete_automation_config(automation_id)
            except HAUnknownEntity:
                raise _Answer(400, {"message": "Resource not found"}) from None  # as HA answers it
            return {"result": "ok"}
        raise _Answer(405, "405: Method Not Allowed", "text/plain")

    def _history(self, start_text: str | None, query: dict[str, list[str]]) -> list[list[dict[str, Any]]]:
        now = self.home.now
        start = _when(start_text) if start_text else now - timedelta(days=1)
        end = _when(query["end_time"][0]) if query.get("end_time") else start + timedelta(days=1)
        ids = [e for e in (query.get("filter_entity_id") or [""])[0].split(",") if e]
        if not ids:
            raise _Answer(400, {"message": "filter_entity_id is missing"})
        minimal, no_attributes = "minimal_response" in query, "no_attributes" in query
        found = self.home.history(ids, start, end, minimal_response=minimal, no_attributes=no_attributes)
        return [
            [
                _point(p, full=index == 0 or not minimal or _domain(p.entity_id) in NEED_ATTRIBUTE_DOMAINS)
                for index, p in enumerate(points)
            ]
            for points in found.values()
        ]

    def _logbook(self, start_text: str | None, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        start = _when(start_text) if start_text else self.home.now - timedelta(days=1)
        end = _when(query["end_time"][0]) if query.get("end_time") else start + timedelta(days=1)
        ids = [e for e in (query.get("entity") or [""])[0].split(",") if e]
        entries = self.home.logbook(start, end, entity_ids=ids)
        return [_logbook_entry(entry.model_dump(exclude_none=True)) for entry in entries]


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (timeouts, `down()`) is expected here: no traceback on stderr."""
        import sys

        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeHomeAssistant

    def setup(self) -> None:
        super().setup()
        with self.owner._lock:
            self.owner._connections.add(self.connection)

    def finish(self) -> None:
        with self.owner._lock:
            self.owner._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    protocol_version = "HTTP/1.1"
    server_version = "Python/3 aiohttp/3.11"
    wbufsize = -1  # headers and body leave in one write (no Nagle / delayed-ACK stall per answer)
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        if urlsplit(self.path).path == "/api/websocket" and self.headers.get("Upgrade", "").lower() == "websocket":
            owner = self.owner
            serve_websocket(self.connection, self.path, self.headers, owner.token, owner.home, owner._lock)
            self.close_connection = True
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, payload, content_type, extra = self.owner.handle(self.command, self.path, self.headers, body)
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", f"{content_type}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test): nothing to do

    do_GET = do_POST = do_DELETE = do_PUT = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `requests` instead."""


@contextmanager
def serve(home: SampleHome | None = None, *, token: str = DEFAULT_TOKEN) -> Iterator[FakeHomeAssistant]:
    """A fake HA on a free port for the duration of the block (its base URL is `.url`)."""
    fake = FakeHomeAssistant(home, token=token)
    with fake:
        yield fake


# ---------------------------------------------------------------------- HA's wire format


def _body(body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    try:
        data = json.loads(body)
    except ValueError:
        raise _Answer(400, {"message": "Invalid JSON specified"}) from None
    if not isinstance(data, dict):
        raise _Answer(400, {"message": "Data should be a JSON object."})
    return data


def _when(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace(" ", "+"))  # a "+" left unescaped in a query is a space
    except ValueError:
        raise _Answer(400, {"message": "Invalid datetime"}) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=home_zone())  # HA reads a time without offset in its own zone
    return moment


def _domain(entity_id: str) -> str:
    return entity_id.split(".", 1)[0]


def _state(state: State) -> dict[str, Any]:
    return {
        "entity_id": state.entity_id,
        "state": state.state,
        "attributes": state.attributes,
        "last_changed": state.last_changed.isoformat(),
        "last_reported": (state.last_reported or state.last_updated).isoformat(),
        "last_updated": state.last_updated.isoformat(),
        "context": state.context.model_dump() if state.context else None,
    }


def _point(point: HistoryPoint, *, full: bool) -> dict[str, Any]:
    if not full:
        return {"state": point.state, "last_changed": point.last_changed.isoformat()}
    return {
        "entity_id": point.entity_id,
        "state": point.state,
        "attributes": point.attributes,
        "last_changed": point.last_changed.isoformat(),
        "last_updated": point.last_updated.isoformat(),
    }


def _logbook_entry(entry: dict[str, Any]) -> dict[str, Any]:
    entry["when"] = entry["when"].isoformat()
    return entry
