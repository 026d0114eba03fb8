"""The dashboard's mission card in control: "Pause for now" on a running mission, a note while it is
paused, "Resume", and the mission to its result; a mission that delegated, linked to its sub-mission and
back; a mission whose parallel branches asked two questions, answered from its page in reverse order. In a
real browser, checked with axe-core."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.browser.conftest import assert_accessible, screenshot
from tests.e2e.test_dev_server import Client, wait_for
from tests.integration.conftest import with_capabilities
from tests.integration.test_delegation import CHILD, PARENT
from tests.integration.test_lifecycle_cancel_fork import GATE, Gate
from tests.integration.test_pause_resume_notes import PAUSABLE
from tests.support.asking import TRIP


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    """A dev server of a capability whose first stage is held in flight until the gate opens, and of one
    that delegates to another."""
    names, known = with_capabilities(PAUSABLE, CHILD, PARENT, TRIP)
    with LocalCloud(names, registry=known) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


@pytest.fixture()
def gate() -> Iterator[Gate]:
    GATE.close()
    yield GATE
    GATE.open()


def test_pause_steer_and_resume_a_mission_from_its_card(server: DevServer, visit, gate: Gate):
    page = visit(server.url, "pat").page
    # Given a mission of pat's whose first stage is in flight
    status, created = Client(server, "pat").call("POST", "/missions", {"capability": PAUSABLE.name, "goal": "trip"})
    assert status == 202, created
    gate.until_entered(1)
    card = page.locator(".mission-card").first
    # When pat pauses it from its card, and its stage in flight ends
    card.get_by_role("button", name="Pause for now").click()
    # (the click's request is the browser's: the stage may end only once the pause is recorded)
    wait_for(Client(server, "pat"), created["mission_id"], {"pausing", "paused"})
    gate.open()
    # Then the card shows it paused and offers to resume it
    resume = page.locator(".mission-card").first.get_by_role("button", name="Resume")
    resume.wait_for()
    assert "paused" in page.locator(".mission-card .badge").first.inner_text()
    screenshot(page, "mission-paused")
    assert_accessible(page, "missions page with a paused mission")
    # When pat tells it something, then resumes it
    card = page.locator(".mission-card").first
    card.get_by_label("Tell the mission").fill("skip the museums")
    card.get_by_role("button", name="Send note").click()
    page.locator(".mission-card .notes li", has_text="skip the museums").wait_for()
    page.locator(".mission-card").first.get_by_role("button", name="Resume").click()
    # Then it completes, and the stage after the pause received the note
    done = wait_for(Client(server, "pat"), created["mission_id"], {"completed", "failed"})
    assert done["status"] == "completed" and [n["text"] for n in done["notes"]] == ["skip the museums"]
    page.locator(".mission-card .badge", has_text="completed").wait_for()
    # And the mission has one card: the refresh after a click and the poll never both add one (they did once)
    assert page.locator(f'.mission-card[data-mission-id="{created["mission_id"]}"]').count() == 1


def test_a_parent_links_its_sub_mission_and_the_sub_mission_links_back(server: DevServer, visit):
    # Given gus's mission that delegated its first stage to a t_child sub-mission, and ended
    status, created = Client(server, "gus").call("POST", "/missions", {"capability": PARENT.name, "goal": "Porto"})
    assert status == 202, created
    parent = wait_for(Client(server, "gus"), created["mission_id"], {"completed"})
    (child_id,) = parent["children"]
    # When he opens its page
    page = visit(server.url, "gus").page
    page.goto(f"{server.url}/#/missions/{parent['mission_id']}")
    # Then it links the sub-mission, and its timeline says when it delegated and how that ended
    page.locator(".links a", has_text=child_id).wait_for()
    page.locator(".timeline li", has_text="delegation.ended").wait_for()
    assert "completed" in page.locator(".timeline li", has_text="delegation.ended").inner_text()
    screenshot(page, "mission-with-sub-mission")
    assert_accessible(page, "mission page with a sub-mission")
    # When he follows the link, the sub-mission's page links back to its parent
    page.locator(".links a", has_text=child_id).click()
    page.locator(".links", has_text="Sub-mission of").locator("a", has_text=parent["mission_id"]).wait_for()
    assert page.locator("h1").inner_text() == "dinners in Porto"


def test_two_questions_of_parallel_branches_are_answered_from_the_mission_page_in_reverse_order(server, visit):
    # Given ola's trip, whose flights and hotel branches each asked her a question
    ola = Client(server, "ola")
    status, created = ola.call("POST", "/missions", {"capability": TRIP.name, "goal": "Lisbon"})
    assert status == 202, created
    mission_id = created["mission_id"]
    wait_for(ola, mission_id, {"interrupted"})
    # When she opens its page, both questions are there, in the order asked
    page = visit(server.url, "ola").page
    page.goto(f"{server.url}/#/missions/{mission_id}")
    seat = page.get_by_role("region", name="Question: Window or aisle?")
    area = page.get_by_role("region", name="Question: Which neighbourhood?")
    seat.wait_for()
    area.wait_for()
    assert page.locator("section.question").count() == 2
    screenshot(page, "mission-with-two-questions")
    assert_accessible(page, "mission page with two questions")
    # When she answers the second first, the page says the mission waits for her other answer
    area.get_by_label("Your answer").fill("Alfama")
    area.get_by_role("button", name="Send answer").click()
    page.get_by_text("goes on once its other questions are answered").wait_for()
    # When she answers the first, the mission joins both answers and completes
    page.get_by_role("region", name="Question: Window or aisle?").get_by_role("button", name="window").click()
    done = wait_for(ola, mission_id, {"completed", "failed"})
    assert done["result"]["answer"].startswith("window seat, Alfama"), done
    page.locator(".badge", has_text="completed").first.wait_for()
    assert page.locator("section.question").count() == 0
