"""`missions dev`: the deployed HTTP API, on 127.0.0.1, over the embedded emulation.

Each request becomes an API Gateway HTTP API (payload v2) event for the real api or webhook
handler. What AWS does around them is played here:
- auth: in dev mode only, `Authorization: Bearer dev:<user>` names the user (the JWT
  authorizer's `sub` claim); any other request has no identity and gets 401.
- schedules: EventBridge Scheduler never fires in moto, so the server owns a clock;
  POST /_dev/clock {"advance_seconds": N} moves it and fires what fell due: the capabilities' schedules
  and users' own (the enabled ones moto's Scheduler holds in their group), through the schedule handler.
  The clock is also "today" for daily budgets: an advance past midnight (UTC) runs the reconcile
  function, which starts the missions held for a budget given afresh, as its 5-minute rule does in AWS.
- status changes: the emulation itself reports ended executions to the status function, as
  Step Functions does in AWS (missions.local.moto.stepfunctions, patch 5), which frees the user's slot.
- S3 uploads: presigned upload URLs point at /_dev/s3/<bucket>/<key> here, which stores the
  body in the emulated bucket as S3 would (an archive a user uploads for a repository).
- a handler that raises (a bug) answers 502 with a JSON message, as API Gateway does when its
  Lambda fails; the server goes on serving.
- the web page: `/`, `/ui/<file>` and `/config.json` are its files (missions.local.webpage), served
  without a handler or an identity, as a static host would.
- retention: in AWS a daily rule invokes the retention function; here, with `retention_every` (seconds),
  a thread of the server invokes it that often, under the settings' policy (`missions dev
  --retain-minutes`: ended missions archived after minutes, their bulky items pruned), so a long-running
  dev server keeps its tables, held in memory, from growing with every mission it ever ran; after each
  run the freed memory goes back to the system (`release_freed_memory`).
Memory-change triggers need nothing here: moto's stream mapping calls the stream handler.

The HTTP side is uvicorn's: it parses requests, answers malformed ones (400), keeps connections
alive, and listens with a deep backlog for bursts. The ASGI app below only reads the body (413
before reading one that is too large; 408 when a body stops arriving) and calls the handlers.
Handlers are synchronous and can be slow (a memory write runs the stream handler, which starts a
mission), so they run in worker threads, never on the event loop, each function within its own
limit (`FUNCTION_CONCURRENCY`), as Lambda's reserved concurrency bounds a function:
- api: one invocation at a time, as in one execution environment. The handler keeps per-invocation
  state in process globals (the logger's keys, the metrics it flushes at its end), as any Lambda
  handler may, since Lambda never runs two invocations in one execution environment at once, and in
  one process the emulation has one environment per function. (The router keeps its request per
  thread, missions.app.resolver: the stream function's requests never read an API call's caller.)
- stream (chat completions, event streams; a function URL in AWS): many at once, since each waits on
  a mission; webhook, uploads: a few at once (no per-invocation globals); the clock: one at a time.

Streaming, as the stream function's server sends it in AWS (missions.app.asgi): a handler
result whose `body` is an iterator of chunks (bytes or str), or whose content type is
`text/event-stream`, is sent chunk by chunk (chunked transfer encoding) as it is produced, each
chunk pulled in a worker thread (`STREAMS` at once). An iterator should yield at
least every few seconds (an SSE comment as a heartbeat will do): a client that went away is
noticed between chunks, and the iterator is then closed.
"""

from __future__ import annotations

import ctypes
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import anyio.to_thread
import uvicorn

from missions.app.asgi import ASGIScope, Receive, Reply, Send, reply_of, send_reply
from missions.app.http_event import http_event
from missions.local.emulation import LocalCloud
from missions.local.moto import DEFAULT_TIMEOUT_SECONDS, LocalContext
from missions.local.webpage import is_static, respond_static

