"""Cognito's hosted sign-in and token endpoint, and API Gateway's JWT authorizer, played for tests.

moto's CloudFormation creates neither the user pool, its clients and domain, nor the HTTP API
(AWS::Cognito::* and AWS::ApiGatewayV2::* are not supported: the stack's outputs name a host
"None"), and moto has no OAuth 2.0 token endpoint at all. What the CLI needs from them is played
here, with what the stack configures (infra/components/api.py): a machine client with a secret
for client credentials and the scope missions/api, a public client for people (authorization
code with PKCE S256, its callback URLs), and an authorizer accepting tokens of those two clients
until they expire. Tokens are opaque strings here (the CLI never reads inside one); claims are
what the authorizer would pass on: `sub` (a person's id, or the machine client's id), `client_id`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from missions.client import Reply

SCOPE = "missions/api"


@dataclass
class PlayedCognito:
    machine_client: str = "machine-client"
    machine_secret: str = "machine-s3cret"
    user_client: str = "people-client"
    callback_urls: tuple[str, ...] = ("http://localhost:8787/callback",)
    person: str = "ada"  # who signs in on the hosted page
    lifetime: float = 3600.0
    clock: Callable[[], float] = time.time
    issued: dict[str, dict[str, Any]] = field(default_factory=dict)  # access token -> claims and expiry
    requests: list[dict[str, str]] = field(default_factory=list)  # every form posted to the token endpoint
    _codes: dict[str, dict[str, str]] = field(default_factory=dict)
    _refresh: dict[str, str] = field(default_factory=dict)  # refresh token -> sub

    # -- the token endpoint (POST /oauth2/token) -----------------------------------------------------

    def token_endpoint(self, headers: dict[str, str], body: bytes) -> Reply:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        self.requests.append(form)
        grant = form.get("grant_type")
        if grant == "client_credentials":
            if _basic(headers) != (self.machine_client, self.machine_secret):
                return _json(400, {"error": "invalid_client"})
            if form.get("scope") != SCOPE:
                return _json(400, {"error": "invalid_scope"})
            return self._tokens(self.machine_client, self.machine_client, refresh=False)
        if grant == "authorization_code":
            code = self._codes.pop(form.get("code", ""), None)
            if code is None or form.get("client_id") != self.user_client:
                return _json(400, {"error": "invalid_grant"})
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if challenge != code["challenge"] or form.get("redirect_uri") != code["redirect_uri"]:
                return _json(400, {"error": "invalid_grant"})
            return self._tokens(code["sub"], self.user_client, refresh=True)
        if grant == "refresh_token":
            sub = self._refresh.get(form.get("refresh_token", ""))
            if sub is None or form.get("client_id") != self.user_client:
                return _json(400, {"error": "invalid_grant"})
            return self._tokens(sub, self.user_client, refresh=False)
        return _json(400, {"error": "unsupported_grant_type"})

    def _tokens(self, sub: str, client_id: str, *, refresh: bool) -> Reply:
        access = "at-" + secrets.token_urlsafe(12)
        self.issued[access] = {"sub": sub, "client_id": client_id, "exp": self.clock() + self.lifetime}
        body: dict[str, Any] = {"access_token": access, "expires_in": int(self.lifetime), "token_type": "Bearer"}
        if refresh:
            body["refresh_token"] = "rt-" + secrets.token_urlsafe(12)
            body["id_token"] = "id-" + secrets.token_urlsafe(12)
            self._refresh[body["refresh_token"]] = sub
        return _json(200, body)

    # -- the hosted sign-in page: a person signs in, the browser goes to the callback ------------------

    def sign_in(self, authorize_url: str) -> str:
        """Where the hosted page sends the browser after `person` signed in (AssertionError when the
        request is one Cognito would refuse)."""
        parts = urlsplit(authorize_url)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        assert parts.path == "/oauth2/authorize", authorize_url
        assert query["response_type"] == "code" and query["client_id"] == self.user_client, query
        assert query["redirect_uri"] in self.callback_urls, query
        assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43, query
        assert SCOPE in query["scope"].split(), query
        code = "code-" + secrets.token_urlsafe(8)
        self._codes[code] = {
            "challenge": query["code_challenge"],
            "redirect_uri": query["redirect_uri"],
            "sub": self.person,
        }
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"

    def browser(self, authorize_url: str) -> None:
        """A browser that signs in and follows the redirect to the CLI's callback (in a thread: the CLI
        listens for it once this returns)."""
        redirected = self.sign_in(authorize_url)
        threading.Thread(target=_get, args=(redirected,), daemon=True).start()

    # -- API Gateway's JWT authorizer ------------------------------------------------------------------

    def claims(self, headers: dict[str, str]) -> dict[str, Any] | None:
        """The claims of a valid bearer token of either client, else None (API Gateway answers 401)."""
        authorization = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        if not authorization.startswith("Bearer "):
            return None
        found = self.issued.get(authorization.removeprefix("Bearer "))
        if found is None or found["exp"] <= self.clock():
            return None
        if found["client_id"] not in (self.machine_client, self.user_client):
            return None
        return {"sub": found["sub"], "client_id": found["client_id"]}


def _basic(headers: dict[str, str]) -> tuple[str, str] | None:
    value = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
    if not value.startswith("Basic "):
        return None
    user, _, password = base64.b64decode(value.removeprefix("Basic ")).decode().partition(":")
    return user, password


def _json(status: int, body: Any) -> Reply:
    return Reply(status, {"content-type": "application/json"}, json.dumps(body).encode())


def _get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=10) as response:
        response.read()


class AuthServer:
    """The played token endpoint on loopback HTTP (POST /oauth2/token), with a GET /missions that
    answers only tokens it issued: a stand-in API behind the played authorizer."""

    def __init__(self, cognito: PlayedCognito):
        self.cognito = cognito
        self.api_calls: list[str] = []  # the bearer of each /missions call
        played = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name for it
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                reply = (
                    played.cognito.token_endpoint(dict(self.headers), body) if self.path == "/oauth2/token" else None
                )
                self._send(reply or _json(404, {"message": "no route"}))

            def do_GET(self) -> None:
                claims = played.cognito.claims(dict(self.headers))
                played.api_calls.append(self.headers.get("Authorization", ""))
                if claims is None:
                    self._send(_json(401, {"message": "Unauthorized"}))
                else:
                    self._send(_json(200, {"missions": [], "cursor": None, "sub": claims["sub"]}))

            def _send(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> AuthServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
