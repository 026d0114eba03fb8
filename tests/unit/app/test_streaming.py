"""The stream function's web server (missions.app.streaming): the HTTP API's JWT authorizer played in
the function, the payload v2 event it hands the handler, and responses streamed as they are produced.

Tokens are signed with an RSA key made here and verified against its JWKS through the injected key
source (no network); the app runs under uvicorn on a free loopback port, read with a streaming client.
A stand-in handler plays the stream handler (functions/stream/handler.py) by its contract: a payload v2
event and a Lambda context in, a proxy result whose body is a string or an iterator of chunks out."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa

from missions.app.http_event import http_event
from missions.app.streaming import (
    READINESS_PATH,
    StreamingApp,
    TokenVerifier,
    Unauthorized,
    create_app,
    lambda_context,
)
from missions.core.settings import RuntimeSettings

ROOT = Path(__file__).resolve().parents[3]
ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Pool"
PEOPLE, MACHINES = "people-client", "machine-client"
KID = "key-1"


class Keys:
    """The user pool's JWKS as the injected key source serves it; counts how often it was read."""

    def __init__(self, *public_keys: tuple[str, Any]) -> None:
        self.document = {"keys": [_jwk(kid, key) for kid, key in public_keys]}
        self.reads = 0

    def get_signing_key_from_jwt(self, token: str) -> jwt.PyJWK:
        self.reads += 1
        kid = jwt.get_unverified_header(token).get("kid")
        for key in jwt.PyJWKSet.from_dict(self.document).keys:
            if key.key_id == kid:
                return key
        raise jwt.PyJWKClientError(f"no key {kid}")


def _jwk(kid: str, public_key: Any) -> dict[str, Any]:
    return {**jwt.algorithms.RSAAlgorithm.to_jwk(public_key, as_dict=True), "kid": kid, "alg": "RS256", "use": "sig"}


@pytest.fixture(scope="module")
def pool_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def keys(pool_key: rsa.RSAPrivateKey) -> Keys:
    return Keys((KID, pool_key.public_key()))


@pytest.fixture
def verifier(keys: Keys) -> TokenVerifier:
    return TokenVerifier(ISSUER, [PEOPLE, MACHINES], keys=keys)


def access_token(key: Any, **overrides: Any) -> str:
    """A Cognito access token: no aud, the client in client_id, token_use access (a None removes a claim)."""
    kid = overrides.pop("kid", KID)
    now = int(time.time())
    claims = {
        "sub": "ada",
        "iss": ISSUER,
        "client_id": PEOPLE,
        "token_use": "access",
        "scope": "openid missions/api",
        "iat": now,
        "exp": now + 3600,
        "cognito:groups": ["operators", "staff"],
    }
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def id_token(key: Any, **overrides: Any) -> str:
    """A Cognito ID token: the client in aud, token_use id."""
    return access_token(key, client_id=None, aud=PEOPLE, token_use="id", **overrides)


# -- the JWT authorizer, played --------------------------------------------------------------------------


def test_a_valid_access_token_passes_with_its_sub(verifier: TokenVerifier, pool_key: rsa.RSAPrivateKey) -> None:
    """Given an access token of the pool's people client, signed by the pool's key
    When the verifier checks `Bearer <token>`
    Then its claims pass, `sub` the user and every other claim as the token has it."""
    claims = verifier.claims(f"Bearer {access_token(pool_key)}")
    assert claims["sub"] == "ada" and claims["client_id"] == PEOPLE and claims["token_use"] == "access"


def test_a_machine_token_and_an_id_token_pass_as_the_http_api_accepts_them(
    verifier: TokenVerifier, pool_key: rsa.RSAPrivateKey
) -> None:
    """Given a machine client's access token and a person's ID token (aud = the client)
    When the verifier checks them
    Then both pass, as the HTTP API's authorizer (audience = both client ids) lets both through."""
    machine = access_token(pool_key, sub=MACHINES, client_id=MACHINES, scope="missions/api")
    assert verifier.claims(f"Bearer {machine}")["sub"] == MACHINES
    assert verifier.claims(f"Bearer {id_token(pool_key)}")["token_use"] == "id"
    assert verifier.claims(access_token(pool_key))["sub"] == "ada"  # API Gateway strips the prefix: optional


