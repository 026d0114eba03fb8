"""Missions as an MCP server, on the dev server: MCP clients configured by `missions mcp`, and nothing else.

Two independent client implementations: the official Python SDK's (every tool, the resources, progress, a
question answered, another user's mission refused) and the TypeScript SDK's (tests/support/mcp_client.mjs),
each speaking streamable HTTP to `/mcp` with the configuration the CLI printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl
from typer.testing import CliRunner

from missions.cli import app as cli
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_conversations_e2e import shop_repository
from tests.integration.conftest import with_capabilities
from tests.support import slow
from tests.support.mcp_session import Scenario, call, run_scenario

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
VAGUE = "Can you look into this?"  # code_analysis asks which code is meant first


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    repo = shop_repository(tmp_path_factory)
    names, known = with_capabilities(slow.SLOW)
    cloud = LocalCloud(["code_analysis", *names], registry=known, settings={"repo_roots": [str(repo)]})
    with cloud, DevServer(cloud, port=0) as dev:
        dev.repo = repo  # type: ignore[attr-defined]
        yield dev


def configured(server: DevServer, user: str, *args: str) -> dict[str, Any]:
    """What `missions mcp` prints for the dev server and this user."""
    printed = CliRunner().invoke(cli, ["mcp", "--api-url", server.url, "--token", f"dev:{user}", *args])
    assert printed.exit_code == 0, printed.output
    return json.loads(printed.stdout)  # type: ignore[no-any-return]


def as_client(server: DevServer, user: str, scenario: Scenario) -> Any:
    """Run `scenario` in a session of the Python SDK's client, configured as `missions mcp` says."""
    return run_scenario(configured(server, user)["mcpServers"]["missions"], scenario)


def test_the_cli_prints_each_clients_configuration_for_the_dev_server(server: DevServer):
    # Given the dev server's URL, When `missions mcp` prints the configuration for each client kind
    generic = configured(server, "ada")
    vscode = configured(server, "ada", "--client", "vscode")
    claude = CliRunner().invoke(cli, ["mcp", "--api-url", server.url, "--token", "dev:ada", "--client", "claude-code"])
    # Then each names the /mcp endpoint and the user's token, in its client's format
    expected = {"type": "http", "url": f"{server.url}/mcp", "headers": {"Authorization": "Bearer dev:ada"}}
    assert generic == {"mcpServers": {"missions": expected}}
    assert vscode == {"servers": {"missions": expected}}
    assert claude.stdout.strip() == (
        f"claude mcp add --transport http missions {server.url}/mcp --header 'Authorization: Bearer dev:ada'"
    )


def test_every_tool_is_listed_with_its_schema_and_what_it_changes(server: DevServer):
    async def scenario(client: ClientSession) -> Any:
        return (await client.list_tools()).tools, (await client.list_resource_templates()).resourceTemplates

    tools, templates = as_client(server, "ada", scenario)
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == {
        "list_capabilities",
        "start_mission",
        "get_mission",
        "list_missions",
        "list_questions",
        "answer_question",
        "cancel_mission",
    }
    assert by_name["start_mission"].inputSchema["required"] == ["goal"]
    assert by_name["get_mission"].annotations.readOnlyHint is True
    assert by_name["cancel_mission"].annotations.destructiveHint is True
    assert {t.uriTemplate for t in templates} == {
        "mission://{mission_id}/result",
        "mission://{mission_id}/events",
        "mission://{mission_id}/artifacts",
        "mission://{mission_id}/artifacts/{path}",
    }


