"""The stream function's web server: streamed responses in AWS, with the HTTP API's own auth.

API Gateway HTTP APIs give an integration 30 seconds and send its response whole, and Lambda's
managed Python runtime cannot stream a response. So the stream function (SSE of a mission's events,
the OpenAI-compatible chat API) runs this ASGI app under uvicorn, behind the AWS Lambda Web Adapter
(a layer: `AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap` starts the function's `run.sh`, which serves this
app on `AWS_LWA_PORT`; `AWS_LWA_INVOKE_MODE=response_stream` makes the adapter stream the app's
response through a function URL in RESPONSE_STREAM mode). One request at a time reaches it, as
invocations reach a Lambda execution environment.

The function URL has no authorizer (AuthType NONE), so this app is the authorizer, and verifies
`Authorization: Bearer <JWT>` as the HTTP API's JWT authorizer does (see `TokenVerifier`). A request
that passes becomes the very payload v2 event API Gateway would have built (`http_event`, with the
token's claims in `requestContext.authorizer.jwt.claims`), which the injected handler answers with a
proxy result whose body is a string or an iterator of chunks, sent as `missions dev` sends it
(missions.app.asgi): chunks are pulled in a worker thread and sent as they are produced; a client
that leaves is noticed between chunks, and the iterator is then closed (its `finally` runs).

The adapter adds two headers to every request it forwards, replacing any a client sent:
`x-amzn-request-context` (the function URL's request context: request id, domain, source IP) and
`x-amzn-lambda-context` (the invocation: request id, deadline, function ARN, memory). They give the
event its request context and the handler its Lambda context; identity never comes from them.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.to_thread
import jwt

from missions.app.asgi import ASGIScope, Receive, Reply, Send, reply_of, send_reply
from missions.app.http_event import http_event
from missions.app.resolver import is_openai, openai_error
from missions.core.settings import RuntimeSettings

READINESS_PATH = "/_stream/ready"  # the adapter's readiness check (AWS_LWA_READINESS_CHECK_PATH); no auth, no handler
DEFAULT_PORT = 8080  # the adapter's default AWS_LWA_PORT
MAX_BODY = 6 * 1024 * 1024  # a function URL's request payload limit
MAX_TOKEN = 16 * 1024  # bytes of a bearer token worth decoding
ALGORITHMS = ("RS256", "RS384", "RS512")  # the JWT authorizer accepts RSA signatures only
TOKEN_USES = ("access", "id")  # Cognito's token_use of the tokens the HTTP API accepts
FALLBACK_TIMEOUT = 900  # seconds an invocation is given when the adapter names no deadline (Lambda's ceiling)
JWKS_LIFESPAN = 3600.0  # seconds the user pool's keys are kept before they are read again
JSON_TYPE = "application/json"
ADAPTER_HEADERS = ("x-amzn-request-context", "x-amzn-lambda-context")

# the stream handler as Lambda would call it: (payload v2 event, Lambda context) -> proxy result
Handler = Callable[[dict[str, Any], Any], Any]

_log = logging.getLogger(__name__)


# -- auth: the HTTP API's JWT authorizer, played in the function ----------------------------------------


class Unauthorized(Exception):
    """No valid token: why, for the logs (the client is told only that it is unauthorized)."""


class SigningKeys(Protocol):
    """Where a token's signing key comes from: `jwt.PyJWKClient` (the issuer's JWKS, cached), or a
    test's keys."""

    def get_signing_key_from_jwt(self, token: str) -> jwt.PyJWK: ...


def discovered_keys(issuer: str, *, timeout: float = 5.0) -> SigningKeys:
    """The issuer's keys, found as API Gateway finds them: the `jwks_uri` of its OpenID configuration
    (`<issuer>/.well-known/openid-configuration`), then read and cached by PyJWKClient (a key id it does
    not know makes it read the set again, so a rotated key is picked up)."""
    try:
        with urllib.request.urlopen(f"{issuer.rstrip('/')}/.well-known/openid-configuration", timeout=timeout) as reply:
            uri = json.load(reply)["jwks_uri"]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # the issuer is down or answers no configuration
        raise Unauthorized(f"the issuer's OpenID configuration could not be read: {exc}") from exc
    if not isinstance(uri, str) or not uri.startswith("https://"):
        raise Unauthorized(f"the issuer's jwks_uri is not an https URL: {uri!r}")
    return jwt.PyJWKClient(uri, cache_keys=True, lifespan=JWKS_LIFESPAN, timeout=timeout)


