"""The Dashboard Designer and the Lovelace operations under it, on the sample home and through the fake HA
server (RestHomeAssistant over its websocket API). The two scenarios take a HomeAssistant client and the
home's entity ids, so the same checks run against the real Home Assistant (tests/support/home_assistant.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from capabilities.home_assistant import tools
from capabilities.home_assistant.dev.fake_server import FakeHomeAssistant, serve
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HABadRequest, HAUnknownEntity, HomeAssistant
from capabilities.home_assistant.ha.rest import RestHomeAssistant
from capabilities.home_assistant.ha.websocket import HAWebSocket
from capabilities.home_assistant.models import ArchitectPlan, DashboardDraft
from capabilities.home_assistant.policy import offline_policy
from missions.core.capability import registry
from missions.core.llm.provider import LLMRequest, LLMResult
from tests.support.driver import DirectDriver

CAPABILITY = registry.load("home_assistant")
FACTS = SampleHome().facts
ENERGY = [FACTS.home_energy, FACTS.heat_pump_energy, FACTS.ev_charger_energy]
POWER = [FACTS.home_power, FACTS.heat_pump_power, FACTS.ev_charger_power]
Approve = Callable[[dict[str, Any]], dict[str, Any]]


def dashboard_lifecycle(ha: HomeAssistant, entity_ids: list[str]) -> None:
    """What HA does with a dashboard over its websocket API, for any HomeAssistant (sample, fake, real)."""
    url_path = f"test-{uuid.uuid4().hex[:8]}"
    # Given a url_path without a hyphen, HA refuses the dashboard in its own words
    with pytest.raises(HABadRequest, match=r"Url path needs to contain a hyphen \(-\)"):
        ha.create_dashboard(url_path.replace("-", ""), "No hyphen")
    # When a dashboard is created, it is listed with the id delete takes, and holds no configuration yet
    made = ha.create_dashboard(url_path, "Test", icon="mdi:flash")
    assert made.url_path == url_path and made.mode == "storage" and made.id
    assert [d.id for d in ha.dashboards() if d.url_path == url_path] == [made.id]
    with pytest.raises(HAUnknownEntity, match="No config found"):
        ha.dashboard_config(url_path)
    # When its configuration is saved, it reads back as saved
    config = {"title": "Test", "views": [{"title": "One", "cards": [{"type": "entities", "entities": entity_ids}]}]}
    ha.save_dashboard_config(url_path, config)
    assert ha.dashboard_config(url_path) == config
    # When it is deleted, it is gone, its configuration with it, and deleting it again is HAUnknownEntity
    ha.delete_dashboard(str(made.id))
    assert url_path not in [d.url_path for d in ha.dashboards()]
    with pytest.raises(HAUnknownEntity, match=f"Unknown config specified: {url_path}"):
        ha.dashboard_config(url_path)
    with pytest.raises(HAUnknownEntity, match=f"Unable to find dashboard_id {made.id}"):
        ha.delete_dashboard(str(made.id))


def designer_flow(ha: HomeAssistant, energy: list[str], user_id: str) -> None:
    """'A dashboard for my energy use' approved, listed and rolled back, through missions, with `ha` reaching
    the home the missions change (the sample, or HA_URL's)."""
    driver = DirectDriver(CAPABILITY)
    asked: list[dict[str, Any]] = []
    approve: Approve = lambda interrupt: asked.append(interrupt) or {"approved": True}  # noqa: E731
    made = driver.run("Make me a dashboard for my energy use", answer_with=approve, user_id=user_id)
    # Then the person approved the dashboard's YAML as a diff against nothing, with its cards in words
    assert made.terminal_reason == "completed", made.outputs["report"]
    question = asked[0]["question"]
    assert "ha.deploy_dashboard (write): create dashboard 'Energy' at /dashboard-energy" in question
    assert "+++ dashboard-energy (proposed)" in question and "+  - type: statistics-graph" in question
    # and HA holds it: daily bars of the energy meters' statistics
    config = ha.dashboard_config("dashboard-energy")
    bars = [c for c in config["views"][0]["cards"] if c["type"] == "statistics-graph"]
    assert bars and set(energy) <= set(bars[0]["entities"])
    assert "Dashboard /dashboard-energy: deployed." in made.outputs["report"]["answer"]
    # When the user asks which dashboards there are, it is listed
    listed = driver.run("Which dashboards do I have?", user_id=user_id)
    assert "Energy (/dashboard-energy)" in listed.outputs["report"]["answer"]
    # When it is rolled back, the person approves its removal, and HA no longer has it
    undone = driver.run("Roll back the energy dashboard", answer_with=approve, user_id=user_id)
    assert undone.terminal_reason == "completed", undone.outputs["report"]
    assert "remove dashboard 'Energy' at /dashboard-energy" in asked[-1]["question"]
    assert "dashboard-energy" not in [d.url_path for d in ha.dashboards()]
    kept = driver.stores.memory.get(user_id, ("home_assistant.dashboards",), "dashboard-energy")
    assert kept is not None and kept.value["rolled_back"] is True


@pytest.fixture
def fake() -> Iterator[FakeHomeAssistant]:
    with serve(SampleHome()) as server:
        yield server


@pytest.fixture(params=["sample", "rest"])
def ha(request: pytest.FixtureRequest) -> Iterator[HomeAssistant]:
    """The sample home answered directly, and the same house behind the fake server."""
    if request.param == "sample":
        yield SampleHome()
        return
    with serve(SampleHome()) as server, RestHomeAssistant(server.url, server.token) as client:
        yield client


def test_a_dashboards_lifecycle_is_as_home_assistant_has_it(ha: HomeAssistant) -> None:
    # Given either implementation (the scenario says the rest)
    dashboard_lifecycle(ha, [FACTS.home_power, "light.living_room_ceiling"])


def test_the_fake_answers_the_lovelace_commands_with_home_assistants_codes(fake: FakeHomeAssistant) -> None:
    # Given HA's websocket API on the fake
    socket = HAWebSocket(fake.url + "/", lambda: fake.token, host="127.0.0.1", timeout=5)
    # When a dashboard is created, its id is its url_path with underscores, and HA's list shows HA's fields
    made = socket.call("lovelace/dashboards/create", url_path="my-energy", title="E", mode="storage")
    assert made == {
        "id": "my_energy",
        "require_admin": False,
        "title": "E",
        "show_in_sidebar": True,
        "url_path": "my-energy",
        "mode": "storage",
    }
    assert socket.call("lovelace/dashboards/list") == [made]
    # Then a url_path taken by a built-in panel, or by a dashboard, is refused as HA refuses it
    for taken in ("developer-tools", "my-energy"):
        with pytest.raises(HABadRequest, match="Panel url path needs to be unique"):
            socket.call("lovelace/dashboards/create", url_path=taken, title="E")


def test_a_designed_dashboard_is_approved_listed_and_rolled_back_on_the_sample_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the sample home a user's missions change (the scenario says the rest)
    home = SampleHome()
    monkeypatch.setitem(tools._SAMPLES, "u-dash-sample", home)
    designer_flow(home, ENERGY, "u-dash-sample")


def test_a_designed_dashboard_is_approved_listed_and_rolled_back_through_the_fake_server(
    fake: FakeHomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given missions that reach the home through the fake server (the scenario says the rest)
    monkeypatch.setenv("HA_URL", fake.url)
    monkeypatch.setenv("HA_TOKEN", fake.token)
    with RestHomeAssistant(fake.url, fake.token) as client:
        designer_flow(client, ENERGY, "u-dash-rest")


class Drafting:
    """The offline model, except that the architect drafts the dashboard a test gives."""

    name = "drafting"

    def __init__(self, draft: DashboardDraft) -> None:
        self.draft = draft

    def complete(self, request: LLMRequest) -> LLMResult:
        if request.stage == "architect":
            return LLMResult(output=ArchitectPlan(route="dashboard", dashboard=self.draft), model=self.name)
        return LLMResult(output=offline_policy(request), model=self.name)


def test_a_card_naming_what_the_home_lacks_makes_the_dashboard_invalid_and_it_is_never_offered() -> None:
    # Given a model that draws a card for an entity the home lacks
    draft = DashboardDraft(
        title="Attic",
        views=[{"title": "Attic", "cards": [{"type": "gauge", "entity": "sensor.disco_ball_power"}]}],
    )
    driver = DirectDriver(CAPABILITY, llm=Drafting(draft))
    asked: list[Any] = []
    envelope = driver.run("A dashboard for the attic", answer_with=lambda i: asked.append(i) or {"approved": True})
    # Then nobody is asked, the reason names the entity, and the mission failed: there was nothing to approve
    assert asked == [] and envelope.terminal_reason == "invalid_proposal"
    assert envelope.outputs["dashboard"]["reasons"] == ["no entity sensor.disco_ball_power in this home"]
    assert driver.stores.missions.get(envelope.mission_id).status == "failed"
    assert (
        "Dashboard 'Attic' is not valid: no entity sensor.disco_ball_power in this home."
        in (envelope.outputs["report"]["answer"])
    )


class RefusingSaves(SampleHome):
    """A home whose HA will not save a dashboard's configuration (as HA in recovery mode answers)."""

    def save_dashboard_config(self, url_path: str, config: Any) -> None:
        raise HABadRequest("Home Assistant refused lovelace/config/save: Saving not supported in recovery mode")


def test_a_save_home_assistant_refuses_ends_the_mission_deploy_refused_leaving_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a home whose HA refuses to save dashboards
    home = RefusingSaves()
    monkeypatch.setitem(tools._SAMPLES, "u-dash-refused", home)
    driver = DirectDriver(CAPABILITY)
    envelope = driver.run(
        "A dashboard for my energy use", answer_with=lambda i: {"approved": True}, user_id="u-dash-refused"
    )
    # Then the mission failed with HA's reason, and the dashboard created for the save was removed again
    assert envelope.terminal_reason == "deploy_refused"
    assert driver.stores.missions.get(envelope.mission_id).status == "failed"
    assert envelope.outputs["dashboard_deploy"]["status"] == (
        "refused: Home Assistant refused lovelace/config/save: Saving not supported in recovery mode"
    )
    assert home.dashboards() == []


def test_a_declined_dashboard_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a home, when the user declines the dashboard, then the mission ends well and HA has none
    home = SampleHome()
    monkeypatch.setitem(tools._SAMPLES, "u-dash-no", home)
    envelope = DirectDriver(CAPABILITY).run(
        "A dashboard for my energy use", answer_with=lambda i: {"approved": False}, user_id="u-dash-no"
    )
    assert envelope.terminal_reason == "completed"
    assert envelope.outputs["dashboard_deploy"]["status"] == "declined" and home.dashboards() == []


def test_replacing_a_dashboard_shows_the_diff_and_its_rollback_restores_what_it_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an energy dashboard the user made in HA's UI
    home = SampleHome()
    home.create_dashboard("dashboard-energy", "Energy")
    mine = {"title": "Energy", "views": [{"title": "Mine", "cards": [{"type": "entity", "entity": FACTS.home_power}]}]}
    home.save_dashboard_config("dashboard-energy", mine)
    monkeypatch.setitem(tools._SAMPLES, "u-dash-replace", home)
    driver = DirectDriver(CAPABILITY)
    asked: list[dict[str, Any]] = []
    approve: Approve = lambda interrupt: asked.append(interrupt) or {"approved": True}  # noqa: E731
    # When the designer's energy dashboard replaces it
    driver.run("A dashboard for my energy use", answer_with=approve, user_id="u-dash-replace")
    # Then the person saw what goes, and HA holds the new one
    question = asked[0]["question"]
    assert "replace the configuration of dashboard 'Energy' at /dashboard-energy" in question
    assert "-- title: Mine" in question and "--- dashboard-energy (now)" in question
    assert home.dashboard_config("dashboard-energy") != mine
    # When it is rolled back, the user's own dashboard is back, and the dashboard itself stays
    undone = driver.run("Undo the energy dashboard", answer_with=approve, user_id="u-dash-replace")
    assert "restore the earlier configuration of dashboard 'Energy'" in asked[-1]["question"]
    assert undone.outputs["dashboard_rollback"]["status"] == "rolled back"
    assert home.dashboard_config("dashboard-energy") == mine


def test_a_dashboard_edited_since_its_deployment_is_not_rolled_back(monkeypatch: pytest.MonkeyPatch) -> None:
    home = SampleHome()
    monkeypatch.setitem(tools._SAMPLES, "u-dash-edited", home)
    driver = DirectDriver(CAPABILITY)
    approve: Approve = lambda interrupt: {"approved": True}  # noqa: E731
    driver.run("A dashboard for my energy use", answer_with=approve, user_id="u-dash-edited")
    # Given the user edited it in HA's UI afterwards
    home.save_dashboard_config("dashboard-energy", {"views": [{"title": "Edited", "cards": []}]})
    # When a rollback is approved, the user's edit is kept and the mission says the rollback failed
    undone = driver.run("Roll back the energy dashboard", answer_with=approve, user_id="u-dash-edited")
    assert undone.terminal_reason == "rollback_failed"
    assert undone.outputs["dashboard_rollback"]["status"] == (
        "failed: dashboard /dashboard-energy changed since it was deployed: not rolled back"
    )
    assert home.dashboard_config("dashboard-energy")["views"][0]["title"] == "Edited"
