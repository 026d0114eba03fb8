"""Delegation over HTTP and the CLI, on the dev server: a parent and its sub-mission are linked both ways in
GET /missions/{id} and in `missions status`; the parent's timeline shows the delegation; the parent's
wait is no question for its user (none is shown, and answering it is refused)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.cli.test_cli_remote import missions
from tests.e2e.test_dev_server import Client, wait_for
from tests.integration.conftest import with_capabilities
from tests.integration.test_delegation import CHILD, PARENT

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    names, known = with_capabilities(CHILD, PARENT)
    with LocalCloud(names, registry=known) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


def test_a_parent_and_its_sub_mission_are_linked_in_the_api_and_the_cli(server: DevServer):
    hal = Client(server, "hal")
    # Given hal's mission whose first stage delegates to a sub-mission that asks him a question
    status, created = hal.call(
        "POST", "/missions", {"capability": PARENT.name, "goal": "Turin", "context": {"child": {"ask": True}}}
    )
    assert status == 202, created
    parent_id = created["mission_id"]
    child = None
    for _ in range(600):
        parent = hal.call("GET", f"/missions/{parent_id}")[1]
        if parent["children"]:
            child = wait_for(hal, parent["children"][0], {"interrupted"})
            break
        wait_for(hal, parent_id, {"interrupted", "completed", "failed"})
    assert child is not None
    # Then the parent waits with no question of its own, and answering its delegation is refused
    parent = hal.call("GET", f"/missions/{parent_id}")[1]
    assert parent["status"] == "interrupted" and parent["pending_interrupt"] is None
    assert child["parent"]["mission_id"] == parent_id and child["lineage"] == [PARENT.name]
    refused = hal.call("POST", f"/missions/{parent_id}/interrupts/{child['parent']['interrupt_id']}", {"text": "me"})
    assert refused[0] == 409 and "waits for a sub-mission" in refused[1]["message"], refused
    # and `missions status` shows the link each way
    shown = missions(server, "status", parent_id, user="hal")
    assert shown.returncode == 0 and f"sub-missions: {child['mission_id']}" in shown.stdout, shown.stderr
    assert f"sub-mission of: {parent_id}" in missions(server, "status", child["mission_id"], user="hal").stdout
    # When hal answers the sub-mission's question, the parent resumes and completes with its result
    question = child["pending_interrupt"]["interrupt_id"]
    assert (
        hal.call("POST", f"/missions/{child['mission_id']}/interrupts/{question}", {"text": "the old town"})[0] == 200
    )
    done = wait_for(hal, parent_id, {"completed", "failed"})
    assert done["result"]["answer"] == "planned with dinners in Turin (the old town)"
    events = [e["type"] for e in hal.call("GET", f"/missions/{parent_id}/events")[1]["events"]]
    assert events.index("delegation.started") < events.index("delegation.ended")
    # and another user sees neither
    assert Client(server, "ivy").call("GET", f"/missions/{child['mission_id']}")[0] == 404