class TokenVerifier:
    """`Authorization: Bearer <JWT>` checked as the HTTP API's JWT authorizer checks it (the Cognito
    authorizer of infra/components/api.py is one: issuer = the user pool, audience = its client ids):

    - a `Bearer` token (the prefix is optional, as API Gateway strips it), RSA-signed, whose `kid`
      names a key of the issuer's JWKS and whose signature that key verifies;
    - `iss` is the issuer; `exp` is after now, `nbf` and `iat` (when present) not after now;
    - `aud` names one of the audiences; a token without `aud` (a Cognito access token) must have a
      `client_id` among them instead;
    - `token_use`, when present (Cognito puts it in every token), is `access` or `id`: the HTTP API
      accepts both an access token (`client_id`) and an ID token (`aud`) of the pool's clients, so this
      does too, and a client that works against the API works here.

    The claims that pass are the token's own; `sub` is the user."""

    def __init__(
        self,
        issuer: str,
        audience: Sequence[str],
        *,
        keys: SigningKeys | None = None,
        leeway: float = 0.0,
    ) -> None:
        if not issuer or not audience:
            raise ValueError("a JWT verifier needs the issuer and at least one audience (an app client id)")
        self.issuer = issuer
        self.audience = frozenset(audience)
        self._keys = keys
        self._leeway = leeway
        self._lock = threading.Lock()

    def keys(self) -> SigningKeys:
        """The issuer's keys, looked up on first use (never at import or start: the server must be ready
        for the adapter's readiness check without a network round trip); Unauthorized while the issuer
        cannot be reached (the next request tries again)."""
        with self._lock:
            if self._keys is None:
                self._keys = discovered_keys(self.issuer)
            return self._keys

    def claims(self, authorization: str | None) -> dict[str, Any]:
        """The verified token's claims; Unauthorized with the reason otherwise."""
        token = _bearer(authorization)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"not a JWT: {exc}") from exc
        if header.get("alg") not in ALGORITHMS:
            raise Unauthorized(f"algorithm {header.get('alg')!r} is not an RSA signature")
        if not header.get("kid"):
            raise Unauthorized("the token names no key (kid)")
        try:
            key = self.keys().get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError as exc:
            raise Unauthorized(f"the issuer's keys could not be read: {exc}") from exc
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"no key of the issuer signs this token: {exc}") from exc
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=list(ALGORITHMS),
                issuer=self.issuer,
                leeway=self._leeway,
                # exp, nbf and iat are checked against now; the audience below, as API Gateway checks it
                options={"require": ["exp", "iss", "sub"], "verify_aud": False},
            )
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"invalid token: {exc}") from exc
        self._check_audience(claims)
        use = claims.get("token_use")
        if use is not None and use not in TOKEN_USES:
            raise Unauthorized(f"token_use {use!r} is neither an access nor an ID token")
        return claims

    def _check_audience(self, claims: Mapping[str, Any]) -> None:
        """API Gateway reads `aud` when the token has one, and `client_id` only when it has none."""
        if "aud" in claims:
            audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
            if not self.audience.intersection(str(a) for a in audiences):
                raise Unauthorized("the token's aud is not an audience of this API")
        elif str(claims.get("client_id", "")) not in self.audience:
            raise Unauthorized("the token's client_id is not an audience of this API")


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("no Authorization header")
    scheme, _, rest = authorization.strip().partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else authorization.strip()
    if not token or len(token) > MAX_TOKEN:
        raise Unauthorized("no token, or one too long to be a token")
    return token


# -- the Lambda context of an invocation, from the adapter's header ----------------------------------------


@dataclass
class LambdaContext:
    """The parts of Lambda's context object handlers and Powertools read, for the invocation the adapter
    forwarded (its `x-amzn-lambda-context` header), else this function's environment."""

    function_name: str
    memory_limit_in_mb: int
    function_version: str = "$LATEST"
    aws_request_id: str = ""
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""
    deadline_ms: int = 0  # epoch milliseconds when Lambda stops the invocation
    clock: Callable[[], float] = field(default=time.time, repr=False)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(self.clock() * 1000))


