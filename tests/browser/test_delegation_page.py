"""A mission that delegated, on the web page: its sub-missions are linked from it, and each links back to
its parent; the timeline says when it delegated and how the sub-mission ended. In a real browser, checked
with axe-core."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.browser.conftest import assert_accessible, screenshot
from tests.e2e.test_dev_server import Client, wait_for
from tests.integration.conftest import with_capabilities
from tests.integration.test_delegation import CHILD, PARENT


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    names, known = with_capabilities(CHILD, PARENT)
    with LocalCloud(names, registry=known) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


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
