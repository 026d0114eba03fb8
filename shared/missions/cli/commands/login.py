"""`missions login` and `logout`: a token for a deployed API, cached (client credentials for a machine,
the hosted sign-in page for a person), and forgotten."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import typer

from missions.client import (
    Endpoints,
    Pkce,
    RedirectListener,
    Token,
    TokenEndpoint,
    code_from_redirect,
    sign_in,
)

from .._console import err, fail, one_line, out
from .._target import Target, targeted
from .._wiring import Wiring

app = typer.Typer()


@app.command("login")
@targeted(token=False)
def login(
    *,
    target: Target,
    token_url: str | None = typer.Option(None, "--token-url", help="The token endpoint (default: the stack's)."),
    client_id: str | None = typer.Option(
        None, "--client-id", envvar="MISSIONS_CLIENT_ID", help="A machine client (default: the stack's)."
    ),
    client_secret: str | None = typer.Option(
        None, "--client-secret", envvar="MISSIONS_CLIENT_SECRET", help="Its secret.", show_default=False
    ),
    browser: bool = typer.Option(False, "--browser", help="A person: the hosted sign-in page, code flow with PKCE."),
    wait: float = typer.Option(300.0, "--wait", min=1.0, help="Seconds to wait for the sign-in page's answer."),
    print_token: bool = typer.Option(False, "--print-token", help="Print the access token (for curl)."),
    stream_url: str | None = typer.Option(
        None,
        "--stream-url",
        envvar="MISSIONS_STREAM_URL",
        help="Where the API streams (the chat, event streams), cached with the token (default: the stack's "
        "StreamUrl output, else the API's URL).",
    ),
) -> None:
    """Get a token for a deployed API and cache it (~/.config/missions/tokens.json, mode 0600):
    client credentials for a machine, or --browser for a person."""
    if target.env is None and target.api_url is None and not os.environ.get("MISSIONS_API_URL"):
        fail("login needs --env (a deployed stack) or --api-url with --token-url")
    wiring = target.wiring
    endpoints = target.endpoints()
    if token_url:
        endpoints = replace(endpoints, token_url=token_url)
    if not endpoints.token_url:
        fail(f"{endpoints.base} names no token endpoint (IAM or your own identity provider?): pass --token-url")
    endpoint = TokenEndpoint(endpoints.token_url, wiring.transport, wiring.clock)
    with one_line():
        if browser:
            token = _browser_login(wiring, endpoints, endpoint, wait)
        else:
            client_id = client_id or endpoints.machine_client_id
            if not client_id or not client_secret:
                fail(
                    "client credentials need --client-id and --client-secret (or MISSIONS_CLIENT_ID and "
                    "MISSIONS_CLIENT_SECRET); a person signs in with --browser"
                )
            token = endpoint.client_credentials(client_id, client_secret, scope=endpoints.scope)
        cache = wiring.cache()
        cache.put(endpoints.api_url, token)
        streams = stream_url or endpoints.stream_url
        if streams:  # `missions chat` streams there with this token
            cache.put_stream_url(endpoints.api_url, streams)
    if print_token:
        sys.stdout.write(token.access_token + "\n")
        return
    until = time.strftime("%H:%M", time.localtime(token.expires_at))
    out.print(
        f"signed in to {endpoints.base} as client {token.client_id} ({token.grant.replace('_', ' ')}); "
        f"the token is valid until {until}, cached in {cache.path}",
        highlight=False,
        soft_wrap=True,
    )


def _browser_login(wiring: Wiring, endpoints: Endpoints, endpoint: TokenEndpoint, wait: float) -> Token:
    """The hosted sign-in page in the browser; its answer arrives at the loopback callback (or is pasted)."""
    pkce = Pkce.new()
    page = sign_in(endpoints, pkce)
    try:
        listener: RedirectListener | None = RedirectListener(page.redirect_uri)
    except OSError as exc:  # the port is taken (by `missions dev`, say): the user pastes where it went
        err.print(f"[dim]cannot listen at {page.redirect_uri} ({exc}): paste the URL instead[/]", highlight=False)
        listener = None
    err.print(f"Sign in at:\n  {page.url}", highlight=False, soft_wrap=True)
    wiring.open_browser(page.url)
    if listener is not None:
        with listener:
            redirected = listener.wait(wait)
    else:
        redirected = typer.prompt("The URL your browser was sent to", err=True)
    code = code_from_redirect(redirected, pkce.state)
    return endpoint.authorization_code(page.client_id, code, page.redirect_uri, pkce.verifier)


@app.command("logout")
@targeted(token=False)
def logout(*, target: Target) -> None:
    """Forget the cached token of an API."""
    endpoints = target.endpoints()
    removed = target.wiring.cache().remove(endpoints.api_url)
    message = f"signed out of {endpoints.base}" if removed else f"no token was cached for {endpoints.base}"
    out.print(message, highlight=False, soft_wrap=True)
