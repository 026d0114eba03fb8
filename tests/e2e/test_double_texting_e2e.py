"""Double-texting through the chat (OpenAI's SDK) and the HTTP API on the dev server: a message sent while its
conversation's mission still runs follows the strategy it names (reject, enqueue, interrupt, rollback)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_chat_e2e import chat
from tests.e2e.test_dev_server import Client, wait_for
from tests.integration.conftest import with_capabilities
from tests.support.slow import GATE, SLOW

pytestmark = pytest.mark.e2e
ENDED = {"completed", "failed", "cancelled"}


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    names, known = with_capabilities(SLOW)
    cloud = LocalCloud([*names, "shopping"], registry=known, prefix="double-text")
    with cloud, DevServer(cloud, port=0) as dev:
        yield dev


@pytest.fixture(autouse=True)
def gate() -> Iterator[None]:
    GATE.clear()
    yield
    GATE.set()  # nothing stays waiting after a test


def say(client: openai.OpenAI, text: str, conversation: str | None = None, **extra: Any) -> Any:
    body: dict[str, Any] = {"wait_seconds": 1, **extra}
    if conversation is not None:
        body["conversation_id"] = conversation
    return client.chat.completions.create(
        model=SLOW.name, messages=[{"role": "user", "content": text}], extra_body=body
    )


def running(server: DevServer, user: str) -> tuple[openai.OpenAI, str, str]:
    """A conversation whose first mission is still running: (the client, the conversation, the mission)."""
    client = chat(server, user)
    first = say(client, "a slow essay")
    assert (first.choices[0].message.content or "").startswith("Still working on it"), first
    extra = first.model_extra or {}
    return client, extra["conversation_id"], extra["mission_id"]


def test_reject_refuses_the_message_with_409_naming_the_running_mission(server: DevServer):
    client, conversation, first = running(server, "rae")
    with pytest.raises(openai.ConflictError) as refused:
        say(client, "another", conversation, multitask_strategy="reject")
    assert refused.value.code == "conversation_busy" and first in str(refused.value.message)
    GATE.set()
    done = wait_for(Client(server, "rae"), first, ENDED)
    assert done["status"] == "completed"


def test_enqueue_keeps_the_message_and_runs_it_after_the_first(server: DevServer):
    client, conversation, first = running(server, "eli")
    second = say(client, "another essay", conversation)  # enqueue: the capability's default
    content = second.choices[0].message.content or ""
    assert "Still working on it" in content and "starts when it ends" in content, content
    queued = (second.model_extra or {})["mission_id"]
    assert queued != first and Client(server, "eli").call("GET", f"/missions/{queued}")[1]["queue"]["held"] == "key"
    # When the first goes on, the next message gets both answers: the first's, then the second's
    GATE.set()
    third = say(client, "and a third", conversation, wait_seconds=20)
    text = third.choices[0].message.content or ""
    assert "done: another essay" in text and "'a slow essay'" in text, text  # the second remembered the first


def test_interrupt_cancels_the_first_and_the_new_one_knows_what_it_replaced(server: DevServer):
    client, conversation, first = running(server, "ivo")
    second = say(client, "a short essay", conversation, multitask_strategy="interrupt", wait_seconds=20)
    text = second.choices[0].message.content or ""
    assert "done: a short essay (instead of: a slow essay)" in text, text
    shown = Client(server, "ivo").call("GET", f"/missions/{first}")[1]
    assert (shown["status"], shown["terminal_reason"]) == ("cancelled", "interrupted")


def test_rollback_cancels_the_first_and_the_conversation_forgets_it(server: DevServer):
    client, conversation, first = running(server, "rob")
    second = say(client, "a short essay", conversation, multitask_strategy="rollback", wait_seconds=20)
    text = second.choices[0].message.content or ""
    assert "done: a short essay; remembered: []" in text, text
    shown = Client(server, "rob").call("GET", f"/missions/{first}")[1]
    assert (shown["status"], shown["terminal_reason"]) == ("cancelled", "rolled_back")
    turns = Client(server, "rob").call("GET", f"/conversations/{conversation}")[1]["turns"]
    assert [turn["goal"] for turn in turns] == ["a short essay"]


def test_the_api_honours_a_concurrency_key_for_every_strategy(server: DevServer):
    api = Client(server, "kai")

    def start(goal: str, **fields: Any) -> tuple[int, Any]:
        return api.call(
            "POST", "/missions", {"capability": SLOW.name, "goal": goal, "concurrency_key": "doc-1", **fields}
        )

    status, first = start("a slow draft")
    assert status == 202 and first["status"] == "started"
    status, refused = start("again", multitask_strategy="reject")
    assert status == 409 and first["mission_id"] in refused["message"]
    status, second = start("a second draft")
    assert (status, second["status"], second["held"]) == (202, "queued", "key")
    status, third = start("a third draft", multitask_strategy="interrupt")
    assert (status, third["status"]) == (202, "started")
    assert wait_for(api, first["mission_id"], ENDED)["terminal_reason"] == "interrupted"
    # the second waits behind the third now, and runs once the third ends
    assert wait_for(api, third["mission_id"], {"completed"})["result"]["answer"].startswith(
        "done: a third draft (instead of: a slow draft)"
    )
    assert wait_for(api, second["mission_id"], {"completed"})["status"] == "completed"


def test_the_double_texting_example_runs_as_written(server: DevServer):
    import json
    import subprocess

    from tests.support.docs import sh_blocks

    block = sh_blocks("docs/flow-control.md", "## Double-texting")[0]
    setup, commands = block[0], block[1:]
    answers = []
    for command in commands:
        command = command.replace("localhost:8787", server.url.removeprefix("http://")).replace("dev:alice", "dev:ada")
        result = subprocess.run(
            ["bash", "-c", f"{setup}; {command} -w '\\n%{{http_code}}'".replace("dev:alice", "dev:ada")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        body, _, status = result.stdout.rpartition("\n")
        answers.append((int(status), json.loads(body)))
        if len(answers) == 1:  # the first waits for the choice it asks before the next one arrives
            wait_for(Client(server, "ada"), answers[0][1]["mission_id"], {"interrupted"})
    assert [status for status, _ in answers] == [202, 409, 202, 202, 202], answers
    first = answers[0][1]["mission_id"]
    assert first in answers[1][1]["message"] and answers[2][1]["held"] == "key" and "held" not in answers[3][1]
    assert wait_for(Client(server, "ada"), first, ENDED)["terminal_reason"] == "interrupted"
    # the interrupting one was rolled back in its turn; the last runs (it asks for its own choice), and the
    # enqueued one waits behind it
    assert wait_for(Client(server, "ada"), answers[3][1]["mission_id"], ENDED)["terminal_reason"] == "rolled_back"
    assert wait_for(Client(server, "ada"), answers[4][1]["mission_id"], {"interrupted"})
    assert Client(server, "ada").call("GET", f"/missions/{answers[2][1]['mission_id']}")[1]["queue"]["held"] == "key"
