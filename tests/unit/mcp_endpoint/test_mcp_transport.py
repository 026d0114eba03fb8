"""The MCP endpoint's transport and discovery, without a server: a payload v2 event in, the SDK's answer out."""

from __future__ import annotations

import json

import anyio

from missions.app.http_event import http_event
from missions.app.mcp.caller import Caller
from missions.app.mcp.discovery import challenge, protected_resource
from missions.app.mcp.transport import respond

ACCEPT = {"content-type": "application/json", "accept": "application/json, text/event-stream", "host": "api.example"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _event(message: dict, headers: dict[str, str] = ACCEPT) -> dict:
    return http_event("POST", "/mcp", "", headers, json.dumps(message).encode(), "ada")


def _caller() -> Caller:
    return Caller({"sub": "ada"}, runtime=None)  # type: ignore[arg-type]  # initialize calls no API operation


def _messages(body: bytes) -> list[dict]:
    """The JSON-RPC messages of an SSE body."""
    return [json.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")]


def test_an_initialize_is_answered_as_an_sse_stream_naming_the_server():
    answer = respond(_event(INITIALIZE), _caller())
    assert answer.status == 200 and answer.headers["content-type"].startswith("text/event-stream")
    (message,) = _messages(answer.body)
    assert message["id"] == 1 and message["result"]["serverInfo"]["name"] == "missions"
    assert "mcp-session-id" not in answer.headers  # stateless: no session to keep


def test_it_answers_the_same_from_a_thread_that_already_runs_an_event_loop():
    async def inside_a_loop() -> bytes:
        return respond(_event(INITIALIZE), _caller()).body

    assert _messages(anyio.run(inside_a_loop))[0]["result"]["serverInfo"]["name"] == "missions"


def test_a_notification_is_accepted_with_no_body_and_a_client_that_cannot_read_sse_is_refused():
    accepted = respond(_event({"jsonrpc": "2.0", "method": "notifications/initialized"}), _caller())
    assert (accepted.status, accepted.body) == (202, b"")
    refused = respond(_event(INITIALIZE, {**ACCEPT, "accept": "text/html"}), _caller())
    assert refused.status == 406


def test_the_metadata_names_the_resource_where_the_client_called_and_the_issuer_to_sign_in_at():
    event = _event(INITIALIZE)
    issuer = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc"
    document = protected_resource(event, issuer)
    assert document["resource"] == "https://api.example/mcp" and document["authorization_servers"] == [issuer]
    assert challenge(event).startswith('Bearer resource_metadata="https://api.example/.well-known/')
    local = http_event("GET", "/mcp", "", {"host": "127.0.0.1:8787"}, b"", None)
    assert protected_resource(local, None)["resource"] == "http://127.0.0.1:8787/mcp"
