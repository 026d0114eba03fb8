"""Conversations over HTTP (the dev server, the offline model): a follow-up that refers to the last turn
works from the conversation's working memory; users see, and forget, only their own conversations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_dev_server import Client, wait_for

pytestmark = pytest.mark.e2e


def shop_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two files: compute_tax defined in tax.py, called from checkout in shop.py (line 5)."""
    repo = tmp_path_factory.mktemp("shop")
    (repo / "tax.py").write_text('def compute_tax(amount, rate=0.2):\n    """Tax owed."""\n    return amount * rate\n')
    (repo / "shop.py").write_text(
        "from tax import compute_tax\n\n\ndef checkout(total):\n    return compute_tax(total)\n"
    )
    return repo


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    repo = shop_repository(tmp_path_factory)
    cloud = LocalCloud(["code_analysis"], settings={"repo_roots": [str(repo)]})
    with cloud, DevServer(cloud, port=0) as dev:
        dev.repo = repo  # type: ignore[attr-defined]
        yield dev


def ask(client: Client, server: DevServer, goal: str, conversation: str) -> dict[str, Any]:
    body = {
        "capability": "code_analysis",
        "goal": goal,
        "context": {"repo": str(server.repo)},
        "conversation_id": conversation,
    }  # type: ignore[attr-defined]
    status, created = client.call("POST", "/missions", body)
    assert status == 202, created
    return wait_for(client, created["mission_id"], {"completed", "failed"}, timeout=120)


def test_a_follow_up_answers_about_what_the_last_turn_was_about(server: DevServer):
    ada = Client(server, "ada")
    first = ask(ada, server, "Where is compute_tax defined?", "chat-1")
    assert first["status"] == "completed" and "tax.py:1" in first["result"]["citations"]
    # When the user follows up without naming it
    second = ask(ada, server, "Who calls it?", "chat-1")
    # Then the answer is about compute_tax: the call in checkout is cited
    assert second["status"] == "completed", second
    assert "compute_tax" in second["result"]["answer"] and "shop.py:5" in second["result"]["citations"]
    # and the conversation holds both turns, what was in focus and the evidence
    status, conversation = ada.call("GET", "/conversations/chat-1")
    assert status == 200, conversation
    assert [t["goal"] for t in conversation["turns"]] == ["Where is compute_tax defined?", "Who calls it?"]
    assert "compute_tax" in conversation["focus"] and "shop.py:5" in conversation["evidence"]


def test_conversations_are_per_user_and_forgotten_on_request(server: DevServer):
    bo = Client(server, "bo")
    ask(bo, server, "Where is checkout defined?", "chat-2")
    assert Client(server, "cy").call("GET", "/conversations/chat-2")[0] == 404  # another user's: missing
    assert [c["conversation_id"] for c in bo.call("GET", "/conversations")[1]["conversations"]] == ["chat-2"]
    assert bo.call("DELETE", "/conversations/chat-2")[0] == 204
    assert bo.call("GET", "/conversations/chat-2")[0] == 404
    assert bo.call("DELETE", "/conversations/chat-2")[0] == 404
    # a bad conversation id is refused before anything is stored
    status, error = bo.call(
        "POST", "/missions", {"goal": "x", "capability": "code_analysis", "conversation_id": "no spaces"}
    )
    assert status == 422, error
