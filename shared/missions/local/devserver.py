"""`missions dev`: the deployed HTTP API, on 127.0.0.1, over the embedded emulation.

Each request becomes an API Gateway HTTP API (payload v2) event for the real api or webhook
handler. What AWS does around them is played here:
- auth: in dev mode only, `Authorization: Bearer dev:<user>` names the user (the JWT
  authorizer's `sub` claim); any other request has no identity and gets 401.
- schedules: EventBridge Scheduler never fires in moto, so the server owns a clock;
  POST /_dev/clock {"advance_seconds": N} moves it and fires what fell due.
- status changes: the emulation itself reports ended executions to the status function, as
  Step Functions does in AWS (missions.local.patches), which frees the user's slot.
- S3 uploads: presigned upload URLs point at /_dev/s3/<bucket>/<key> here, which stores the
  body in the emulated bucket as S3 would (an archive a user uploads for a repository).
Memory-change triggers need nothing here: moto's stream mapping calls the stream handler.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from missions.core import capability as registry
from missions.local.emulation import LocalCloud
from missions.local.patches import LocalContext

DEV_TOKEN_PREFIX = "dev:"
MAX_BODY = 1024 * 1024  # API Gateway's own payload limit is larger; nothing here needs more
MAX_UPLOAD = 110 * 1024 * 1024  # presigned S3 uploads: the archive limit, with room to refuse bigger ones itself
S3_PREFIX = "/_dev/s3/"


def http_event(
    method: str, path: str, query: str, headers: dict[str, str], body: bytes, user: str | None
) -> dict[str, Any]:
    """An HTTP API payload v2 event, as API Gateway would hand it to a Lambda."""
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {k.lower(): v for k, v in headers.items()},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "127.0.0.1",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": headers.get("User-Agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": datetime.now(UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now * 1000),
        },
        "body": body.decode("utf-8", errors="replace") if body else None,
        "isBase64Encoded": False,
    }
    if query:
        params: dict[str, str] = {}
        for key, value in parse_qsl(query, keep_blank_values=True):
            params[key] = f"{params[key]},{value}" if key in params else value
        event["queryStringParameters"] = params
    if path.startswith("/webhooks/"):
        event["pathParameters"] = {"source": path.split("/", 2)[2]}
    if user:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": {"sub": user}, "scopes": None}}
    return event


class DevServer:
    def __init__(
        self,
        cloud: LocalCloud,
        host: str = "127.0.0.1",
        port: int = 8787,
        clock_start: datetime | None = None,
    ):
        from missions.core.trigger_specs import schedule_specs
        from missions.local.clock import LocalScheduleClock

        self.cloud = cloud
        self.clock = LocalScheduleClock(
            schedule_specs([registry.load(n) for n in cloud.capabilities]), start=clock_start or datetime.now(UTC)
        )
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        cloud.runtime.upload_endpoint = self.url + S3_PREFIX.rstrip("/")

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        if isinstance(host, bytes):  # only a Unix socket's address is bytes
            host = host.decode()
        return f"http://{host}:{port}"

    def start(self) -> DevServer:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- what AWS would do ---------------------------------------------------------------------

    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(target)
        path = parts.path or "/"
        if path == "/_dev/clock":
            return self._clock(method, body)
        if path.startswith(S3_PREFIX):
            return self._s3_upload(method, path, headers, body)
        user = None
        auth = headers.get("Authorization") or headers.get("authorization") or ""
        if auth.startswith("Bearer " + DEV_TOKEN_PREFIX):
            user = auth[len("Bearer " + DEV_TOKEN_PREFIX) :].strip() or None
        event = http_event(method, path, parts.query, headers, body, user)
        module = "webhook" if path.startswith("/webhooks/") else "api"
        handler = _handler(module)
        result = handler(event, LocalContext(function_name=f"{self.cloud.prefix}-{module}"), runtime=self.cloud.runtime)
        payload = result.get("body") or ""
        if result.get("isBase64Encoded"):
            import base64

            data = base64.b64decode(payload)
        else:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        response_headers = {k: v for k, v in (result.get("headers") or {}).items()}
        return int(result.get("statusCode", 200)), response_headers, data

    def _s3_upload(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """A presigned PUT, as S3 takes it: the signed Content-Length must match the body."""
        xml = {"content-type": "application/xml"}
        bucket, _, key = path[len(S3_PREFIX) :].partition("/")
        if method != "PUT" or not key or bucket != self.cloud.settings.snapshot_bucket:
            return 403, xml, b"<Error><Code>AccessDenied</Code></Error>"
        from urllib.parse import unquote

        self.cloud.s3.put_object(Bucket=bucket, Key=unquote(key), Body=body)
        return 200, {"etag": '"local"'}, b""

    def _clock(self, method: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        json_type = {"content-type": "application/json"}
        if method == "GET":
            return 200, json_type, json.dumps({"now": self.clock.now().isoformat()}).encode()
        try:
            seconds = float(json.loads(body or b"{}")["advance_seconds"])
            fired = self.advance(seconds)
        except (ValueError, KeyError, TypeError) as exc:
            return 422, json_type, json.dumps({"message": f"bad clock request: {exc}"}).encode()
        return 200, json_type, json.dumps({"now": self.clock.now().isoformat(), "fired": fired}).encode()

    def advance(self, seconds: float) -> list[dict[str, Any]]:
        """Move the schedule clock; fire each schedule that fell due, in time order."""
        fired = []
        handler = _handler("schedule")
        for spec, scheduled_time in self.clock.advance(seconds):
            event = spec.event(scheduled_time)
            result = handler(
                event, LocalContext(function_name=f"{self.cloud.prefix}-schedule"), runtime=self.cloud.runtime
            )
            fired.append({"schedule": spec.name, "scheduled_time": scheduled_time, "result": result})
        return fired

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                limit = MAX_UPLOAD if self.path.startswith(S3_PREFIX) else MAX_BODY
                if length > limit:
                    self._send(413, {"content-type": "application/json"}, b'{"message": "body too large"}')
                    return
                body = self.rfile.read(length) if length else b""
                try:
                    status, headers, data = server.handle(self.command, self.path, dict(self.headers), body)
                except Exception as exc:  # a bug: say so as API Gateway would, with a 502
                    status, headers, data = (
                        502,
                        {"content-type": "application/json"},
                        json.dumps({"message": f"internal error: {type(exc).__name__}: {exc}"}).encode(),
                    )
                self._send(status, headers, data)

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def __getattr__(self, name: str) -> Any:
                # any method (TRACE, QUERY, ...) reaches the API, which answers it as API Gateway does
                if name.startswith("do_"):
                    return self._serve
                raise AttributeError(name)

        return Handler


def _handler(module: str) -> Any:
    import importlib

    return importlib.import_module(f"functions.{module}.handler").lambda_handler
