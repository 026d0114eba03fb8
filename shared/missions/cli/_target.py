"""The API a command talks to: `--env`, `--api-url`, `--token` and `--region`, declared once here.

Users type these options after the command (`missions list --env dev`, `missions repos add . --env dev`),
so they cannot live on the root callback (click reads a group's options before the subcommand's name).
`targeted` adds them to a command instead: the command declares one keyword-only parameter
`target: Target` where the options belong in its help, and receives them resolved into a `Target`,
which finds the API, signs in and builds the client when the command first asks for it (a command's own
checks, like `me erase` without `--yes`, come before any call to AWS).
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any
from urllib.parse import quote

import typer

from missions.client import LOCAL_API, ApiClient, Endpoints, stack_endpoints

from ._console import fail, one_line
from ._tokens import cached_token, dev_token
from ._wiring import Wiring

API_URL_HELP = "The API's base URL (env MISSIONS_API_URL; default: a local `missions dev`, or --env's stack's)."
TOKEN_HELP = "Bearer token (env MISSIONS_TOKEN; default: the one `missions login` cached, else dev:$USER)."
ENV_HELP = "A deployed environment: the API and its sign-in are read from stack missions-<env>'s outputs."
REGION_HELP = "The stack's AWS region (default: AWS_REGION, the profile's)."
STREAM_URL_HELP = (
    "Where the API streams (/v1, event streams): env MISSIONS_STREAM_URL, else what `missions login "
    "--stream-url` cached, the stack's StreamUrl output, or the API's URL (right for `missions dev`)."
)
EnvOption = Annotated[str | None, typer.Option("--env", help=ENV_HELP)]
TokenOption = Annotated[str | None, typer.Option("--token", help=TOKEN_HELP)]
RegionOption = Annotated[str | None, typer.Option("--region", help=REGION_HELP)]
StreamUrlOption = Annotated[str | None, typer.Option("--stream-url", help=STREAM_URL_HELP)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def path(*parts: str) -> str:
    """A URL path of ids as given: quoted, so an id cannot reach another route."""
    return "/" + "/".join(quote(part, safe="") for part in parts)


def stream_base(wiring: Wiring, endpoints: Endpoints, stream_url: str | None) -> str:
    """Where the streaming routes answer: --stream-url, MISSIONS_STREAM_URL, the URL `missions login
    --stream-url` cached for the API, the stack's StreamUrl output, else the API's own URL (the dev server)."""
    found = (
        stream_url
        or os.environ.get("MISSIONS_STREAM_URL")
        or wiring.cache().stream_url(endpoints.api_url)
        or endpoints.stream_url
        or endpoints.api_url
    )
    return found.rstrip("/")


@dataclass
class Target:
    """The options as given, and what they resolve to when a command asks."""

    wiring: Wiring
    env: str | None = None
    api_url: str | None = None
    token: str | None = None
    region: str | None = None
    stream_url: str | None = None
    _client: ApiClient | None = field(default=None, init=False, repr=False)

    def endpoints(self) -> Endpoints:
        """Where the API is: --api-url (or MISSIONS_API_URL, else a local `missions dev`), or --env's stack."""
        if self.env is None:
            return Endpoints(self.api_url or os.environ.get("MISSIONS_API_URL") or LOCAL_API)
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,30}", self.env):
            fail(f"--env {self.env!r}: an environment is named like dev, staging or prod")
        with one_line():
            found = stack_endpoints(self.env, self.wiring.cloudformation(self.region))
        return replace(found, api_url=self.api_url) if self.api_url else found

    def signed_in(self) -> tuple[Endpoints, str, str]:
        """(where the API is, the bearer token to call it with, what a 401 should suggest): see `api`."""
        endpoints = self.endpoints()
        env = self.env
        hint = f"sign in again: missions login --env {env}" if env else "pass --token, or sign in with missions login"
        bearer = self.token or os.environ.get("MISSIONS_TOKEN")
        if not bearer:
            with one_line():
                bearer = cached_token(self.wiring, endpoints, hint)
        if not bearer and env:
            fail(f"not signed in to {endpoints.stack}: missions login --env {env} (--browser for a person)")
        return endpoints, bearer or dev_token(), hint

    def api(self) -> ApiClient:
        """A client of the API named by --api-url or --env, with the token given, cached or taken with the
        client credentials in MISSIONS_CLIENT_ID/MISSIONS_CLIENT_SECRET; a local API gets dev:$USER."""
        if self._client is None:
            endpoints, bearer, hint = self.signed_in()
            self._client = ApiClient(endpoints.base, bearer, self.wiring.transport, self.wiring.sleep, hint)
        return self._client

    def stream_base(self, endpoints: Endpoints) -> str:
        return stream_base(self.wiring, endpoints, self.stream_url)


def targeted(
    *, token: bool = True, stream: bool = False, api_url_help: str = API_URL_HELP
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the target options in place of its `target` parameter (and the typer context, which
    holds the Wiring), and call it with them resolved into a `Target`. `token=False`: no --token (login,
    logout); `stream=True`: --stream-url too (chat)."""
    options: list[tuple[str, Any]] = [
        ("env", EnvOption),
        ("api_url", Annotated[str | None, typer.Option("--api-url", help=api_url_help)]),
    ]
    options += [("stream_url", StreamUrlOption)] if stream else []
    options += [("token", TokenOption)] if token else []
    options += [("region", RegionOption)]
    kw = inspect.Parameter.KEYWORD_ONLY

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        names = list(signature.parameters)
        takes_ctx = "ctx" in names
        # typer calls a command with keywords only, so every parameter may be keyword-only (and any order)
        params = [p.replace(kind=kw) for p in signature.parameters.values()]
        at = names.index("target")
        params[at : at + 1] = [inspect.Parameter(name, kw, default=None, annotation=a) for name, a in options]
        if not takes_ctx:
            params.insert(0, inspect.Parameter("ctx", kw, annotation=typer.Context))

        @functools.wraps(command)
        def with_target(**given: Any) -> None:
            ctx: typer.Context = given["ctx"] if takes_ctx else given.pop("ctx")
            chosen = {name: given.pop(name) for name, _ in options}
            command(**given, target=Target(ctx.ensure_object(Wiring), **chosen))

        with_target.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        with_target.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return with_target

    return decorate
