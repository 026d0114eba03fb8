"""How an MCP client finds out how to sign in: OAuth 2.0 Protected Resource Metadata (RFC 9728).

MCP's authorization spec has a client that gets 401 read the resource's metadata, either from the
`resource_metadata` of the 401's `WWW-Authenticate` challenge or from the well-known paths (the
path-suffixed one first), and sign in at an authorization server it names. In AWS that server is the
stack's user pool (its issuer, as the HTTP API's JWT authorizer checks it); on `missions dev` there is
none, and the token is `dev:<user>`.
"""

from __future__ import annotations

from typing import Any

MCP_PATH = "/mcp"
WELL_KNOWN = "/.well-known/oauth-protected-resource"
METADATA_PATHS = (WELL_KNOWN, WELL_KNOWN + MCP_PATH)
API_SCOPE = "missions/api"  # the user pool's resource server scope (infra/components/api.py)


def base_url(event: dict[str, Any]) -> str:
    """Where the request came in: scheme and host, as the client addressed the API."""
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    host = headers.get("host") or (event.get("requestContext") or {}).get("domainName") or "localhost"
    local = host.startswith(("127.", "localhost", "[::1]"))
    scheme = headers.get("x-forwarded-proto") or ("http" if local else "https")
    return f"{scheme}://{host}"


def protected_resource(event: dict[str, Any], issuer: str | None) -> dict[str, Any]:
    """The MCP endpoint's metadata document; without an issuer (the dev server), no authorization server."""
    document: dict[str, Any] = {
        "resource": base_url(event) + MCP_PATH,
        "resource_name": "missions",
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["openid", API_SCOPE],
        "authorization_servers": [issuer] if issuer else [],
    }
    if not issuer:
        document["resource_documentation"] = "missions dev: send `Authorization: Bearer dev:<user>`"
    return document


def challenge(event: dict[str, Any]) -> str:
    """The `WWW-Authenticate` of a 401 from the MCP endpoint: where its metadata is."""
    return f'Bearer resource_metadata="{base_url(event)}{WELL_KNOWN}{MCP_PATH}", scope="openid {API_SCOPE}"'


__all__ = ["API_SCOPE", "MCP_PATH", "METADATA_PATHS", "WELL_KNOWN", "base_url", "challenge", "protected_resource"]
