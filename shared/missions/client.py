"""A client of the missions HTTP API wherever it is deployed: where it is, a token for it, and calls
whose failures are one line.

- Endpoints: a stack's CloudFormation outputs (`ApiUrl`, `ApiTokenUrl`, `ApiSignInUrl`, `StreamUrl`, ...; CDK
  adds a hash to each output's name, so they are matched by name without it), or a URL given. The chat and
  event streams may answer at their own URL (a Lambda function URL in AWS: API Gateway neither streams
  nor waits past 30 s); without one they are under the API's URL, as on the dev server.
- Tokens: Cognito's client-credentials grant (machines) or the authorization code grant with PKCE
  (people, through the hosted sign-in page), cached per API in a file only its owner can read, and
  taken again (or refreshed) shortly before they expire.
- Calls: JSON in and out; 409/429/503 with Retry-After are retried a few times (a POST only when it
  carries an Idempotency-Key, or answers a question not yet answerable: the API stores nothing then);
  any other failure is a ClientError whose message is one line (status, the API's message, the
  invalid fields, the correlation id).

What it talks through (the HTTP transport, CloudFormation, the clock) is passed in: the CLI passes
the real ones, tests their own. It never imports the CLI or the emulation.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlencode, urlsplit

API_SCOPE = "missions/api"
LOCAL_API = "http://127.0.0.1:8787"
EARLY_SECONDS = 60.0  # a token this close to its expiry is taken again: a call must not outlive it
RETRIES = 4  # attempts of a call answered "retry later"
MAX_WAIT = 5.0  # seconds at most between them, whatever Retry-After says
TIMEOUT = 120.0  # seconds for one request (an upload of an archive of up to 100 MB among them)
# the stack's outputs (infra/components/api.py) by their names without CDK's hash, and what they give
OUTPUTS = {
    "ApiUrl": "api_url",
    "ApiTokenUrl": "token_url",
    "ApiSignInUrl": "sign_in_url",
    "ApiUserClientId": "user_client_id",
    "ApiMachineClientId": "machine_client_id",
    "ApiUserPoolId": "user_pool_id",
    "ApiApiScope": "scope",
    "StreamUrl": "stream_url",
}
_CDK_HASH = re.compile(r"[0-9A-F]{8}$")


class ClientError(Exception):
    """A problem the user can act on, in one line."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body.decode(errors="replace")


class Transport(Protocol):
    def __call__(self, method: str, url: str, headers: Mapping[str, str], data: bytes | None) -> Reply:
        """Send one request; ClientError when nothing answered."""


def urllib_transport(method: str, url: str, headers: Mapping[str, str], data: bytes | None) -> Reply:
    """HTTP(S) through the standard library: an error status is a Reply too."""
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return Reply(response.status, _lowered(response.headers.items()), response.read())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, _lowered(exc.headers.items()), exc.read())
    except (urllib.error.URLError, OSError) as exc:
        raise ClientError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None


def _lowered(items: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in items}


# -- where the API is ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoints:
    """Where a deployment answers: the API, and (with a Cognito pool) where tokens come from."""

    api_url: str
    token_url: str | None = None
    sign_in_url: str | None = None
    user_client_id: str | None = None
    machine_client_id: str | None = None
    user_pool_id: str | None = None
    scope: str = API_SCOPE
    stack: str | None = None  # the stack they were read from
    stream_url: str | None = None  # the streaming routes (/v1, event streams) when not under the API's URL

    @property
    def base(self) -> str:
        return self.api_url.rstrip("/")


def stack_name(env: str) -> str:
    return f"missions-{env}"