@pytest.mark.parametrize(
    ("case", "overrides"),
    [
        ("expired", {"exp": int(time.time()) - 5, "iat": int(time.time()) - 3605}),
        ("not yet valid", {"nbf": int(time.time()) + 600}),
        ("issued in the future", {"iat": int(time.time()) + 600}),
        ("another issuer", {"iss": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Other"}),
        ("another client's access token", {"client_id": "someone-elses-client"}),
        ("no client at all", {"client_id": None}),
        ("a token_use that is not access or id", {"token_use": "refresh"}),
        ("no sub", {"sub": None}),
        ("a key the pool does not have", {"kid": "key-2"}),
    ],
)
def test_a_token_the_authorizer_refuses_is_refused(
    verifier: TokenVerifier, pool_key: rsa.RSAPrivateKey, case: str, overrides: dict[str, Any]
) -> None:
    """Given a token signed by the pool's key but wrong in one way (case)
    When the verifier checks it
    Then it is Unauthorized."""
    with pytest.raises(Unauthorized):
        verifier.claims(f"Bearer {access_token(pool_key, **overrides)}")


def test_an_id_token_of_another_audience_is_refused(verifier: TokenVerifier, pool_key: rsa.RSAPrivateKey) -> None:
    """Given an ID token whose aud is another app's client, even with one of ours in client_id
    When the verifier checks it
    Then it is refused: as API Gateway does, aud is read when the token has one, client_id only when not."""
    token = access_token(pool_key, aud="someone-elses-client", client_id=PEOPLE, token_use="id")
    with pytest.raises(Unauthorized, match="aud"):
        verifier.claims(f"Bearer {token}")


def test_a_bad_signature_is_refused(
    verifier: TokenVerifier, pool_key: rsa.RSAPrivateKey, other_key: rsa.RSAPrivateKey
) -> None:
    """Given a token with the pool's key id but signed by another key, and a token whose payload was
    altered after signing
    When the verifier checks them
    Then both are Unauthorized."""
    with pytest.raises(Unauthorized):
        verifier.claims(f"Bearer {access_token(other_key)}")
    header, payload, signature = access_token(pool_key).split(".")
    forged = jwt.utils.base64url_encode(json.dumps({"sub": "mallory", "iss": ISSUER}).encode()).decode()
    with pytest.raises(Unauthorized):
        verifier.claims(f"Bearer {header}.{forged}.{signature}")


def test_no_token_or_no_jwt_or_a_symmetric_one_is_refused(verifier: TokenVerifier, keys: Keys) -> None:
    """Given no Authorization header, an empty bearer, a dev token, and an HS256 token signed with
    the public key's text (the algorithm-confusion attack)
    When the verifier checks each
    Then each is Unauthorized, and none of them made it read the keys."""
    public_pem = keys.document["keys"][0]["n"]
    hs = jwt.encode({"sub": "mallory", "iss": ISSUER, "exp": time.time() + 60}, public_pem, headers={"kid": KID})
    for authorization in (None, "", "Bearer ", "Bearer dev:alice", f"Bearer {hs}", "Basic YWxhZGRpbjpvcGVu"):
        with pytest.raises(Unauthorized):
            verifier.claims(authorization)
    assert keys.reads == 0


# -- the payload v2 event and the Lambda context ---------------------------------------------------------


def test_the_event_carries_the_claims_as_the_authorizer_passes_them() -> None:
    """Given verified claims with a list and a number
    When the payload v2 event is built with them
    Then they are in requestContext.authorizer.jwt.claims as API Gateway passes claims (strings, a list
    as `[a b]`), and a request context given overrides the made-up one."""
    event = http_event(
        "GET",
        "/v1/models",
        "",
        {"Accept": "application/json"},
        b"",
        None,
        claims={"sub": "ada", "cognito:groups": ["operators", "staff"], "exp": 1700000000},
        request_context={"requestId": "req-1", "http": {"sourceIp": "203.0.113.9"}},
    )
    assert event["requestContext"]["authorizer"]["jwt"]["claims"] == {
        "sub": "ada",
        "cognito:groups": "[operators staff]",
        "exp": "1700000000",
    }
    assert event["requestContext"]["requestId"] == "req-1"
    assert event["requestContext"]["http"] == {
        "method": "GET",
        "path": "/v1/models",
        "protocol": "HTTP/1.1",
        "sourceIp": "203.0.113.9",
        "userAgent": "",
    }


def test_the_lambda_context_comes_from_the_adapters_header_or_the_environment() -> None:
    """Given the adapter's x-amzn-lambda-context (the runtime's Context serialized), and then none
    When the Lambda context is built
    Then it names the invocation's function, request, memory and deadline; without the header, the
    function's environment and a deadline 15 minutes away."""
    deadline = int(time.time() * 1000) + 60_000
    header = json.dumps(
        {
            "request_id": "inv-1",
            "deadline": deadline,
            "invoked_function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:missions-dev-stream",
            "xray_trace_id": None,
            "env_config": {"function_name": "missions-dev-stream", "memory": 1024, "version": "$LATEST"},
        }
    )
    context = lambda_context(header, {})
    assert (context.function_name, context.aws_request_id, context.memory_limit_in_mb) == (
        "missions-dev-stream",
        "inv-1",
        1024,
    )
    assert context.invoked_function_arn.endswith(":function:missions-dev-stream")
    assert 55_000 < context.get_remaining_time_in_millis() <= 60_000

    fallback = lambda_context(
        None, {"AWS_LAMBDA_FUNCTION_NAME": "fn", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, request_id="r"
    )
    assert (fallback.function_name, fallback.memory_limit_in_mb, fallback.aws_request_id) == ("fn", 512, "r")
    assert 899_000 < fallback.get_remaining_time_in_millis() <= 900_000


# -- the app under uvicorn: auth, the event, streaming --------------------------------------------------


class StandIn:
    """The stream handler's stand-in: records what it was given; /stream yields a first chunk, waits
    for the test to release it, then yields the rest (the iterator's end is recorded)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.contexts: list[Any] = []
        self.release = threading.Event()
        self.finished = threading.Event()  # the stream produced its last chunk
        self.closed = threading.Event()  # its iterator was closed (ended or abandoned)

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.events.append(event)
        self.contexts.append(context)
        path = event["rawPath"]
        if path == "/boom":
            raise RuntimeError("the handler has a bug")
        if path.endswith("/stream") or path == "/v1/chat/completions":
            return {"statusCode": 200, "headers": {"content-type": "text/event-stream"}, "body": self._chunks()}
        body = {"object": "list", "data": [{"id": "missions", "object": "model"}]}
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}

    def _chunks(self) -> Iterator[bytes | str]:
        try:
            yield b"data: one\n\n"
            while not self.release.wait(0.05):
                yield b": heartbeat\n\n"  # as an SSE handler does while it waits: the client's leaving is noticed
            yield "data: two\n\n"
            yield b"data: [DONE]\n\n"
            self.finished.set()
        finally:
            self.closed.set()


class Served:
    def __init__(self, app: Any) -> None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.socket = probe
        self.url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [probe]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@pytest.fixture
def stand_in() -> StandIn:
    return StandIn()


@pytest.fixture
def served(stand_in: StandIn, verifier: TokenVerifier) -> Iterator[Served]:
    with Served(StreamingApp(stand_in, verifier, environ={})) as served:
        yield served


def test_a_streamed_response_arrives_chunk_by_chunk(
    served: Served, stand_in: StandIn, pool_key: rsa.RSAPrivateKey
) -> None:
    """Given the app under uvicorn and a handler whose stream waits after its first chunk
    When a client with a valid token reads /missions/m_1/events/stream as a stream
    Then the first chunk arrives while the handler has not finished (it waits for the test), the rest
    after it is released, and the iterator ends; the handler got the caller's sub in the event."""
    headers = {"Authorization": f"Bearer {access_token(pool_key)}"}
    with (
        httpx2.Client(timeout=10) as client,
        client.stream("GET", f"{served.url}/missions/m_1/events/stream?after=3", headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        chunks = response.iter_raw()
        first = next(chunks)
        assert first == b"data: one\n\n"
        assert not stand_in.finished.is_set()  # the first chunk came before the handler was done
        stand_in.release.set()
        rest = b"".join(chunks).replace(b": heartbeat\n\n", b"")
    assert rest == b"data: two\n\ndata: [DONE]\n\n"
    assert stand_in.finished.is_set() and stand_in.closed.wait(5)
    (event,) = stand_in.events
    assert event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] == "ada"
    assert event["rawPath"] == "/missions/m_1/events/stream" and event["queryStringParameters"] == {"after": "3"}


def test_a_client_that_leaves_closes_the_iterator(
    served: Served, stand_in: StandIn, pool_key: rsa.RSAPrivateKey
) -> None:
    """Given a stream that keeps sending heartbeats until released
    When the client reads its first chunk and disconnects
    Then the handler's iterator is closed (its finally runs) and never reaches its end."""
    headers = {"Authorization": f"Bearer {access_token(pool_key)}"}
    with (
        httpx2.Client(timeout=10) as client,
        client.stream("GET", f"{served.url}/missions/m_1/events/stream", headers=headers) as response,
    ):
        assert next(response.iter_raw()) == b"data: one\n\n"
    assert stand_in.closed.wait(5), "the iterator was not closed after the client left"
    assert not stand_in.finished.is_set()


def test_a_chat_completion_posts_its_body_and_the_invocations_context(
    served: Served, stand_in: StandIn, pool_key: rsa.RSAPrivateKey
) -> None:
    """Given the adapter's request and Lambda context headers on a POST /v1/chat/completions
    When it reaches the app
    Then the handler gets the JSON body, the function URL's request id and source IP in the event (the
    adapter's headers themselves not passed on), and a Lambda context naming the invocation."""
    body = {"model": "missions", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = {
        "Authorization": f"Bearer {access_token(pool_key)}",
        "x-amzn-request-context": json.dumps(
            {
                "requestId": "url-req-1",
                "domainName": "abc.lambda-url.eu-west-1.on.aws",
                "http": {"sourceIp": "198.51.100.7"},
            }
        ),
        "x-amzn-lambda-context": json.dumps(
            {
                "request_id": "inv-9",
                "deadline": int(time.time() * 1000) + 900_000,
                "env_config": {"function_name": "s", "memory": 512},
            }
        ),
    }
    stand_in.release.set()
    response = httpx2.post(f"{served.url}/v1/chat/completions", json=body, headers=headers, timeout=10)
    assert response.status_code == 200 and response.text.endswith("data: [DONE]\n\n")
    (event,), (context,) = stand_in.events, stand_in.contexts
    assert json.loads(event["body"]) == body and event["requestContext"]["http"]["method"] == "POST"
    assert event["requestContext"]["requestId"] == "url-req-1"
    assert event["requestContext"]["domainName"] == "abc.lambda-url.eu-west-1.on.aws"
    assert event["requestContext"]["http"]["sourceIp"] == "198.51.100.7"
    assert not {"x-amzn-request-context", "x-amzn-lambda-context"} & set(event["headers"])
    assert (context.aws_request_id, context.function_name, context.memory_limit_in_mb) == ("inv-9", "s", 512)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "/v1/models",
            {
                "error": {
                    "message": "Missing or invalid bearer token: send a Cognito access token of this stack "
                    "as the API key.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
        ),
        ("/v1/chat/completions", None),  # the same OpenAI shape
        ("/missions/m_1/events/stream", {"message": "Unauthorized"}),
    ],
)
def test_unauthenticated_requests_get_the_route_familys_401(
    served: Served, stand_in: StandIn, pool_key: rsa.RSAPrivateKey, path: str, expected: dict[str, Any] | None
) -> None:
    """Given requests without a token, and with an expired one
    When they reach the app
    Then each is a 401 in its route family's shape (OpenAI's error under /v1/, API Gateway's message
    elsewhere) with a Bearer challenge, and the handler never ran."""
    expired = access_token(pool_key, exp=int(time.time()) - 1, iat=int(time.time()) - 100)
    for headers in ({}, {"Authorization": f"Bearer {expired}"}):
        method = "POST" if path == "/v1/chat/completions" else "GET"
        response = httpx2.request(method, f"{served.url}{path}", headers=headers, timeout=10)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        body = response.json()
        if expected is not None:
            assert body == expected
        else:
            assert body["error"]["code"] == "invalid_api_key" and body["error"]["type"] == "invalid_request_error"
    assert stand_in.events == []


def test_readiness_needs_no_token_and_a_handler_bug_is_a_502(
    served: Served, stand_in: StandIn, pool_key: rsa.RSAPrivateKey
) -> None:
    """Given the app
    When the adapter checks readiness, and an authenticated request makes the handler raise
    Then readiness is 200 without a token or a handler call, and the bug is a 502 as API Gateway answers one."""
    ready = httpx2.get(f"{served.url}{READINESS_PATH}", timeout=10)
    assert ready.status_code == 200 and stand_in.events == []
    headers = {"Authorization": f"Bearer {access_token(pool_key)}"}
    boom = httpx2.get(f"{served.url}/boom", headers=headers, timeout=10)
    assert boom.status_code == 502 and boom.json() == {"message": "Internal Server Error"}


def test_the_app_takes_its_issuer_and_audience_from_the_settings(keys: Keys) -> None:
    """Given settings naming the pool's issuer and its clients as MISSIONS_JWT_AUDIENCE (comma-separated,
    as the stack writes it), and settings naming none
    When the app is made
    Then it verifies against them; without them it refuses to start."""
    base = {f"MISSIONS_{name}": "tbl" for name in ("MISSIONS_TABLE", "CHECKPOINTS_TABLE", "EVENTS_TABLE")}
    base |= {"MISSIONS_INTERRUPTS_TABLE": "tbl", "MISSIONS_BLOB_BUCKET": "bucket"}
    settings = RuntimeSettings.from_env(
        {**base, "MISSIONS_JWT_ISSUER": ISSUER, "MISSIONS_JWT_AUDIENCE": f"{PEOPLE},{MACHINES}"}
    )
    app = create_app(StandIn(), settings, keys=keys)
    assert app.verifier.issuer == ISSUER and app.verifier.audience == {PEOPLE, MACHINES}
    with pytest.raises(ValueError, match="jwt_issuer"):
        create_app(StandIn(), RuntimeSettings.from_env(base), keys=keys)


def test_run_sh_serves_the_handler_next_to_it_as_lambda_lays_the_function_out(tmp_path: Path) -> None:
    """Given the function's folder as Lambda unpacks it (run.sh, server.py and a handler.py at the code
    root; the runtime library on PYTHONPATH as the layer puts it in /opt/python)
    When run.sh starts, as the adapter's wrapper runs it, with AWS_LWA_PORT set
    Then the server listens there: ready without a token, 401 for a request without one."""
    for name in ("run.sh", "server.py"):
        shutil.copy2(ROOT / "functions" / "stream" / name, tmp_path / name)
    (tmp_path / "handler.py").write_text(
        "def lambda_handler(event, context, runtime=None):\n"
        "    return {'statusCode': 200, 'headers': {}, 'body': 'never without a token'}\n"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT / "shared"),
        "AWS_LWA_PORT": str(port),
        "MISSIONS_MISSIONS_TABLE": "tbl",
        "MISSIONS_CHECKPOINTS_TABLE": "tbl",
        "MISSIONS_EVENTS_TABLE": "tbl",
        "MISSIONS_INTERRUPTS_TABLE": "tbl",
        "MISSIONS_BLOB_BUCKET": "bucket",
        "MISSIONS_JWT_ISSUER": ISSUER,
        "MISSIONS_JWT_AUDIENCE": PEOPLE,
    }
    process = subprocess.Popen(["sh", str(tmp_path / "run.sh")], env=environment, cwd="/")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                ready = httpx2.get(f"http://127.0.0.1:{port}{READINESS_PATH}", timeout=2)
                break
            except httpx2.TransportError:
                assert process.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.1)
        assert ready.status_code == 200
        assert httpx2.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 401
    finally:
        process.terminate()
        process.wait(10)


def test_an_issuer_that_cannot_be_reached_is_a_401_and_is_tried_again() -> None:
    """Given a verifier whose issuer has no OpenID configuration to read (nothing listens there)
    When a token is checked
    Then it is Unauthorized (not a server error), and no key source is kept for the next request."""
    verifier = TokenVerifier("https://127.0.0.1:9", ["client"])
    header, payload = (
        jwt.utils.base64url_encode(json.dumps(part).encode()).decode()
        for part in ({"alg": "RS256", "kid": KID, "typ": "JWT"}, {"sub": "ada"})
    )
    with pytest.raises(Unauthorized, match="OpenID configuration"):
        verifier.claims(f"Bearer {header}.{payload}.c2lnbmF0dXJl")
    assert verifier._keys is None
