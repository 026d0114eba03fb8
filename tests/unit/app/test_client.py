"""The API client the CLI's remote commands use: a stack's outputs, tokens (client credentials, PKCE,
the cache and its expiry) and one-line errors, against a token endpoint on loopback HTTP."""

from __future__ import annotations

import io
import json
import socket
import stat
from pathlib import Path
from typing import Any

import click.testing
import pytest
import typer.main
from typer.testing import CliRunner

from missions.cli import Wiring, app
from missions.client import (
    EARLY_SECONDS,
    ApiClient,
    ClientError,
    Endpoints,
    Pkce,
    Reply,
    TokenCache,
    code_from_redirect,
    error_line,
    sign_in,
    stack_endpoints,
)
from tests.support.cognito import AuthServer, PlayedCognito

CLEAN = {
    k: None
    for k in (
        "MISSIONS_TOKEN",
        "MISSIONS_API_URL",
        "MISSIONS_STREAM_URL",
        "MISSIONS_CLIENT_ID",
        "MISSIONS_CLIENT_SECRET",
    )
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cognito(clock: Clock) -> PlayedCognito:
    return PlayedCognito(clock=clock, callback_urls=(f"http://localhost:{_free_port()}/callback",))


@pytest.fixture
def server(cognito: PlayedCognito):
    with AuthServer(cognito) as running:
        yield running


class FakeCloudFormation:
    """describe_stacks as CloudFormation answers it: outputs named with CDK's hash suffix."""

    def __init__(self, stacks: dict[str, dict[str, str]]):
        self.stacks = stacks

    def describe_stacks(self, StackName: str) -> dict[str, Any]:  # boto3 names it so
        if StackName not in self.stacks:
            error = {"Code": "ValidationError", "Message": f"Stack with id {StackName} does not exist"}
            raise type("ClientError", (Exception,), {"response": {"Error": error}})()
        outputs = [{"OutputKey": k, "OutputValue": v} for k, v in self.stacks[StackName].items()]
        return {"Stacks": [{"StackName": StackName, "Outputs": outputs}]}


def dev_stack(server: AuthServer, cognito: PlayedCognito) -> FakeCloudFormation:
    callback = cognito.callback_urls[0]
    return FakeCloudFormation(
        {
            "missions-dev": {
                "ApiUrlDDEE0114": server.url + "/",
                "ApiTokenUrlB7E5CE3F": server.url + "/oauth2/token",
                "ApiSignInUrl0D3CF434": f"{server.url}/login?client_id={cognito.user_client}&response_type=code"
                f"&redirect_uri={callback.replace(':', '%3A').replace('/', '%2F')}",
                "ApiUserClientIdA1B2C3D4": cognito.user_client,
                "ApiApiScopeF5E3FF0A": "missions/api",
                "Capabilities": "[]",
            }
        }
    )


def missions(wiring: Wiring, config: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(
        app, list(args), obj=wiring, env={**CLEAN, "MISSIONS_CONFIG_DIR": str(config), **(env or {})}
    )
    assert "Traceback" not in result.output, result.output
    return result


def machine_login(server: AuthServer, client_id: str, secret: str) -> list[str]:
    token_url = server.url + "/oauth2/token"
    return [
        "login",
        "--api-url",
        server.url,
        "--token-url",
        token_url,
        "--client-id",
        client_id,
        "--client-secret",
        secret,
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- client credentials, the cache, expiry --------------------------------------------------------


def test_client_credentials_login_caches_the_token_privately_and_the_next_command_uses_it(
    server: AuthServer, cognito: PlayedCognito, clock: Clock, tmp_path: Path
):
    wiring = Wiring(clock=clock)
    config = tmp_path / "config"
    # When a machine logs in with its client id and secret
    login = missions(wiring, config, *machine_login(server, cognito.machine_client, cognito.machine_secret))
    # Then the token endpoint saw one client-credentials request for the API's scope
    assert login.exit_code == 0, login.output
    assert cognito.requests == [{"grant_type": "client_credentials", "scope": "missions/api"}]
    # and the token is cached in a file only its owner reads, in a folder only its owner opens, without the secret
    cache = config / "tokens.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600 and stat.S_IMODE(config.stat().st_mode) == 0o700
    assert cognito.machine_secret not in cache.read_text()
    (token,) = cognito.issued
    assert json.loads(cache.read_text())["tokens"][server.url]["access_token"] == token
    # When a command calls that API with no --token
    listed = missions(wiring, config, "list", "--api-url", server.url, "--json")
    # Then it sent the cached token, and asked for no other
    assert listed.exit_code == 0, listed.output
    assert server.api_calls == [f"Bearer {token}"] and len(cognito.requests) == 1
    assert json.loads(listed.stdout)["sub"] == cognito.machine_client


def test_login_caches_the_stream_url_beside_the_token_and_logout_forgets_both(
    server: AuthServer, cognito: PlayedCognito, clock: Clock, tmp_path: Path
):
    config = tmp_path / "config"
    stream = "https://abc.lambda-url.eu-west-1.on.aws/"
    login = missions(
        Wiring(clock=clock),
        config,
        *machine_login(server, cognito.machine_client, cognito.machine_secret),
        "--stream-url",
        stream,
    )
    assert login.exit_code == 0, login.output
    cache = TokenCache(config / "tokens.json")
    assert cache.stream_url(server.url) == stream.rstrip("/") and cache.get(server.url) is not None
    assert missions(Wiring(clock=clock), config, "logout", "--api-url", server.url).exit_code == 0
    assert cache.stream_url(server.url) is None and cache.get(server.url) is None


def test_a_token_about_to_expire_is_taken_again_with_the_client_credentials_and_else_is_an_error(
    server: AuthServer, cognito: PlayedCognito, clock: Clock, tmp_path: Path
):
    wiring, config = Wiring(clock=clock), tmp_path / "config"
    credentials = {"MISSIONS_CLIENT_ID": cognito.machine_client, "MISSIONS_CLIENT_SECRET": cognito.machine_secret}
    token_url = ["--token-url", server.url + "/oauth2/token"]
    assert missions(wiring, config, "login", "--api-url", server.url, *token_url, env=credentials).exit_code == 0
    (first,) = cognito.issued
    # Given the token is still valid, but within a minute of its expiry
    clock.now += cognito.lifetime - EARLY_SECONDS + 1
    # When a command runs without the client credentials
    stale = missions(wiring, config, "list", "--api-url", server.url)
    # Then it says the token expired, in one line, and sends nothing with another identity
    assert stale.exit_code == 2 and "has expired" in stale.output and len(stale.output.strip().splitlines()) == 1
    assert server.api_calls == []
    # When it runs with them (MISSIONS_CLIENT_ID/MISSIONS_CLIENT_SECRET, as a CI job has them)
    renewed = missions(wiring, config, "list", "--api-url", server.url, env=credentials)
    # Then a new token was taken, cached and used
    assert renewed.exit_code == 0, renewed.output
    second = next(t for t in cognito.issued if t != first)
    assert server.api_calls == [f"Bearer {second}"]
    assert TokenCache(config / "tokens.json").get(server.url).access_token == second  # type: ignore[union-attr]
    # and --print-token prints a fresh token alone, for curl
    printed = missions(wiring, config, *machine_login(server, *credentials.values()), "--print-token")
    assert printed.stdout.strip() in cognito.issued and printed.stdout.strip() not in (first, second)


def test_a_refused_client_is_one_line_and_caches_nothing(server: AuthServer, cognito: PlayedCognito, tmp_path: Path):
    result = missions(Wiring(), tmp_path, *machine_login(server, cognito.machine_client, "wrong"))
    assert result.exit_code == 2
    assert "refused client credentials: invalid_client" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "tokens.json").exists()


def test_login_without_a_secret_or_a_token_endpoint_says_what_is_missing(tmp_path: Path):
    no_secret = missions(Wiring(), tmp_path, "login", "--api-url", "http://x", "--token-url", "http://x/t")
    assert no_secret.exit_code == 2 and "--client-secret" in no_secret.output
    no_endpoint = missions(Wiring(), tmp_path, "login", "--api-url", "http://x", "--client-secret", "s")
    assert no_endpoint.exit_code == 2 and "--token-url" in no_endpoint.output
    nowhere = missions(Wiring(), tmp_path, "login")
    assert nowhere.exit_code == 2 and "--env" in nowhere.output


# -- people: hosted sign-in with PKCE, refresh ----------------------------------------------------


def test_a_person_signs_in_in_the_browser_with_pkce_and_the_token_is_refreshed(
    server: AuthServer, cognito: PlayedCognito, clock: Clock, tmp_path: Path
):
    # Given the dev stack's outputs and a browser in which ada signs in on the hosted page
    wiring = Wiring(cloudformation=lambda region: dev_stack(server, cognito), open_browser=cognito.browser, clock=clock)
    # When she runs login --browser
    login = missions(wiring, tmp_path, "login", "--env", "dev", "--browser", "--wait", "20")
    # Then the code came back to the CLI's callback and was exchanged with the PKCE verifier
    assert login.exit_code == 0, login.output
    assert "authorization code" in login.stdout
    exchange = cognito.requests[-1]
    assert exchange["grant_type"] == "authorization_code" and exchange["client_id"] == cognito.user_client
    assert exchange["redirect_uri"] == cognito.callback_urls[0]
    # and her commands on --env dev carry her token
    assert json.loads(missions(wiring, tmp_path, "list", "--env", "dev", "--json").stdout)["sub"] == "ada"
    # When the token nears its expiry
    clock.now += cognito.lifetime
    # Then the next command refreshes it with the refresh token (no browser again)
    assert json.loads(missions(wiring, tmp_path, "list", "--env", "dev", "--json").stdout)["sub"] == "ada"
    assert cognito.requests[-1]["grant_type"] == "refresh_token"


def test_when_the_callback_port_is_taken_the_url_the_browser_was_sent_to_is_pasted(
    server: AuthServer, cognito: PlayedCognito, tmp_path: Path
):
    # Given the callback's port is taken (`missions dev` on 8787, say)
    port = int(cognito.callback_urls[0].split(":")[2].split("/")[0])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        # and a browser that signs in; the person then pastes the URL it was sent to
        pasted = io.BytesIO()

        def browser(url: str) -> None:
            pasted.write(cognito.sign_in(url).encode() + b"\n")
            pasted.seek(0)

        wiring = Wiring(cloudformation=lambda region: dev_stack(server, cognito), open_browser=browser)
        result = click.testing.CliRunner().invoke(  # typer's runner takes no stream: the answer is pasted later
            typer.main.get_command(app),
            ["login", "--env", "dev", "--browser"],
            obj=wiring,
            input=pasted,
            env={**CLEAN, "MISSIONS_CONFIG_DIR": str(tmp_path)},
        )
    # Then the pasted code was exchanged, and the token cached
    assert result.exit_code == 0, result.output
    assert "paste the URL" in result.stderr and cognito.requests[-1]["grant_type"] == "authorization_code"
    assert TokenCache(tmp_path / "tokens.json").get(server.url) is not None


def test_the_authorize_url_carries_an_s256_challenge_and_the_answer_must_carry_our_state():
    # Given the stack's sign-in URL
    endpoints = Endpoints(
        "https://api.example/",
        token_url="https://pool.auth.example/oauth2/token",
        sign_in_url="https://pool.auth.example/login?client_id=c1&response_type=code"
        "&redirect_uri=http%3A%2F%2Flocalhost%3A8787%2Fcallback",
    )
    pkce = Pkce.new()
    # When the CLI builds the authorize request
    page = sign_in(endpoints, pkce)
    # Then it goes to the domain's /oauth2/authorize with the challenge, never the verifier
    assert page.url.startswith("https://pool.auth.example/oauth2/authorize?")
    assert f"code_challenge={pkce.challenge}" in page.url and pkce.verifier not in page.url
    assert (page.client_id, page.redirect_uri) == ("c1", "http://localhost:8787/callback")
    assert 43 <= len(pkce.verifier) <= 128
    # and an answer is taken only with the state it sent
    assert code_from_redirect(f"http://localhost:8787/callback?code=abc&state={pkce.state}", pkce.state) == "abc"
    with pytest.raises(ClientError, match="state differs"):
        code_from_redirect("http://localhost:8787/callback?code=abc&state=forged", pkce.state)
    with pytest.raises(ClientError, match="access_denied"):
        code_from_redirect("http://localhost:8787/callback?error=access_denied", pkce.state)


# -- a stack's outputs ----------------------------------------------------------------------------


def test_endpoints_are_read_from_the_stacks_outputs_whatever_cdks_hash():
    stack = FakeCloudFormation(
        {
            "missions-staging": {
                "ApiUrlDDEE0114": "https://abc.execute-api.eu-west-1.amazonaws.com/",
                "ApiTokenUrlB7E5CE3F": "https://missions-staging.auth.eu-west-1.amazoncognito.com/oauth2/token",
                "ApiMachineClientId9F8E7D6C": "m123",
                "ApiApiScopeF5E3FF0A": "missions/api",
                "StreamUrl0A1B2C3D": "https://abc.lambda-url.eu-west-1.on.aws/",
            },
            "missions-broken": {"Capabilities": "[]"},
        }
    )
    found = stack_endpoints("staging", stack)
    assert found.base == "https://abc.execute-api.eu-west-1.amazonaws.com"
    assert found.token_url and found.token_url.endswith("/oauth2/token") and found.machine_client_id == "m123"
    assert found.stack == "missions-staging" and found.sign_in_url is None
    assert found.stream_url == "https://abc.lambda-url.eu-west-1.on.aws/"  # the chat's function URL
    with pytest.raises(ClientError, match="stack missions-prod: ValidationError: Stack with id missions-prod does not"):
        stack_endpoints("prod", stack)
    with pytest.raises(ClientError, match="has no ApiUrl output"):
        stack_endpoints("broken", stack)


def test_a_bad_env_name_is_refused_before_any_aws_call(tmp_path: Path):
    def no_aws(region: str | None) -> Any:
        raise AssertionError("CloudFormation was called")

    result = missions(Wiring(cloudformation=no_aws), tmp_path, "list", "--env", "../prod")
    assert result.exit_code == 2 and "--env" in result.output


# -- calls: one-line errors, retries --------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            422,
            {
                "statusCode": 422,
                "message": "invalid request",
                "detail": [{"loc": ["body", "goal"], "message": "short"}],
            },
            "HTTP 422: invalid request (goal: short)",
        ),
        (404, {"message": "mission m_1 not found", "correlation_id": "c-1"}, "HTTP 404: mission m_1 not found"),
        (503, {"message": "down", "correlation_id": "c-9"}, "HTTP 503: down [correlation id c-9]; try again later"),
        (401, {"message": "Unauthorized"}, "HTTP 401: Unauthorized; sign in again"),
        (502, "<html>\n<b>Bad gateway</b>\n</html>", "HTTP 502: <html> <b>Bad gateway</b> </html>; try again later"),
    ],
)
def test_an_error_is_one_line_with_what_the_api_said(status: int, body: Any, expected: str):
    line = error_line(status, body, hint="sign in again")
    assert line == expected and "\n" not in line


def test_a_call_answered_retry_later_is_retried_only_when_safe():
    replies = [Reply(503, {"retry-after": "2"}, b'{"message": "busy"}'), Reply(200, {}, b'{"ok": true}')]
    sent: list[tuple[str, str]] = []
    slept: list[float] = []

    def transport(method: str, url: str, headers: Any, data: bytes | None) -> Reply:
        sent.append((method, url))
        return replies[len(sent) - 1]

    client = ApiClient("http://api", "t", transport, slept.append)
    # a GET is retried after Retry-After
    assert client.call("GET", "/missions") == {"ok": True} and slept == [2.0]
    # a POST without an Idempotency-Key is not: it could start a second mission
    sent.clear()
    with pytest.raises(ClientError, match="HTTP 503: busy"):
        client.call("POST", "/missions", {"goal": "g"}, ok=(202,))
    assert len(sent) == 1
