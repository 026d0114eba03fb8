"""Questions in parallel over the HTTP API, the CLI (against the API) and the chat with OpenAI's SDK, on the
dev server: a trip whose flights and hotel branches each ask; every question is listed, answered in reverse
order, each once, and the mission joins them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.cli.test_cli_remote import missions
from tests.e2e.test_chat_e2e import chat
from tests.e2e.test_dev_server import Client, wait_for
from tests.integration.conftest import with_capabilities
from tests.support.asking import ITEMS, TRIP

pytestmark = pytest.mark.e2e
DONE = {"completed", "failed"}


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    names, known = with_capabilities(TRIP, ITEMS)
    with LocalCloud(names, registry=known, prefix="asks-e2e") as cloud, DevServer(cloud, port=0) as dev:
        yield dev


def asking(client: Client, goal: str) -> dict[str, Any]:
    status, created = client.call("POST", "/missions", {"capability": TRIP.name, "goal": goal})
    assert status == 202, created
    return wait_for(client, created["mission_id"], {"interrupted"})


def test_the_api_lists_every_question_and_takes_them_in_reverse_order(server: DevServer):
    uma = Client(server, "uma")
    # Given uma's trip waiting on its flights' and its hotel's questions
    mission = asking(uma, "Lisbon in May")
    seat, area = mission["pending_interrupts"]
    assert (seat["stage"], area["stage"]) == ("flights", "hotel") and mission["pending_interrupt"] == seat
    assert seat["options"] == ["window", "aisle"] and area["kind"] == "clarification"
    # and her inbox has one item per question
    inbox = uma.call("GET", "/inbox")[1]["items"]
    assert [item["question"]["interrupt_id"] for item in inbox] == [seat["interrupt_id"], area["interrupt_id"]]
    # When she answers the hotel's first
    path = f"/missions/{mission['mission_id']}/interrupts/"
    status, body = uma.call("POST", path + area["interrupt_id"], {"text": "Alfama"})
    # Then it is taken, and the mission waits on the seat alone
    assert (status, body["status"]) == (200, "waiting"), body
    now = uma.call("GET", f"/missions/{mission['mission_id']}")[1]
    assert now["status"] == "interrupted" and now["pending_interrupts"] == [seat] and now["pending_interrupt"] == seat
    # And a second answer to it, or one that does not fit the seat's options, is refused
    assert uma.call("POST", path + area["interrupt_id"], {"text": "Baixa"})[0] == 409
    assert uma.call("POST", path + seat["interrupt_id"], {"decision": "middle"})[0] == 422
    # When she answers the seat, the group joins both answers and the mission completes
    assert uma.call("POST", path + seat["interrupt_id"], {"decision": "window"})[1]["status"] == "answered"
    done = wait_for(uma, mission["mission_id"], DONE)
    assert done["result"]["answer"] == "window seat, Alfama, compact car (asked: flights, hotel)", done
    assert done["pending_interrupts"] == [] and uma.call("GET", "/inbox")[1]["items"] == []


def test_the_cli_shows_both_questions_and_answers_them_in_reverse_order(server: DevServer):
    # Given vic's trip waiting on both questions
    mission = asking(Client(server, "vic"), "Porto in June")
    seat, area = mission["pending_interrupts"]
    # When he reads its status, each question is shown with how to answer it
    shown = missions(server, "status", mission["mission_id"], user="vic")
    assert shown.returncode == 0, shown.stderr
    assert "asks (1 of 2, flights): Window or aisle? [window/aisle]" in shown.stdout
    assert "asks (2 of 2, hotel): Which neighbourhood?" in shown.stdout
    assert f"missions answer {mission['mission_id']} {area['interrupt_id']}" in shown.stdout
    # When he answers the second, then the first
    second = missions(server, "answer", mission["mission_id"], area["interrupt_id"], "Ribeira", user="vic")
    assert second.returncode == 0 and "once its other questions are answered" in second.stdout, second.stderr
    first = missions(server, "answer", mission["mission_id"], seat["interrupt_id"], "2", user="vic")
    assert first.returncode == 0 and f"answered {seat['interrupt_id']}" in first.stdout, first.stderr
    # Then the mission joins both
    done = wait_for(Client(server, "vic"), mission["mission_id"], DONE)
    assert done["result"]["answer"].startswith("aisle seat, Ribeira"), done


def test_the_chat_asks_one_question_after_the_other(server: DevServer):
    client = chat(server, "wes")
    messages: list[Any] = [{"role": "user", "content": "Plan Madeira for me"}]
    # Given a chat whose mission's branches asked two questions: the reply asks the first, and says more follow
    first = client.chat.completions.create(model=TRIP.name, messages=messages).choices[0].message.content or ""
    assert "Window or aisle?" in first and "1 of 2 questions" in first
    # When the user answers it, the next reply asks the other
    messages += [{"role": "assistant", "content": first}, {"role": "user", "content": "window"}]
    second = client.chat.completions.create(model=TRIP.name, messages=messages).choices[0].message.content or ""
    assert "Which neighbourhood?" in second and "of 2 questions" not in second
    # When that one is answered, the mission joins and the reply is its answer
    messages += [{"role": "assistant", "content": second}, {"role": "user", "content": "Funchal old town"}]
    done = client.chat.completions.create(model=TRIP.name, messages=messages).choices[0].message.content or ""
    assert done.startswith("window seat, Funchal old town, compact car"), done


def test_a_scripted_run_that_runs_out_of_answers_lists_every_question_still_open(server: DevServer):
    # Given a scripted run that answers the first question only, with --json
    result = missions(server, "run", TRIP.name, "Sintra", "--answer", "aisle", "--json", user="xia")
    # Then it ends waiting (exit 3) with one document naming the question left, and every open one
    assert result.returncode == 3, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["outcome"] == "waiting" and document["question"]["text"] == "Which neighbourhood?"
    assert [(q["stage"], q["text"]) for q in document["questions"]] == [("hotel", "Which neighbourhood?")]