def test_a_code_analysis_mission_is_started_answered_and_read_through_mcp_alone(server: DevServer):
    repo = str(server.repo)  # type: ignore[attr-defined]
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def scenario(client: ClientSession) -> Any:
        # Given the capabilities the server lists
        capabilities = await call(client, "list_capabilities", {})
        assert "code_analysis" in [c["name"] for c in capabilities["capabilities"]]
        # When a vague question starts a code_analysis mission
        started = await call(
            client,
            "start_mission",
            {"goal": VAGUE, "capability": "code_analysis", "context": {"repo": repo}},
            progress_callback=on_progress,
        )
        # Then the call returns once it asks, with its question and how to answer it
        assert started["status"] == "interrupted", started
        question = started["pending_interrupts"][0]
        assert question["kind"] == "clarification" and "answer_question" in started["follow"]
        listed = await call(client, "list_questions", {"mission_id": started["mission_id"]})
        assert [q["question"]["interrupt_id"] for q in listed["questions"]] == [question["interrupt_id"]]
        # When the question is answered, the call follows the mission to its end
        answered = await call(
            client,
            "answer_question",
            {
                "mission_id": started["mission_id"],
                "interrupt_id": question["interrupt_id"],
                "text": "Where is compute_tax defined?",
            },
            progress_callback=on_progress,
        )
        # Then it completed, and its result, events and documents are resources
        assert answered["answer"]["status"] == "answered" and answered["status"] == "completed", answered
        result = await client.read_resource(AnyUrl(f"mission://{started['mission_id']}/result"))
        events = await client.read_resource(AnyUrl(f"mission://{started['mission_id']}/events"))
        documents = await client.read_resource(AnyUrl(f"mission://{started['mission_id']}/artifacts"))
        listed_resources = (await client.list_resources()).resources
        return started, result, events, documents, listed_resources

    started, result, events, documents, listed = as_client(server, "ada", scenario)
    shown = json.loads(result.contents[0].text)
    assert shown["status"] == "completed" and "tax.py:1" in json.dumps(shown["result"]), shown
    types = [e["type"] for e in json.loads(events.contents[0].text)["events"]]
    assert types[0] == "orchestrator.started" and types[-1] == "orchestrator.completed"
    assert types.index("interrupt.raised") < types.index("interrupt.answered")
    assert "artifacts" in json.loads(documents.contents[0].text)
    assert f"mission://{started['mission_id']}/result" in [str(r.uri) for r in listed]
    # and progress was reported as the stages ran (with the stage's name), before and after the question
    assert any(m.startswith("running") for m in progress) and any(m.startswith("interrupted") for m in progress)
    assert progress[-1] == "completed: final" or progress[-1].startswith("completed"), progress


def test_another_users_mission_is_as_missing_as_one_that_does_not_exist(server: DevServer):
    # Given ada's mission waiting for her answer
    async def start(client: ClientSession) -> Any:
        repo = str(server.repo)  # type: ignore[attr-defined]
        return await call(
            client, "start_mission", {"goal": VAGUE, "capability": "code_analysis", "context": {"repo": repo}}
        )

    mission = as_client(server, "ada", start)
    question = mission["pending_interrupts"][0]

    # When bob reads, answers, cancels it and reads its result
    async def trespass(client: ClientSession) -> Any:
        ids = {"mission_id": mission["mission_id"]}
        refused = [
            await client.call_tool("get_mission", ids),
            await client.call_tool("answer_question", {**ids, "interrupt_id": question["interrupt_id"], "text": "x"}),
            await client.call_tool("cancel_mission", ids),
        ]
        with pytest.raises(McpError) as read:
            await client.read_resource(AnyUrl(f"mission://{mission['mission_id']}/result"))
        mine = await call(client, "list_questions", {})
        with pytest.raises(McpError) as unknown:
            await client.read_resource(AnyUrl(f"mission://{mission['mission_id']}/secrets"))
        return refused, read.value.error, mine, unknown.value.error

    refused, read, bobs_questions, unknown = as_client(server, "bob", trespass)
    # Then every call is refused as for a mission that does not exist, and bob sees none of ada's questions
    for result in refused:
        assert result.isError and result.content[0].text == f"404: no mission {mission['mission_id']}", result
    assert (read.code, read.message) == (-32002, f"404: no mission {mission['mission_id']}")  # not found
    assert unknown.code == -32602 and "resources are mission://" in unknown.message
    assert bobs_questions == {"questions": []}

    # and nothing changed: ada's mission still waits on the same question
    async def look(client: ClientSession) -> Any:
        return await call(client, "get_mission", {"mission_id": mission["mission_id"]})

    assert as_client(server, "ada", look)["pending_interrupts"] == [question]


