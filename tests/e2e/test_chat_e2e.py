"""The chat API with OpenAI's own SDK, and a mission's event stream with an SSE client, on the dev server
(the embedded emulation, the offline model).

Any OpenAI client can hold a conversation with any capability: the last user message is the goal, a
follow-up works from the conversation's working memory (found from the history the client sends back),
the mission's questions are the assistant's replies and the next message answers them, a mission that
outlives the wait answers with its status and the next message hands over its result.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from httpx_sse import connect_sse
from openai import OpenAI

from missions.core.capability.registry import Ctx, stage
from missions.core.mission.envelope import InterruptKind
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_conversations_e2e import shop_repository
from tests.e2e.test_dev_server import Client, wait_for
from tests.integration.conftest import chain, final_answer, make_capability, with_capabilities
from tests.support.stages import Answer, Out

pytestmark = pytest.mark.e2e

GATE = threading.Event()


@stage
def decide(ctx: Ctx) -> Answer:
    reply = ctx.ask(
        InterruptKind.CONFIRMATION, "Delete the 2 old backups?", data={"diff": "- backups/2024.tar\n- backups/2025.tar"}
    )
    return Answer(answer="Deleted both backups." if reply.approved else f"Kept them: {reply.text}")


@stage
def pick(ctx: Ctx) -> Answer:
    reply = ctx.ask(InterruptKind.CHOICE, "Which plan?", options=["basic", "family", "pro"])
    return Answer(answer=f"You chose the {reply.decision} plan.")


@stage
def hold() -> Out:
    GATE.wait(60)
    return Out()


APPROVES = make_capability("t_approves", chain("decide"), decide)
CHOOSES = make_capability("t_chooses", chain("pick"), pick)
SLOW = make_capability("t_slow", chain("hold", "final"), hold, final_answer("finally done"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    repo = shop_repository(tmp_path_factory)
    names, known = with_capabilities(APPROVES, CHOOSES, SLOW)
    cloud = LocalCloud(["code_analysis", *names], registry=known, settings={"repo_roots": [str(repo)]})
    with cloud, DevServer(cloud, port=0) as dev:
        dev.repo = repo  # type: ignore[attr-defined]
        yield dev


def chat(server: DevServer, user: str) -> OpenAI:
    """The official SDK, pointed at the dev server; the dev token names the user."""
    return OpenAI(base_url=f"{server.url}/v1", api_key=f"dev:{user}", max_retries=0, timeout=120)


def extra(reply: Any, name: str) -> Any:
    return (reply.model_extra or {}).get(name)


def test_the_models_are_the_capabilities_and_missions(server: DevServer):
    models = [m.id for m in chat(server, "ada").models.list()]
    assert models[0] == "missions" and {"code_analysis", "t_approves"} <= set(models)


def test_a_two_turn_conversation_follows_up_from_the_history_alone(server: DevServer):
    client = chat(server, "ada")
    # Given a first question about the repository
    messages: list[Any] = [{"role": "user", "content": "Where is compute_tax defined?"}]
    first = client.chat.completions.create(
        model="code_analysis", messages=messages, extra_body={"context": {"repo": str(server.repo)}}
    )
    answer = first.choices[0].message.content or ""
    assert "tax.py:1" in answer and extra(first, "mission_status") == "completed", answer
    # When the client sends the history back with a follow-up, naming neither the conversation nor the repo
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Who calls it?"}]
    second = client.chat.completions.create(model="missions", messages=messages)
    # Then the follow-up is a turn of the same conversation, about compute_tax
    follow_up = second.choices[0].message.content or ""
    assert "compute_tax" in follow_up and "shop.py:5" in follow_up, follow_up
    assert extra(second, "conversation_id") == extra(first, "conversation_id")
    status, conversation = Client(server, "ada").call("GET", f"/conversations/{extra(first, 'conversation_id')}")
    assert status == 200 and [t["goal"] for t in conversation["turns"]] == [
        "Where is compute_tax defined?",
        "Who calls it?",
    ]
    assert conversation["turns"][1]["mission_id"] == extra(second, "mission_id")


def test_streaming_sends_progress_then_the_answer(server: DevServer):
    client = chat(server, "bo")
    stream = client.chat.completions.create(
        model="code_analysis",
        messages=[{"role": "user", "content": "Where is checkout defined?"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"context": {"repo": str(server.repo)}},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    progress = "".join(extra(c.choices[0].delta, "reasoning_content") or "" for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # the stages as they ran, before the answer; the answer alone in the content
    assert "▸ " in progress and "shop.py:4" in content and "▸" not in content, (progress, content)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and not chunks[-1].choices


def test_an_approval_is_asked_in_the_chat_and_answered_by_the_next_message(server: DevServer):
    client = chat(server, "cy")
    messages: list[Any] = [{"role": "user", "content": "clean up my backups"}]
    asked = client.chat.completions.create(model="t_approves", messages=messages)
    question = asked.choices[0].message.content or ""
    # the question, what will change as a diff, and how to answer
    assert "Delete the 2 old backups?" in question and "- backups/2024.tar" in question and "approve" in question
    assert extra(asked, "mission_status") == "asking"
    conversation = extra(asked, "conversation_id")
    # a message that answers nothing is asked again, and nothing changes
    unclear = client.chat.completions.create(
        model="t_approves",
        messages=[
            *messages,
            {"role": "assistant", "content": question},
            {"role": "user", "content": "hmm, what do you think?"},
        ],
        extra_headers={"X-Conversation-Id": conversation},
    )
    assert "approve" in (unclear.choices[0].message.content or "")
    mission = Client(server, "cy").call("GET", f"/missions/{extra(asked, 'mission_id')}")[1]
    assert mission["status"] == "interrupted"
    # When the user approves in the next message
    done = client.chat.completions.create(
        model="t_approves",
        messages=[*messages, {"role": "assistant", "content": question}, {"role": "user", "content": "approve"}],
        extra_headers={"X-Conversation-Id": conversation},
    )
    # Then the mission resumes with that answer, and the reply is its result
    assert done.choices[0].message.content == "Deleted both backups."
    assert extra(done, "mission_id") == extra(asked, "mission_id")


def test_a_choice_is_answered_by_number(server: DevServer):
    client = chat(server, "di")
    messages: list[Any] = [{"role": "user", "content": "pick a plan for me"}]
    asked = client.chat.completions.create(model="t_chooses", messages=messages)
    question = asked.choices[0].message.content or ""
    assert "2. family" in question
    done = client.chat.completions.create(
        model="t_chooses",
        messages=[*messages, {"role": "assistant", "content": question}, {"role": "user", "content": "option 2"}],
    )
    assert done.choices[0].message.content == "You chose the family plan."


def test_a_mission_that_outlives_the_wait_is_picked_up_by_the_next_message(server: DevServer):
    client = chat(server, "ed")
    GATE.clear()
    messages: list[Any] = [{"role": "user", "content": "take your time"}]
    try:
        # Given a mission that runs longer than the client waits
        running = client.chat.completions.create(model="t_slow", messages=messages, extra_body={"wait_seconds": 1})
        status_reply = running.choices[0].message.content or ""
        assert "Still working on it" in status_reply and extra(running, "mission_status") == "running"
        assert f"/missions/{extra(running, 'mission_id')}/events/stream" in status_reply
    finally:
        GATE.set()
    # When the user writes again in the conversation
    later = client.chat.completions.create(
        model="t_slow",
        messages=[*messages, {"role": "assistant", "content": status_reply}, {"role": "user", "content": "done yet?"}],
    )
    # Then the reply hands over the earlier mission's result first
    text = later.choices[0].message.content or ""
    assert "Your earlier request" in text and "finally done" in text, text


def test_bad_requests_get_openai_shaped_errors_and_change_nothing(server: DevServer):
    client = chat(server, "fay")
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="code_analysis", messages=[])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="code_analysis", messages=[{"role": "assistant", "content": "hi"}])
    with pytest.raises(openai.APIStatusError) as large:
        client.chat.completions.create(model="code_analysis", messages=[{"role": "user", "content": "x" * 10_001}])
    assert large.value.status_code == 413
    # another user's conversation is as missing as one that does not exist
    theirs = chat(server, "ada").chat.completions.create(
        model="t_chooses", messages=[{"role": "user", "content": "pick"}]
    )
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="t_chooses",
            messages=[
                {"role": "user", "content": "pick"},
                {"role": "assistant", "content": "?"},
                {"role": "user", "content": "1"},
            ],
            extra_headers={"X-Conversation-Id": extra(theirs, "conversation_id")},
        )
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=f"{server.url}/v1", api_key="not-a-token", max_retries=0).models.list()
    # nothing was started for fay
    assert Client(server, "fay").call("GET", "/missions")[1]["missions"] == []
    raw = httpx.post(
        f"{server.url}/v1/chat/completions", content=b"{not json", headers={"Authorization": "Bearer dev:fay"}
    )
    assert raw.status_code == 400 and raw.json()["error"]["type"] == "invalid_request_error"


def test_an_event_stream_resumes_after_a_disconnect_and_ends_with_the_mission(server: DevServer):
    alice = Client(server, "gus")
    status, created = alice.call(
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": "Where is compute_tax defined?", "context": {"repo": str(server.repo)}},
    )
    assert status == 202
    mission_id = created["mission_id"]
    wait_for(alice, mission_id, {"completed"}, timeout=120)
    url = f"{server.url}/missions/{mission_id}/events/stream"
    auth = {"Authorization": "Bearer dev:gus"}
    with httpx.Client(timeout=30) as http:
        # Given a client that read three events and lost its connection
        first: list[Any] = []
        with connect_sse(http, "GET", url, headers=auth) as source:
            for sse in source.iter_sse():
                first.append(sse)
                if len(first) == 3:
                    break
        # When it reconnects with the last id it saw
        rest: list[Any] = []
        with connect_sse(http, "GET", url, headers={**auth, "Last-Event-ID": first[-1].id}) as source:
            rest = list(source.iter_sse())
    # Then it gets every later event once, in order, and the end
    assert rest[-1].event == "end" and json.loads(rest[-1].data)["status"] == "completed"
    streamed = [json.loads(e.data) for e in [*first, *rest[:-1]]]
    status, page = alice.call("GET", f"/missions/{mission_id}/events?limit=500")
    assert [e["position"] for e in streamed] == [e["position"] for e in page["events"]]
    # another user's stream is 404, a bad Last-Event-ID is 400
    assert httpx.get(url, headers={"Authorization": "Bearer dev:hal"}).status_code == 404
    assert httpx.get(url, headers={**auth, "Last-Event-ID": "%%%"}).status_code == 400


def test_a_stage_is_told_as_it_begins_not_when_it_ends(server: DevServer):
    # Given a mission whose first stage holds until the test lets it go
    GATE.clear()
    client = chat(server, "ivy")
    stream = client.chat.completions.create(
        model="t_slow", messages=[{"role": "user", "content": "take your time"}], stream=True
    )
    try:
        # When the client reads the stream while that stage runs
        progress = ""
        for chunk in stream:
            progress += extra(chunk.choices[0].delta, "reasoning_content") or "" if chunk.choices else ""
            if "▸ hold" in progress:
                break
        # Then it was told the stage began while it still runs, and the dashboard's view says so too
        assert not GATE.is_set() and "▸ hold" in progress
        mine = Client(server, "ivy").call("GET", "/missions?limit=1")[1]["missions"][0]
        assert mine["running_stage"] == "hold" and mine["stage"] is None
    finally:
        GATE.set()
    rest = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert "finally done" in rest