def lambda_context(
    header: str | None, environ: Mapping[str, str] | None = None, *, request_id: str = ""
) -> LambdaContext:
    """The context the adapter describes (the Rust runtime's Context serialized: `request_id`,
    `deadline`, `invoked_function_arn`, `env_config` with `function_name`, `memory`, `version`,
    `log_group`, `log_stream`), each field missing from it taken from Lambda's environment variables
    (and the deadline from Lambda's ceiling, 15 minutes from now)."""
    env = os.environ if environ is None else environ
    described: dict[str, Any] = {}
    if header:
        try:
            parsed = json.loads(header)
            described = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            _log.warning("the adapter's lambda context is not JSON; using the environment's")
    config = described.get("env_config") if isinstance(described.get("env_config"), dict) else {}
    assert isinstance(config, dict)

    def pick(*values: Any) -> str:
        return next((str(v) for v in values if v not in (None, "")), "")

    memory = pick(config.get("memory"), described.get("memory_limit_in_mb"), env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
    deadline = described.get("deadline", described.get("deadline_ms"))
    return LambdaContext(
        function_name=pick(config.get("function_name"), env.get("AWS_LAMBDA_FUNCTION_NAME")) or "missions-stream",
        memory_limit_in_mb=int(memory) if memory.isdigit() else 128,
        function_version=pick(config.get("version"), env.get("AWS_LAMBDA_FUNCTION_VERSION")) or "$LATEST",
        aws_request_id=pick(described.get("request_id"), request_id),
        invoked_function_arn=pick(described.get("invoked_function_arn")),
        log_group_name=pick(config.get("log_group"), env.get("AWS_LAMBDA_LOG_GROUP_NAME")),
        log_stream_name=pick(config.get("log_stream"), env.get("AWS_LAMBDA_LOG_STREAM_NAME")),
        deadline_ms=int(deadline)
        if isinstance(deadline, int | float) and not isinstance(deadline, bool)
        else int((time.time() + FALLBACK_TIMEOUT) * 1000),
    )


# -- the ASGI app ----------------------------------------------------------------------------------------


class StreamingApp:
    """The ASGI application: readiness, auth, the payload v2 event, the handler in a worker thread, and
    its response sent as it is produced."""

    def __init__(
        self,
        handler: Handler,
        verifier: TokenVerifier,
        *,
        environ: Mapping[str, str] | None = None,
        readiness_path: str = READINESS_PATH,
        max_body: int = MAX_BODY,
    ) -> None:
        self.handler = handler
        self.verifier = verifier
        self.environ = environ
        self.readiness_path = readiness_path
        self.max_body = max_body

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":  # websockets: not served here
            return
        path = scope.get("path") or "/"
        if path == self.readiness_path and scope["method"] in ("GET", "HEAD"):
            await send_reply(_json(200, {"ready": True}), send, receive)
            return
        headers = _headers(scope.get("headers") or [])
        body = await _read_body(receive, headers, self.max_body)
        if body is None:
            too_large = _failure(path, 413, "the request body is too large")
            await send_reply(too_large, send, receive)
            return
        reply = await self._respond(scope, path, headers, body)
        await send_reply(reply, send, receive)

    async def _respond(self, scope: ASGIScope, path: str, headers: dict[str, str], body: bytes) -> Reply:
        try:
            # the first request reads the issuer's keys (network): never on the event loop
            claims = await anyio.to_thread.run_sync(self.verifier.claims, headers.get("authorization"))
        except Unauthorized as exc:
            _log.info("401 for %s %s: %s", scope["method"], path, exc)
            return _unauthorized(path)
        event, context = self._invocation(scope, path, headers, body, claims)
        try:
            result = await anyio.to_thread.run_sync(self.handler, event, context)
            return reply_of(result)
        except Exception:  # a bug: answered as API Gateway answers a failed function
            _log.exception("the stream handler failed on %s %s", scope["method"], path)
            return _failure(path, 502, "Internal Server Error")

    def _invocation(
        self, scope: ASGIScope, path: str, headers: dict[str, str], body: bytes, claims: Mapping[str, Any]
    ) -> tuple[dict[str, Any], LambdaContext]:
        described = _json_header(headers.get("x-amzn-request-context"))
        http = described.get("http") if isinstance(described.get("http"), dict) else {}
        assert isinstance(http, dict)
        client = scope.get("client") or ("127.0.0.1", 0)
        request_context: dict[str, Any] = {
            key: described[key]
            for key in ("accountId", "apiId", "domainName", "domainPrefix", "requestId", "time", "timeEpoch")
            if described.get(key)
        }
        request_context["http"] = {
            "sourceIp": http.get("sourceIp") or client[0],
            "protocol": http.get("protocol") or f"HTTP/{scope.get('http_version', '1.1')}",
        }
        passed = {k: v for k, v in headers.items() if k not in ADAPTER_HEADERS}
        query = (scope.get("query_string") or b"").decode("latin-1")
        event = http_event(
            scope["method"], path, query, passed, body, None, claims=claims, request_context=request_context
        )
        context = lambda_context(
            headers.get("x-amzn-lambda-context"), self.environ, request_id=event["requestContext"]["requestId"]
        )
        return event, context


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive, headers: Mapping[str, str], limit: int) -> bytes | None:
    """The whole request body, or None when it is larger than `limit`."""
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Header names in lower case, a repeated one joined by commas, as API Gateway passes them."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    return headers