DEV_TOKEN_PREFIX = "dev:"
MAX_BODY = 1024 * 1024  # API Gateway's own payload limit is larger; nothing here needs more
MAX_UPLOAD = 110 * 1024 * 1024  # presigned S3 uploads: the archive limit, with room to refuse bigger ones itself
S3_PREFIX = "/_dev/s3/"
CLOCK_PATH = "/_dev/clock"
BODY_TIMEOUT = 10.0  # seconds a request body may pause before the server gives up on it (408)
BACKLOG = 2048  # pending connections the listening socket queues (the kernel caps it at net.core.somaxconn)
# worker threads per function; the stream function's requests wait on missions (a chat turn, an event stream)
FUNCTION_CONCURRENCY = {"api": 1, "stream": 16, "webhook": 4, "upload": 4, "clock": 1, "static": 8}
STREAMS = 16  # streamed responses producing a chunk at once
JSON_TYPE = "application/json"

Handler = Callable[..., Any]  # a Lambda handler as the emulation calls it: (event, context, runtime=...)

_log = logging.getLogger(__name__)


def _error(status: int, message: str, *, close: bool = False) -> Reply:
    headers = [("content-type", JSON_TYPE)] + ([("connection", "close")] if close else [])
    return Reply(status, headers, json.dumps({"message": message}).encode())


