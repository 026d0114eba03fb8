"""The Dashboard Designer end to end, as its users meet it: over HTTP (the dev server: the deployed API's
handlers over the emulation, the offline model), on the bundled sample home and through the fake HA server
(the real client over HA's websocket API). "A dashboard for my energy use" is approved, listed, kept in the
user's memory and rolled back, each a mission of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from capabilities.home_assistant.dev.fake_server import serve
from capabilities.home_assistant.dev.sample import SampleHome
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.cli.test_home_assistant_e2e import run
from tests.e2e.test_dev_server import Client

pytestmark = pytest.mark.e2e
TOKEN = "ha-long-lived-token-for-dashboards"
FACTS = SampleHome().facts


@pytest.fixture(scope="module", params=["sample", "rest"])
def home(request: pytest.FixtureRequest) -> Iterator[SampleHome | None]:
    """The offline sample home (None: the missions' own), or the fake HA server serving a sample home."""
    if request.param == "sample":
        yield None
        return
    with serve(SampleHome(), token=TOKEN) as fake, pytest.MonkeyPatch.context() as patch:
        patch.setenv("HA_URL", fake.url)
        patch.setenv("HA_TOKEN", TOKEN)
        yield fake.home


@pytest.fixture(scope="module")
def server(home: SampleHome | None) -> Iterator[DevServer]:
    cloud = LocalCloud(["home_assistant"])
    with cloud, DevServer(cloud, port=0) as dev:
        yield dev


def test_an_energy_dashboard_is_approved_listed_and_rolled_back(server: DevServer, home: SampleHome | None):
    jo = Client(server, "jo")
    # When the user asks for a dashboard for their energy use and approves it
    made: dict[str, Any] = run(jo, "Make me a dashboard for my energy use", approve=True)
    # Then it is deployed, and the answer says what is on it
    assert made["status"] == "completed", made
    answer = made["result"]["answer"]
    assert "Dashboard /dashboard-energy: deployed." in answer
    assert "statistics-graph 'Energy per day' of EV charger energy, Heat pump energy, Home energy" in answer
    if home is not None:  # behind the fake server: HA holds it
        cards = home.dashboard_config("dashboard-energy")["views"][0]["cards"]
        assert {FACTS.home_power, FACTS.home_energy} <= {
            e for c in cards for e in [c.get("entity"), *c.get("entities", [])]
        }
    # and the user's memory keeps what it replaced (nothing: it is new)
    status, kept = jo.call("GET", "/memory/home_assistant.dashboards/dashboard-energy")
    assert status == 200 and kept["value"]["created"] is True and kept["value"]["original"] is None
    # When the user asks which dashboards there are, it is listed
    listed = run(jo, "Which dashboards do I have?")
    assert "Your dashboards: Energy (/dashboard-energy)." in listed["result"]["answer"]
    # When the user rolls it back and approves, it is gone
    undone = run(jo, "Roll back the energy dashboard", approve=True)
    assert undone["status"] == "completed", undone
    assert "Rollback of dashboard /dashboard-energy: rolled back." in undone["result"]["answer"]
    after = run(jo, "Which dashboards do I have?")
    assert after["result"]["answer"] == "You have no dashboards besides the default one."
    if home is not None:
        assert home.dashboards() == []