def stack_endpoints(env: str, cloudformation: Any) -> Endpoints:
    """The endpoints stack `missions-<env>` outputs (a boto3 CloudFormation client reads them)."""
    name = stack_name(env)
    try:
        stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    except Exception as exc:  # botocore's errors, without importing botocore
        raise ClientError(f"cannot read the outputs of stack {name}: {_aws_reason(exc)}") from None
    outputs = {_CDK_HASH.sub("", o["OutputKey"]): o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    found = {field_: outputs[output] for output, field_ in OUTPUTS.items() if outputs.get(output)}
    if "api_url" not in found:
        raise ClientError(f"stack {name} has no ApiUrl output: is it a missions stack, and deployed completely?")
    return Endpoints(**found, stack=name)


def _aws_reason(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response.get("Error"):
        error = response["Error"]
        return f"{error.get('Code')}: {error.get('Message')}"
    name = type(exc).__name__
    if name == "NoCredentialsError":
        return "no AWS credentials (set AWS_PROFILE, or the AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY variables)"
    if name == "NoRegionError":
        return "no AWS region (pass --region or set AWS_REGION)"
    return f"{name}: {exc}"


# -- calls -----------------------------------------------------------------------------------------


def error_line(status: int, body: Any, hint: str = "") -> str:
    """One line for a failed call: its status, the API's message, each invalid field, the correlation id."""
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("error") or "")
        fields = [
            f"{'.'.join(str(p) for p in d.get('loc', [])[1:]) or 'body'}: {d.get('message', '')}"
            for d in body.get("detail") or []
            if isinstance(d, dict) and d.get("message") != message  # not the message again
        ]
        if fields:
            message += " (" + "; ".join(fields) + ")"
        upcoming = body.get("next_fire_times")
        if isinstance(upcoming, list) and upcoming:  # a schedule refused: when it would have fired
            message += f"; it would fire next at {', '.join(str(t) for t in upcoming[:3])}"
        if body.get("correlation_id") and status >= 500:
            message += f" [correlation id {body['correlation_id']}]"
    else:
        message = " ".join(str(body or "").split())[:200]
    text = f"HTTP {status}: {message or 'no message'}"
    if status == 401:
        text += f"; {hint or 'the token was refused (expired, or not for this API?)'}"
    elif status >= 500:
        text += "; try again later"
    return text


@dataclass
class ApiClient:
    """Calls to one API with one bearer token."""

    base_url: str
    token: str | None
    transport: Transport = urllib_transport
    sleep: Callable[[float], None] = time.sleep
    sign_in_hint: str = ""  # what a 401 should suggest

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        ok: tuple[int, ...] = (200,),
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The decoded JSON of a successful response; ClientError otherwise."""
        url = self.base_url.rstrip("/") + path
        params = {k: v for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urlencode(params)
        sent = {"Accept": "application/json", **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        retry = method == "GET" or "Idempotency-Key" in sent or "/interrupts/" in path
        for attempt in range(1, RETRIES + 1):
            reply = self.transport(method, url, sent, data)
            if reply.status in ok:
                return reply.json()
            wait = _retry_after(reply)
            if not retry or wait is None or attempt == RETRIES:
                raise ClientError(error_line(reply.status, reply.json(), self.sign_in_hint))
            self.sleep(wait)
        raise AssertionError("unreachable")

    def download(self, path: str) -> bytes:
        """The body of a successful GET as it is (an export is not JSON); ClientError otherwise."""
        sent = {"Accept": "*/*", **({"Authorization": f"Bearer {self.token}"} if self.token else {})}
        for attempt in range(1, RETRIES + 1):
            reply = self.transport("GET", self.base_url.rstrip("/") + path, sent, None)
            if reply.status == 200:
                return reply.body
            wait = _retry_after(reply)
            if wait is None or attempt == RETRIES:
                raise ClientError(error_line(reply.status, reply.json(), self.sign_in_hint))
            self.sleep(wait)
        raise AssertionError("unreachable")

    def upload(self, url: str, data: bytes) -> None:
        """PUT to a presigned URL (it carries its own authorization)."""
        reply = self.transport("PUT", url, {}, data)
        if reply.status != 200:
            raise ClientError(f"the upload was refused: {error_line(reply.status, reply.json())}")


def _retry_after(reply: Reply) -> float | None:
    if reply.status not in (409, 429, 503):
        return None
    value = reply.headers.get("retry-after", "")
    try:
        return min(max(float(value), 0.0), MAX_WAIT)
    except ValueError:
        return None


# -- tokens ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    access_token: str = field(repr=False)
    expires_at: float  # unix time
    token_url: str
    client_id: str
    grant: str  # "client_credentials" or "authorization_code"
    refresh_token: str | None = field(default=None, repr=False)

    def fresh(self, now: float) -> bool:
        return now < self.expires_at - EARLY_SECONDS


def config_dir() -> Path:
    """$MISSIONS_CONFIG_DIR, else $XDG_CONFIG_HOME/missions, else ~/.config/missions."""
    if os.environ.get("MISSIONS_CONFIG_DIR"):
        return Path(os.environ["MISSIONS_CONFIG_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "missions"


class TokenCache:
    """Tokens by API URL in one JSON file, mode 0600 in a 0700 folder, replaced whole on every write
    (a reader never sees half a file). An unreadable file is an empty cache: tokens can be taken again.
    Beside each API's token, the stream URL `missions login --stream-url` named for it (if any)."""

    def __init__(self, path: Path):
        self.path = path

    def get(self, api_url: str) -> Token | None:
        entry = self._read("tokens").get(api_url.rstrip("/"))
        try:
            return Token(**entry) if isinstance(entry, dict) else None
        except TypeError:
            return None

    def put(self, api_url: str, token: Token) -> None:
        self._change("tokens", api_url, asdict(token))

    def stream_url(self, api_url: str) -> str | None:
        found = self._read("stream_urls").get(api_url.rstrip("/"))
        return found if isinstance(found, str) and found else None

    def put_stream_url(self, api_url: str, stream_url: str) -> None:
        self._change("stream_urls", api_url, stream_url.rstrip("/"))

    def remove(self, api_url: str) -> bool:
        """Forget an API's token and stream URL; whether it had a token."""
        data = self._document()
        found = data["tokens"].pop(api_url.rstrip("/"), None) is not None
        streamed = data["stream_urls"].pop(api_url.rstrip("/"), None) is not None
        if found or streamed:
            self._write(data)
        return found

    def _change(self, section: str, api_url: str, value: Any) -> None:
        data = self._document()
        data[section][api_url.rstrip("/")] = value
        self._write(data)

    def _read(self, section: str) -> dict[str, Any]:
        return self._document()[section]

    def _document(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        found = data if isinstance(data, dict) else {}
        return {
            section: found[section] if isinstance(found.get(section), dict) else {}
            for section in ("tokens", "stream_urls")
        }

    def _write(self, data: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor, scratch = tempfile.mkstemp(dir=self.path.parent, prefix=".tokens-")  # created 0600
        try:
            with os.fdopen(descriptor, "w") as handle:
                json.dump({"version": 1, **data}, handle, indent=1)
            os.chmod(scratch, 0o600)
            os.replace(scratch, self.path)
        except BaseException:
            os.unlink(scratch)
            raise


@dataclass
class TokenEndpoint:
    """Cognito's /oauth2/token (any OAuth 2.0 token endpoint)."""

    url: str
    transport: Transport = urllib_transport
    clock: Callable[[], float] = time.time

    def client_credentials(self, client_id: str, client_secret: str, scope: str = API_SCOPE) -> Token:
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        form = {"grant_type": "client_credentials", "scope": scope}
        return self._token(form, client_id, "client_credentials", {"Authorization": f"Basic {basic}"})

    def authorization_code(self, client_id: str, code: str, redirect_uri: str, verifier: str) -> Token:
        form = {
            "grant_type": "authorization_code",
            "client_id": client_id,
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        return self._token(form, client_id, "authorization_code")

    def refresh(self, token: Token) -> Token:
        if not token.refresh_token:
            raise ClientError("the token cannot be refreshed: sign in again")
        form = {"grant_type": "refresh_token", "client_id": token.client_id, "refresh_token": token.refresh_token}
        fresh = self._token(form, token.client_id, token.grant)
        return fresh if fresh.refresh_token else replace(fresh, refresh_token=token.refresh_token)

    def _token(self, form: dict[str, str], client_id: str, grant: str, headers: dict[str, str] | None = None) -> Token:
        sent = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json", **(headers or {})}
        now = self.clock()
        reply = self.transport("POST", self.url, sent, urlencode(form).encode())
        body = reply.json()
        if reply.status != 200 or not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            if isinstance(body, dict) and body.get("error"):
                described = f": {body['error_description']}" if body.get("error_description") else ""
                reason = f"{body['error']}{described}"
            else:
                reason = error_line(reply.status, body)
            raise ClientError(f"the token endpoint {self.url} refused {grant.replace('_', ' ')}: {reason}")
        return Token(
            access_token=body["access_token"],
            expires_at=now + float(body.get("expires_in") or 3600),
            token_url=self.url,
            client_id=client_id,
            grant=grant,
            refresh_token=body.get("refresh_token"),
        )


def current_token(
    cache: TokenCache,
    api_url: str,
    endpoint: Callable[[str], TokenEndpoint],
    now: float,
    credentials: tuple[str, str] | None = None,
    scope: str = API_SCOPE,
) -> Token | None:
    """The cached token for an API, taken again when it is about to expire: refreshed (a person's),
    or asked for with the client credentials given (a machine's). None when there is none to use."""
    token = cache.get(api_url)
    if token is not None and token.fresh(now):
        return token
    if token is not None and token.refresh_token:
        token = endpoint(token.token_url).refresh(token)
    elif token is not None and credentials and credentials[0] == token.client_id:
        token = endpoint(token.token_url).client_credentials(*credentials, scope=scope)
    else:
        return None
    cache.put(api_url, token)
    return token


# -- people: the hosted sign-in page, authorization code with PKCE ---------------------------------


@dataclass(frozen=True)
class Pkce:
    """RFC 7636: the verifier stays here; the sign-in page sees only its S256 challenge."""

    verifier: str
    state: str

    @classmethod
    def new(cls) -> Pkce:
        return cls(verifier=secrets.token_urlsafe(64), state=secrets.token_urlsafe(16))

    @property
    def challenge(self) -> str:
        digest = hashlib.sha256(self.verifier.encode("ascii")).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@dataclass(frozen=True)
class SignIn:
    """The hosted page's authorize URL for a person, and where it sends the code back."""

    url: str
    client_id: str
    redirect_uri: str


def sign_in(endpoints: Endpoints, pkce: Pkce) -> SignIn:
    """From the stack's sign-in URL (its domain, public client and first callback), the authorize
    request with the PKCE challenge and the state to check on the way back."""
    if not endpoints.sign_in_url or not endpoints.token_url:
        raise ClientError("this deployment has no hosted sign-in (no ApiSignInUrl/ApiTokenUrl output): pass --token")
    parts = urlsplit(endpoints.sign_in_url)
    given = {k: v[0] for k, v in parse_qs(parts.query).items()}
    client_id = endpoints.user_client_id or given.get("client_id")
    redirect_uri = given.get("redirect_uri")
    if not client_id or not redirect_uri:
        raise ClientError(f"the sign-in URL names no client or callback: {endpoints.sign_in_url}")
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": f"openid email profile {endpoints.scope}",
        "state": pkce.state,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
    }
    url = f"{parts.scheme}://{parts.netloc}/oauth2/authorize?{urlencode(query)}"
    return SignIn(url, client_id, redirect_uri)


def code_from_redirect(url: str, state: str) -> str:
    """The code in the URL the sign-in page sent the browser to (checked against our state)."""
    given = {k: v[0] for k, v in parse_qs(urlsplit(url.strip()).query).items()}
    if given.get("error"):
        raise ClientError(f"sign-in failed: {given['error']} {given.get('error_description', '')}".rstrip())
    if given.get("state") != state:
        raise ClientError("the sign-in answer is not for this request (its state differs): sign in again")
    if not given.get("code"):
        raise ClientError("the sign-in answer has no code")
    return given["code"]


class RedirectListener:
    """Listens where the sign-in page sends the browser back (a loopback callback URL) for that one
    request. OSError when the port is taken (then the user pastes the URL instead)."""

    def __init__(self, redirect_uri: str):
        parts = urlsplit(redirect_uri)
        if parts.hostname not in ("localhost", "127.0.0.1") or parts.scheme != "http":
            raise OSError(f"the callback {redirect_uri} is not a loopback http:// URL")
        self.redirect_uri = redirect_uri
        received: list[str] = []
        self._received = received

        class Callback(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name for it
                if urlsplit(self.path).path != parts.path:
                    self.send_error(404)
                    return
                received.append(f"{parts.scheme}://{parts.netloc}{self.path}")
                page = b"<p>Signed in to missions. You can close this tab and go back to the terminal.</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, format: str, *args: Any) -> None:  # no access log on the terminal
                pass

        self._server = HTTPServer(("127.0.0.1", parts.port or 80), Callback)
        self._server.timeout = 0.2

    def wait(self, timeout: float) -> str:
        """The URL the browser was sent to."""
        deadline = time.monotonic() + timeout
        while not self._received:
            if time.monotonic() > deadline:
                raise ClientError(f"no sign-in arrived at {self.redirect_uri} within {timeout:.0f} s")
            self._server.handle_request()
        return self._received[0]

    def close(self) -> None:
        self._server.server_close()

    def __enter__(self) -> RedirectListener:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