def test_a_running_mission_is_returned_when_the_wait_ends_and_can_be_cancelled(server: DevServer):
    slow.GATE.clear()
    try:

        async def scenario(client: ClientSession) -> Any:
            # Given a mission that runs longer than the call waits
            started = await call(
                client, "start_mission", {"goal": "slow work", "capability": "t_slow", "wait_seconds": 0.5}
            )
            # When the user cancels it
            cancelled = await call(client, "cancel_mission", {"mission_id": started["mission_id"]})
            after = await call(client, "get_mission", {"mission_id": started["mission_id"], "wait_seconds": 10})
            return started, cancelled, after

        started, cancelled, after = as_client(server, "cy", scenario)
    finally:
        slow.GATE.set()
    # Then the start returned it running, with how to follow it; the cancel took
    assert started["status"] in {"running", "queued"} and "get_mission" in started["follow"], started
    assert cancelled == {"mission_id": started["mission_id"], "status": "cancelled"}
    assert after["status"] == "cancelled", after


def test_bad_arguments_and_unknown_tools_are_tool_errors_that_change_nothing(server: DevServer):
    async def scenario(client: ClientSession) -> Any:
        before = await call(client, "list_missions", {})
        results = [
            await client.call_tool("start_mission", {"capability": "code_analysis"}),  # no goal
            await client.call_tool("start_mission", {"goal": "x", "wait_seconds": 3600}),  # past the bound
            await client.call_tool("start_mission", {"goal": "x", "capability": "no_such_thing"}),
            await client.call_tool("launch_rockets", {}),
        ]
        after = await call(client, "list_missions", {})
        return before, results, after

    before, results, after = as_client(server, "dee", scenario)
    assert all(r.isError for r in results), results
    assert results[0].content[0].text == "invalid arguments: goal: Field required"
    assert results[1].content[0].text.startswith("invalid arguments: wait_seconds: Input should be less than")
    assert results[2].content[0].text.startswith("422: ") and "no_such_thing" in results[2].content[0].text
    assert "launch_rockets" in results[3].content[0].text
    assert before == after == {"missions": [], "cursor": None}


def _http(method: str, url: str, headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
    """(status, headers (case-insensitive), JSON body)."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, json.loads(exc.read() or b"null")


def test_a_client_without_a_token_is_told_where_to_find_how_to_sign_in(server: DevServer):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    request = urllib.request.Request(
        f"{server.url}/mcp",
        data=body,
        method="POST",
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
    )
    # When a client calls without a token
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    # Then it is 401 with the metadata's address (RFC 9728), which is served without a token
    assert refused.value.code == 401
    challenge = refused.value.headers["WWW-Authenticate"]
    assert f'resource_metadata="{server.url}/.well-known/oauth-protected-resource/mcp"' in challenge
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        status, _, metadata = _http("GET", server.url + path)
        # the dev server has no authorization server: its tokens are dev:<user>
        assert status == 200 and metadata["resource"] == f"{server.url}/mcp", metadata
        assert metadata["authorization_servers"] == [] and "dev:<user>" in metadata["resource_documentation"]
    # and the endpoint is stateless: no stream to open, no session to end
    for method in ("GET", "DELETE"):
        status, headers, error = _http(method, f"{server.url}/mcp", {"Authorization": "Bearer dev:ada"})
        assert (status, headers["Allow"]) == (405, "POST") and "stateless" in error["message"]


# `make test` installs the npm packages (package.json) first, the TypeScript SDK among them
NODE = shutil.which("node", path=f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}")


def test_the_typescript_sdks_client_does_the_same_with_the_same_configuration(server: DevServer):
    # Given the configuration `missions mcp` printed, handed to the TypeScript SDK's client
    scenario = {
        "config": configured(server, "eve"),
        "goal": VAGUE,
        "capability": "code_analysis",
        "context": {"repo": str(server.repo)},  # type: ignore[attr-defined]
        "answer": "Where is checkout defined?",
    }
    # When it starts a mission, answers its question and reads its result
    ran = subprocess.run(
        [str(NODE), str(ROOT / "tests" / "support" / "mcp_client.mjs")],
        input=json.dumps(scenario),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    # Then it saw what the Python client sees
    assert seen["server"]["name"] == "missions" and "start_mission" in seen["tools"]
    assert seen["started"]["status"] == "interrupted" and seen["answered"]["status"] == "completed", seen
    assert seen["result"]["status"] == "completed" and "shop.py:4" in json.dumps(seen["result"]["result"])
    assert any(message.startswith("running") for message in seen["progress"]), seen["progress"]
    assert seen["refused"] == {"isError": True, "text": "404: no mission m_not_yours"}
