"""Missions as an MCP server: the endpoint any MCP client (Claude, Cursor, VS Code, agent SDKs) can use.

`POST /mcp` speaks MCP's streamable HTTP transport, stateless, through the official SDK (transport.py);
its tools and resources (server.py) are the API's operations, called as the request's own user
(caller.py). Who the user is comes from the API's authorizer, as for every route; OAuth clients find the
authorization server through the protected-resource metadata (RFC 9728) served beside it (discovery.py).
The SDK is imported by the first MCP request, not with the API.
"""
