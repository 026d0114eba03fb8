"""Which bearer token a command calls an API with: the one `missions login` cached (renewed when it is
about to expire), one taken with the client credentials in the environment, or dev:$USER locally."""

from __future__ import annotations

import os

from missions.client import ClientError, Endpoints, TokenEndpoint, current_token

from ._wiring import Wiring


def credentials(client_id: str | None = None, client_secret: str | None = None) -> tuple[str, str] | None:
    """A machine's client credentials: as given, else MISSIONS_CLIENT_ID and MISSIONS_CLIENT_SECRET."""
    client_id = client_id or os.environ.get("MISSIONS_CLIENT_ID")
    client_secret = client_secret or os.environ.get("MISSIONS_CLIENT_SECRET")
    return (client_id, client_secret) if client_id and client_secret else None


def dev_token() -> str:
    """The token a local API (`missions dev`, the chat's own dev server) takes for the user running it."""
    return f"dev:{os.environ.get('USER') or 'local'}"


def cached_token(wiring: Wiring, endpoints: Endpoints, hint: str) -> str | None:
    """The cached token (renewed when it is about to expire), else one taken with the client credentials
    in the environment; None when there is neither. A token that expired and cannot be renewed is an error,
    not a silent switch to another identity."""

    def endpoint(url: str) -> TokenEndpoint:
        return TokenEndpoint(url, wiring.transport, wiring.clock)

    cache, machine = wiring.cache(), credentials()
    cached = cache.get(endpoints.api_url)
    found = current_token(cache, endpoints.api_url, endpoint, wiring.clock(), machine, endpoints.scope)
    if found is None and machine and endpoints.token_url:  # a machine that never logged in: log in now
        found = endpoint(endpoints.token_url).client_credentials(*machine, scope=endpoints.scope)
        cache.put(endpoints.api_url, found)
    if found is None and cached is not None:
        raise ClientError(f"the token cached for {endpoints.base} has expired; {hint}")
    return found.access_token if found else None
