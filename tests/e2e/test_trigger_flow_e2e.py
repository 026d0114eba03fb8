"""Triggers' flow control end to end on the dev server: signed webhooks of a shop reach the trigger function
through the bus; an order's missions run one at a time, a cancelled order cancels its missions, a throttle
drops what is over it, and GET /triggers/{trigger}/decisions lists each decision for its user."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_dev_server import Client, deliver, wait_for
from tests.integration.conftest import with_capabilities
from tests.support.orders import NOTES, ORDERS
from tests.support.slow import GATE

pytestmark = pytest.mark.e2e
SECRET = "whsec_" + "b2lyZGVycy1zZWNyZXQtZm9yLXRlc3Rz"
TRIGGER = f"{ORDERS.name}.shop-0"
ENDED = {"completed", "failed", "cancelled"}


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    names, known = with_capabilities(ORDERS, NOTES)
    settings = {"webhook_sources": {"shop": {"secret": SECRET, "user_id": "olga"}}}
    cloud = LocalCloud(names, registry=known, prefix="orders-e2e", settings=settings)
    with cloud, DevServer(cloud, port=0) as dev:
        yield dev
    GATE.set()


def shop(server: DevServer, n: int, body: dict[str, Any]) -> None:
    status, answer = deliver(Client(server, None), body, delivery=f"delivery-{n}", secret=SECRET, source="shop")
    assert status == 202, answer


def decisions(server: DevServer, user: str = "olga") -> list[dict[str, Any]]:
    status, listed = Client(server, user).call("GET", f"/triggers/{TRIGGER}/decisions")
    assert status == 200, listed
    return list(listed["decisions"])


def until(server: DevServer, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while len(found := decisions(server)) < count:
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return found


def test_an_orders_missions_run_one_at_a_time_and_its_cancellation_cancels_them(server: DevServer):
    GATE.clear()
    olga = Client(server, "olga")
    # Given an order's first delivery, whose mission is kept running, and a second delivery of it
    shop(server, 1, {"type": "order.created", "order": "7", "note": "slow"})
    [started] = until(server, 1)
    shop(server, 2, {"type": "order.created", "order": "7", "note": "gift wrap"})
    enqueued = until(server, 2)[0]
    # Then the second waits behind the first, as its record says
    assert (started["decision"], enqueued["decision"]) == ("started", "enqueued"), (started, enqueued)
    assert olga.call("GET", f"/missions/{enqueued['mission_id']}")[1]["queue"]["held"] == "key"
    # When the shop says the order was cancelled
    shop(server, 3, {"type": "order.updated", "order": "7", "status": "cancelled"})
    cancelled = [d for d in until(server, 4) if d["decision"] == "cancelled_by_event"]
    # Then both of its missions were cancelled, the held one never ran
    assert sorted(d["mission_id"] for d in cancelled) == sorted([started["mission_id"], enqueued["mission_id"]])
    for mission in (started["mission_id"], enqueued["mission_id"]):
        shown = wait_for(olga, mission, ENDED)
        assert (shown["status"], shown["terminal_reason"]) == ("cancelled", "cancelled_by_event:order.updated")
    GATE.set()


def test_a_throttle_drops_an_orders_fourth_delivery_in_the_hour_and_the_decisions_are_olgas_only(server: DevServer):
    GATE.set()
    before = len(decisions(server))
    for n in range(4):
        shop(server, 10 + n, {"type": "order.created", "order": "9", "note": f"v{n}"})
    found = until(server, before + 4)[:4]
    assert sorted(d["decision"] for d in found).count("throttled") == 1, found
    assert all(d["key"] == f"{TRIGGER}:9" for d in found)
    # and nobody else sees olga's decisions; an unknown trigger is 404
    assert decisions(server, "mallory") == []
    assert Client(server, "olga").call("GET", "/triggers/t_orders.nothing/decisions")[0] == 404


def test_a_burst_of_edits_to_one_note_starts_one_mission_with_the_last_after_its_quiet_minute(server: DevServer):
    pat = Client(server, "pat")
    # Given five quick edits of one note, and one of another (memory triggers: the table's stream, the bus)
    for n in range(5):
        assert pat.call("PUT", "/memory/notes/n1", {"value": {"text": f"draft {n}"}})[0] == 200
    assert pat.call("PUT", "/memory/notes/n2", {"value": {"text": "other"}})[0] == 200
    # Then nothing started yet: each edit was debounced
    status, listed = pat.call("GET", "/triggers/t_notes.edited/decisions?limit=200")
    assert status == 200 and {d["decision"] for d in listed["decisions"]} == {"debounced"}, listed
    assert len(listed["decisions"]) == 6 and pat.call("GET", "/missions")[1]["missions"] == []
    # When the dev server's clock passes the quiet minute, each note's timer starts one mission: its last edit
    status, clock = Client(server, None).call("POST", "/_dev/clock", {"advance_seconds": 61})
    assert status == 200 and len([f for f in clock["fired"] if f["result"].get("fired")]) == 2, clock
    missions = pat.call("GET", "/missions")[1]["missions"]
    assert sorted(m["goal"] for m in missions) == ["Summarize note n1: draft 4", "Summarize note n2: other"]
    started = [d for d in pat.call("GET", "/triggers/t_notes.edited/decisions")[1]["decisions"] if d["mission_id"]]
    assert any("the last of 5 events" in d["detail"] for d in started), started
