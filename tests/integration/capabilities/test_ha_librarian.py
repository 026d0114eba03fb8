"""The Librarian: the home's catalog read from HA's registries, kept in the user's memory, read again when
stale or asked for, and what the architect resolves a request's places and things through."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from capabilities.home_assistant import tools
from capabilities.home_assistant.dev.fake_server import serve
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HomeAssistant
from capabilities.home_assistant.librarian import KEY, NAMESPACE, HomeCatalog, catalog_of, resolve
from missions.core.capability import registry
from tests.support.driver import DirectDriver

CAPABILITY = registry.load("home_assistant")


def test_the_registries_list_areas_devices_and_every_entity_with_its_integration(ha: HomeAssistant):
    # When the registries are read (over the websocket API, or from the sample directly)
    found = ha.registries()
    # Then every entity is there with its integration, placed through its device when it has one
    assert {e.entity_id for e in found.entities} == {s.entity_id for s in ha.states()}
    devices = {d.id: d for d in found.devices}
    office = [e for e in found.entities if e.device_id and devices[e.device_id].area_id == "office"]
    assert "light.office_ceiling" in {e.entity_id for e in office}
    assert {a.area_id: a.name for a in found.areas}["office"] == "Office"
    assert all(e.platform for e in found.entities)


def _catalog() -> HomeCatalog:
    return HomeCatalog.model_validate(catalog_of(SampleHome().registries()))


def test_a_request_is_resolved_through_the_areas_devices_and_names_of_the_catalog():
    catalog = _catalog()
    lights = resolve("turn off the office lights", catalog)
    # Then the office's lights, and only lights, and nothing from another room
    assert lights and all(e.startswith("light.") for e in lights)
    assert {e.area for e in catalog.entities if e.entity_id in lights} == {"office"}
    # And every entity of a room when no kind is named; an entity by its own name; nothing for an analysis
    room = resolve("what is on in the living room?", catalog)
    assert {e.area for e in catalog.entities if e.entity_id in room} == {"living_room"} and len(room) > len(lights)
    assert resolve("is the heat pump running", catalog) == ["climate.heat_pump"]
    assert resolve("analyze my energy use", catalog) == []


def _run(driver: DirectDriver, goal: str, user: str, **options: Any) -> Any:
    return driver.run(goal, user_id=user, **options)


def test_the_catalog_is_kept_and_read_again_only_when_stale_or_asked_for():
    driver = DirectDriver(CAPABILITY)
    # When a first mission runs, the librarian reads the registries and keeps the catalog
    first = _run(driver, "What is on in the living room?", "u-lib")
    assert first.outputs["librarian"]["refreshed"] is True
    kept = driver.stores.memory.get("u-lib", (NAMESPACE,), KEY)
    assert kept is not None and len(kept.value["entities"]) == len(SampleHome().states())
    # When another runs within the day, the kept catalog serves
    assert _run(driver, "What is on in the kitchen?", "u-lib").outputs["librarian"]["refreshed"] is False
    # When the kept one is two days old, it is read again
    stale = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    driver.stores.memory.put("u-lib", (NAMESPACE,), KEY, {**kept.value, "refreshed_at": stale})
    assert _run(driver, "What is on in the kitchen?", "u-lib").outputs["librarian"]["refreshed"] is True


def test_a_refresh_asked_for_answers_with_the_catalog_and_nothing_else():
    driver = DirectDriver(CAPABILITY)
    envelope = _run(driver, "Refresh the catalog of my home", "u-refresh")
    report = envelope.outputs["report"]
    assert report["route"] == "catalog" and "architect" not in envelope.outputs
    assert report["answer"].startswith("Your home's catalog is up to date: 8 areas,")
    assert envelope.terminal_reason == "completed"


def test_a_refresh_that_cannot_reach_home_assistant_fails(monkeypatch: pytest.MonkeyPatch):
    with serve(SampleHome()) as fake:
        monkeypatch.setenv("HA_URL", fake.url)
        monkeypatch.setenv("HA_TOKEN", fake.token)
        fake.down()
        driver = DirectDriver(CAPABILITY)
        envelope = _run(driver, "Refresh the catalog of my home", "u-down")
    assert envelope.outputs["report"]["answer"].startswith("I could not read your home's catalog:")
    assert envelope.terminal_reason == "ha_unreachable"
    assert driver.stores.missions.get(envelope.mission_id).status == "failed"


def test_the_architect_acts_on_what_the_catalog_resolves(monkeypatch: pytest.MonkeyPatch):
    # Given the sample home, and a request naming a room and a kind of entity
    home = SampleHome()
    monkeypatch.setitem(tools._SAMPLES, "u-act", home)
    office_lights = resolve("turn off the office lights", _catalog())
    for light in office_lights:
        home.call_service("light", "turn_on", {"entity_id": light})
    # When it is approved
    envelope = _run(
        DirectDriver(CAPABILITY), "Turn off the office lights", "u-act", answer_with=lambda i: {"approved": True}
    )
    # Then the architect acted on the office's lights, as the catalog resolved them, and they are off
    assert sorted(envelope.outputs["architect"]["entities"]) == sorted(office_lights)
    assert all(home.state(light).state == "off" for light in office_lights)