def _json_header(value: str | None) -> dict[str, Any]:
    try:
        parsed = json.loads(value) if value else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _json(status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> Reply:
    return Reply(status, [("content-type", JSON_TYPE), *headers], json.dumps(body).encode())


def _failure(path: str, status: int, message: str) -> Reply:
    """An error of the server itself (before or after the handler), in the shape of the route family:
    OpenAI's under /v1/ (missions.app.resolver), API Gateway's own elsewhere."""
    if is_openai(path):
        return _json(*openai_error(status, message))
    return _json(status, {"message": message})


def _unauthorized(path: str) -> Reply:
    challenge = [("www-authenticate", 'Bearer realm="missions"')]
    if is_openai(path):
        message = "Missing or invalid bearer token: send a Cognito access token of this stack as the API key."
        return _json(*openai_error(401, message), challenge)
    return _json(401, {"message": "Unauthorized"}, challenge)  # exactly what the HTTP API's authorizer answers


# -- composing and serving -------------------------------------------------------------------------------


def create_app(
    handler: Handler,
    settings: RuntimeSettings | None = None,
    *,
    keys: SigningKeys | None = None,
    environ: Mapping[str, str] | None = None,
) -> StreamingApp:
    """The app for `handler`, verifying tokens of the issuer and audiences the settings name
    (`MISSIONS_JWT_ISSUER`, `MISSIONS_JWT_AUDIENCE`)."""
    from missions.core.settings import settings_from_env

    active = settings or settings_from_env()
    if not active.jwt_issuer or not active.jwt_audience:
        raise ValueError("the stream function needs jwt_issuer and jwt_audience (MISSIONS_JWT_ISSUER/_AUDIENCE)")
    verifier = TokenVerifier(active.jwt_issuer, active.jwt_audience, keys=keys)
    return StreamingApp(handler, verifier, environ=environ)


def serve(handler: Handler, *, host: str = "127.0.0.1", port: int | None = None) -> None:
    """Serve `handler` until the process ends: on loopback (the adapter is in the same environment), on
    `AWS_LWA_PORT` (default 8080). uvicorn's own access log is off: each invocation is Lambda's to log."""
    import uvicorn

    chosen = port if port is not None else int(os.environ.get("AWS_LWA_PORT") or DEFAULT_PORT)
    uvicorn.run(create_app(handler), host=host, port=chosen, log_level="warning", access_log=False, lifespan="on")


__all__ = [
    "READINESS_PATH",
    "LambdaContext",
    "SigningKeys",
    "StreamingApp",
    "TokenVerifier",
    "Unauthorized",
    "create_app",
    "discovered_keys",
    "lambda_context",
    "serve",
]