class DevServer:
    def __init__(
        self,
        cloud: LocalCloud,
        host: str = "127.0.0.1",
        port: int = 8787,
        clock_start: datetime | None = None,
        *,
        body_timeout: float = BODY_TIMEOUT,
        handlers: Mapping[str, Handler] | None = None,
        retention_every: float | None = None,
    ):
        """`handlers` replaces a function's handler by its name ("api", "webhook", "schedule"): a
        test's stand-in; the real ones are functions/<name>/handler.py. `retention_every`: seconds
        between two runs of the retention function (None: never)."""
        from missions.core.triggers.specs import schedule_specs
        from missions.local.clock import LocalScheduleClock

        self.cloud = cloud
        self.clock = LocalScheduleClock(
            schedule_specs([cloud.registry.load(n) for n in cloud.capabilities]), start=clock_start or datetime.now(UTC)
        )
        self.body_timeout = body_timeout
        self._handlers = dict(handlers or {})
        # bound (and listening) now: port 0 picks a free port `url` reports at once, and a port in
        # use fails here, with OSError; connections made before `start` wait in the backlog
        self._socket = _listen(host, port)
        self._server = uvicorn.Server(
            uvicorn.Config(
                self,
                interface="asgi3",
                http="h11",
                ws="none",
                lifespan="off",
                backlog=BACKLOG,
                timeout_keep_alive=5,
                timeout_graceful_shutdown=3,
                proxy_headers=False,
                server_header=False,
                access_log=False,
                log_config=None,  # the process's logging stays as it is; uvicorn's own loggers log errors only
                log_level="error",
            )
        )
        self._limiters = {name: anyio.CapacityLimiter(n) for name, n in FUNCTION_CONCURRENCY.items()}
        self._streams = anyio.CapacityLimiter(STREAMS)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._functions: dict[str, LocalContext] = {}  # function name -> a context to copy (its configuration)
        self._retention_every = retention_every
        self._retention: threading.Thread | None = None
        self._stopping = threading.Event()
        cloud.runtime.upload_endpoint = self.url + S3_PREFIX.rstrip("/")
        cloud.runtime.now = self.clock.now  # "today" of daily budgets is the clock's, moved with it

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> DevServer:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._serve, name="missions-dev-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the dev server did not start: {self._failure!r}")
            time.sleep(0.005)
        if self._retention_every is not None:
            self._stopping.clear()
            self._retention = threading.Thread(target=self._retain, name="missions-dev-retention", daemon=True)
            self._retention.start()
        return self

    def _retain(self) -> None:
        """The retention function every `retention_every` seconds until the server stops."""
        assert self._retention_every is not None
        while not self._stopping.wait(self._retention_every):
            try:
                self.retain()
            except Exception:  # a bug: logged, and the next round tries again, as Lambda's next invocation would
                _log.exception("retention failed")
            release_freed_memory()

    def retain(self) -> Any:
        """One run of the retention function, as its daily rule invokes it in AWS: its report."""
        return self._handler("retention")({}, self._context("retention"), runtime=self.cloud.runtime)

    def _serve(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as exc:  # reported by start(); a server that stopped serves nothing more
            self._failure = exc

    def stop(self) -> None:
        self._stopping.set()
        if self._retention is not None:
            self._retention.join(timeout=30)
            self._retention = None
        if self._thread is None:
            self._socket.close()
            return
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._thread = None
        self._socket.close()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- HTTP, as API Gateway takes it -----------------------------------------------------------

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # no lifespan, no websockets
            return
        query = scope.get("query_string", b"").decode("latin-1")
        # the path as it came, still percent-encoded, as API Gateway's rawPath
        path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        headers = _headers(scope.get("headers") or [])
        function = _function_of(path)
        reply = await self._read_body(receive, headers, MAX_UPLOAD if function == "upload" else MAX_BODY)
        if isinstance(reply, bytes):
            target = f"{path}?{query}" if query else path
            reply = await anyio.to_thread.run_sync(
                self._respond, scope["method"], target, headers, reply, limiter=self._limiters[function]
            )
        elif reply is None:  # the client went away before its body arrived: nobody to answer
            return
        await send_reply(reply, send, receive, limiter=self._streams)

    async def _read_body(self, receive: Receive, headers: dict[str, str], limit: int) -> bytes | Reply | None:
        """The whole body, or the reply refusing it: 413 over the limit (by Content-Length, before
        reading it; or as a chunked body passes it), 408 when it stops arriving. None: client gone."""
        declared = headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return _error(413, "body too large", close=True)
        body = bytearray()
        while True:
            with anyio.move_on_after(self.body_timeout) as waited:
                message = await receive()
            if waited.cancelled_caught:
                return _error(408, f"the request body stopped arriving for {self.body_timeout:g} s", close=True)
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > limit:
                return _error(413, "body too large", close=True)
            if not message.get("more_body", False):
                return bytes(body)

    # -- what AWS would do ---------------------------------------------------------------------

    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """One request, answered whole: (status, headers, body). A handler's bug raises here."""
        reply = self._route(method, target, headers, body)
        return reply.status, dict(reply.headers), reply.whole()

    def _respond(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Reply:
        try:
            return self._route(method, target, headers, body)
        except Exception as exc:  # a bug: say so as API Gateway would, with a 502
            _log.exception("%s %s failed", method, target.partition("?")[0])
            return _error(502, f"internal error: {type(exc).__name__}: {exc}")

    def _route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Reply:
        parts = urlsplit(target)
        path = parts.path or "/"
        if is_static(path):  # the web page's files (missions.local.webpage): no handler, no identity
            return Reply(*respond_static(method, path))
        if path == CLOCK_PATH:
            return self._clock(method, body)
        if path.startswith(S3_PREFIX):
            return self._s3_upload(method, path, headers, body)
        user = None
        auth = headers.get("Authorization") or headers.get("authorization") or ""
        if auth.startswith("Bearer " + DEV_TOKEN_PREFIX):
            user = auth[len("Bearer " + DEV_TOKEN_PREFIX) :].strip() or None
        event = http_event(method, path, parts.query, headers, body, user)
        module = _function_of(path)
        result = self._handler(module)(event, self._context(module), runtime=self.cloud.runtime)
        return _reply_of(result)

    def _handler(self, module: str) -> Handler:
        handler = self._handlers.get(module)
        if handler is None:
            import importlib

            handler = self._handlers[module] = importlib.import_module(f"functions.{module}.handler").lambda_handler
        return handler

    def _context(self, module: str) -> LocalContext:
        """A fresh invocation's context, with the function's configuration as the emulation deployed it."""
        name = f"{self.cloud.prefix}-{module}"
        configured = self._functions.get(name)
        if configured is None:
            try:
                found = self.cloud.lambda_.get_function_configuration(FunctionName=name)
                configured = LocalContext(
                    function_name=name,
                    memory_limit_in_mb=int(found.get("MemorySize") or 256),
                    invoked_function_arn=str(found.get("FunctionArn") or ""),
                    timeout_seconds=float(found.get("Timeout") or DEFAULT_TIMEOUT_SECONDS),
                )
            except Exception:  # not deployed in this emulation: a hand-built context
                configured = LocalContext(function_name=name)
            self._functions[name] = configured
        return LocalContext(
            function_name=name,
            memory_limit_in_mb=configured.memory_limit_in_mb,
            invoked_function_arn=configured.invoked_function_arn,
            timeout_seconds=configured.timeout_seconds,
            aws_request_id=str(uuid.uuid4()),
        )

    def _s3_upload(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        """A presigned PUT, as S3 takes it: the signed Content-Length must match the body."""
        xml = [("content-type", "application/xml")]
        bucket, _, key = path[len(S3_PREFIX) :].partition("/")
        if method != "PUT" or not key or bucket != self.cloud.settings.snapshot_bucket:
            return Reply(403, xml, b"<Error><Code>AccessDenied</Code></Error>")
        self.cloud.s3.put_object(Bucket=bucket, Key=unquote(key), Body=body)
        return Reply(200, [("etag", '"local"')], b"")

    def _clock(self, method: str, body: bytes) -> Reply:
        json_type = [("content-type", JSON_TYPE)]
        if method == "GET":
            return Reply(200, json_type, json.dumps({"now": self.clock.now().isoformat()}).encode())
        try:
            seconds = float(json.loads(body or b"{}")["advance_seconds"])
            fired = self.advance(seconds)
        except (ValueError, KeyError, TypeError) as exc:
            return Reply(422, json_type, json.dumps({"message": f"bad clock request: {exc}"}).encode())
        return Reply(200, json_type, json.dumps({"now": self.clock.now().isoformat(), "fired": fired}).encode())

    def advance(self, seconds: float) -> list[dict[str, Any]]:
        """Move the schedule clock; fire each schedule that fell due, in time order."""
        from missions.local.clock import scheduler_specs

        fired = []
        handler = self._handler("schedule")
        group = self.cloud.settings.schedule_group
        users = scheduler_specs(self.cloud.scheduler, group) if group else []  # users' own, as the Scheduler has them
        day = self.clock.now().date()
        for spec, scheduled_time in self.clock.advance(seconds, also=users):
            event = spec.event(scheduled_time)
            result = handler(event, self._context("schedule"), runtime=self.cloud.runtime)
            fired.append({"schedule": spec.name, "scheduled_time": scheduled_time, "result": result})
        if self.clock.now().date() != day:  # a new UTC day: budgets are given afresh, as the reconciler finds
            report = self._handler("reconcile")({}, self._context("reconcile"), runtime=self.cloud.runtime)
            fired.append({"schedule": "reconcile", "result": report})
        return fired


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket (OSError as bind raises it: "Address already in use")."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose protocol says
    # TCP, and with Nagle on, a response's body waits for the client's delayed ACK of its headers: 40 ms a
    # request on a kept-alive connection
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restarted server gets its port back
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def _function_of(path: str) -> str:
    """Which function (and so which concurrency limit) a request's path reaches."""
    if is_static(path):
        return "static"
    if path == CLOCK_PATH:
        return "clock"
    if path.startswith(S3_PREFIX):
        return "upload"
    if path.startswith("/v1/") or (path.startswith("/missions/") and path.endswith("/events/stream")):
        return "stream"  # in AWS: the stream function's URL (API Gateway neither streams nor waits)
    return "webhook" if path.startswith("/webhooks/") else "api"


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The request's headers by their usual names (User-Agent), a repeated one joined by commas as
    API Gateway joins them."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key = "-".join(part.capitalize() for part in name.decode("latin-1").split("-"))
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    return headers


def _reply_of(result: Any) -> Reply:
    """The response API Gateway would send (missions.app.asgi); a whole event stream is sent event
    by event, as it would have been produced."""
    reply = reply_of(result)
    content_type = next((v for k, v in reply.headers if k.lower() == "content-type"), "")
    if isinstance(reply.body, bytes) and content_type.startswith("text/event-stream"):
        reply.body = _events(reply.body)
    return reply


def _events(data: bytes) -> Iterator[bytes]:
    """A whole event stream, sent event by event (each ends with a blank line)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n\n", start)
        end = len(data) if end < 0 else end + 2
        yield data[start:end]
        start = end


def release_freed_memory() -> bool:
    """Give the heap's free pages back to the system (glibc's `malloc_trim`); False where there is no glibc.

    The emulation's tables live in this process: retention prunes what old missions left, but glibc keeps
    the freed memory in its arenas (one per thread that allocated, and the server runs many), so without
    this a dev server that has run for hours holds the peak of everything it ever stored."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.malloc_trim(0))
