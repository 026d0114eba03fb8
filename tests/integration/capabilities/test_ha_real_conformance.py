"""One conformance suite over two homes behind the same client (RestHomeAssistant): the project's fake
(dev/fake_server.py serving a SampleHome that plays HA 2024.3.3) and a real Home Assistant 2024.3.3
(the pinned release from `.ha/venv`, started by the `real_home_assistant` fixture).

What is asserted here must hold on any Home Assistant of that version, so each home only says which
of its entities to use (a light to switch, a sensor with history, a script). Where the two disagreed,
the fake was fixed (the wire format, the automation syntax a version accepts, HA's own messages).
All real-HA tests live in this one file, so under `--dist loadfile` a single worker starts HA.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest

from capabilities.home_assistant.dev.fake_server import serve
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HABadRequest, HAUnknownEntity
from capabilities.home_assistant.ha.port import State
from capabilities.home_assistant.ha.rest import RestHomeAssistant
from capabilities.home_assistant.syntax import written_for
from missions.core.capability import registry
from tests.integration.capabilities.test_ha_dashboards import dashboard_lifecycle, designer_flow
from tests.support.driver import DirectDriver
from tests.support.home_assistant import (
    DEMO_LIGHT,
    DEMO_METER,
    DEMO_SENSOR,
    SAMPLE_SCRIPT,
    VERSION,
    RunningHomeAssistant,
    import_statistics,
)

T = TypeVar("T")
FACTS = SampleHome().facts
CAPABILITY = registry.load("home_assistant")
SETTLE = 15.0  # seconds: HA's recorder writes and its reload after a save run just after the call returns


@dataclass(frozen=True)
class Home:
    """A Home Assistant under test, and which of its entities the suite uses."""

    name: str
    ha: RestHomeAssistant
    light: str  # a light that can be switched
    sensor: str  # a sensor with recorded history
    script: str  # the object id of a script in its scripts.yaml
    version: str
    url: str  # where a mission reaches it (HA_URL), with its long-lived token (HA_TOKEN)
    token: str
    meter: str  # an energy meter with long-term statistics over the past month


@pytest.fixture(scope="module", params=["fake", "real"])
def home(request: pytest.FixtureRequest) -> Iterator[Home]:
    if request.param == "fake":
        with serve(SampleHome(version=VERSION)) as fake, RestHomeAssistant(fake.url, fake.token) as client:
            yield Home(
                "fake",
                client,
                "light.kitchen_ceiling",
                FACTS.outdoor_temperature,
                "good_night",
                VERSION,
                fake.url,
                fake.token,
                FACTS.home_energy,
            )
        return
    real: RunningHomeAssistant = request.getfixturevalue("real_home_assistant")
    with RestHomeAssistant(real.url, real.token) as client:
        import_statistics(real, DEMO_METER, days=40)  # a fresh HA has compiled none yet
        yield Home(
            "real", client, DEMO_LIGHT, DEMO_SENSOR, SAMPLE_SCRIPT, real.version, real.url, real.token, DEMO_METER
        )


def eventually(read: Callable[[], T], done: Callable[[T], bool], *, seconds: float = SETTLE) -> T:
    """What `read` gives once `done` holds for it, or the last reading after `seconds` (the caller
    asserts on it). HA finishes some work just after answering: the recorder's write, the reload a
    save starts. The fake is done at once, so it returns on the first reading."""
    deadline = time.monotonic() + seconds
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = read()
    return value


def state_or_none(home: Home, entity_id: str) -> State | None:
    try:
        return home.ha.state(entity_id)
    except HAUnknownEntity:
        return None


def switch(home: Home, service: str) -> list[State]:
    return home.ha.call_service("light", service, {"entity_id": home.light})


# ----------------------------------------------------------------------------- reading the house


def test_the_states_list_every_entity_and_one_state_reads_alike(home: Home) -> None:
    # When every state is listed, then the light's is read on its own
    states = {s.entity_id: s for s in home.ha.states()}
    light = home.ha.state(home.light)
    # Then the list holds the light, the sensor and the script, and the one state is the listed one
    assert {home.light, home.sensor, f"script.{home.script}"} <= set(states)
    assert light.entity_id == home.light and light.state in ("on", "off")
    assert states[home.light].attributes.get("friendly_name") == light.name
    assert light.last_changed <= light.last_updated


def test_an_unknown_entity_is_HAUnknownEntity(home: Home) -> None:
    with pytest.raises(HAUnknownEntity) as raised:
        home.ha.state("sensor.does_not_exist")
    assert raised.value.entity_id == "sensor.does_not_exist" and raised.value.status == 404


def test_config_names_the_version_and_the_time_zone(home: Home) -> None:
    config = home.ha.config()
    assert config.version == home.version == VERSION
    assert config.time_zone == "Europe/Amsterdam"
    assert config.unit_system.temperature == "°C"
    assert config.state == "RUNNING"


def test_services_list_what_missions_call(home: Home) -> None:
    offered = {(d.domain, name): s for d in home.ha.services() for name, s in d.services.items()}
    needed = {("light", "turn_on"), ("light", "turn_off"), ("automation", "reload"), ("automation", "trigger")}
    assert needed | {("script", "turn_on")} <= set(offered)
    assert offered[("light", "turn_on")].target == {"entity": [{"domain": ["light"]}]}


def test_history_holds_the_sensor_and_a_change(home: Home) -> None:
    # Given the light switched on, then off (a change the recorder must keep)
    switch(home, "turn_on")
    changed = switch(home, "turn_off")
    assert [(s.entity_id, s.state) for s in changed] == [(home.light, "off")]
    off_at = changed[0].last_changed
    sensor = home.ha.state(home.sensor)

    # When the history around the change, and around the sensor's last change, is read
    def read() -> dict[str, list[Any]]:
        return home.ha.history([home.light], off_at - timedelta(hours=1), off_at + timedelta(minutes=1))

    history = eventually(read, lambda h: any(p.last_changed == off_at for p in h.get(home.light, [])))
    since = sensor.last_changed - timedelta(hours=1)
    sensor_history = home.ha.history([home.sensor], since, sensor.last_updated + timedelta(minutes=1))
    # Then the change is a point of the light's history, oldest first, and the sensor has points
    points = history[home.light]
    assert [(p.state, p.last_changed) for p in points if p.last_changed == off_at] == [("off", off_at)]
    assert [p.last_changed for p in points] == sorted(p.last_changed for p in points)
    assert sensor_history[home.sensor] and sensor_history[home.sensor][-1].state == sensor.state


def test_a_service_call_changes_the_state(home: Home) -> None:
    switch(home, "turn_on")
    changed = switch(home, "turn_off")
    assert [s.entity_id for s in changed] == [home.light]
    assert home.ha.state(home.light).state == "off"


def test_an_unknown_service_is_HABadRequest(home: Home) -> None:
    with pytest.raises(HABadRequest) as raised:
        home.ha.call_service("light", "explode", {"entity_id": home.light})
    assert str(raised.value).endswith("refused POST /api/services/light/explode: 400: Bad Request")


# ----------------------------------------------------------------------------- automations


def test_an_automation_in_the_singular_syntax_is_deployed_run_and_rolled_back(home: Home) -> None:
    # Given an automation written as every HA version accepts it (trigger/condition/action, platform:, service:)
    automation_id = "conformance_lights_off"
    config = {
        "alias": "Conformance lights off",
        "trigger": [{"platform": "time", "at": "03:00:00"}],
        "condition": [],
        "action": [{"service": "light.turn_off", "target": {"entity_id": home.light}}],
        "mode": "single",
    }
    # When it is saved (a first draft, then the final one) and automations are reloaded
    home.ha.save_automation_config(automation_id, {**config, "description": "A first draft"})
    home.ha.save_automation_config(automation_id, config)
    assert home.ha.call_service("automation", "reload") == []
    # Then it is stored as last sent, whole (the draft's description is not kept), with its id first
    assert home.ha.automation_config(automation_id) == {"id": automation_id, **config}

    # And its entity is listed, and on once HA's own reload after the save is done too
    def ours(states: list[State]) -> list[State]:
        return [s for s in states if s.domain == "automation" and s.attributes.get("id") == automation_id]

    listed = ours(eventually(home.ha.states, lambda states: [s.state for s in ours(states)] == ["on"]))
    assert [(s.entity_id, s.state) for s in listed] == [("automation.conformance_lights_off", "on")]
    entity = listed[0]

    # When the light is on and the automation is triggered
    switch(home, "turn_on")
    changed = home.ha.call_service("automation", "trigger", {"entity_id": entity.entity_id})
    # Then its action ran (the light is off), in the run's own context: the call reports no change
    assert changed == []
    assert eventually(lambda: home.ha.state(home.light).state, lambda s: s == "off") == "off"
    triggered = home.ha.state(entity.entity_id).attributes["last_triggered"]
    assert triggered is not None

    # When it is rolled back: deleted, then automations reloaded
    home.ha.delete_automation_config(automation_id)
    home.ha.call_service("automation", "reload")
    # Then it is gone, config and entity
    with pytest.raises(HAUnknownEntity):
        home.ha.automation_config(automation_id)
    assert eventually(lambda: state_or_none(home, entity.entity_id), lambda s: s is None) is None
    with pytest.raises(HAUnknownEntity):
        home.ha.delete_automation_config(automation_id)


REFUSED = [
    pytest.param(
        {
            "triggers": [{"trigger": "time", "at": "03:00:00"}],
            "actions": [{"action": "light.turn_off", "target": {"entity_id": "light.x"}}],
        },
        "extra keys not allowed @ data['triggers']",
        id="plural-keys",
    ),
    pytest.param(
        {"trigger": [{"trigger": "time", "at": "03:00:00"}], "action": [{"service": "light.turn_off"}]},
        "required key not provided @ data['trigger'][0]['platform']",
        id="trigger-inside-a-trigger",
    ),
    pytest.param(
        {"trigger": [{"platform": "time", "at": "03:00:00"}], "action": [{"action": "light.turn_off"}]},
        "Unable to determine action @ data['action'][0]",
        id="action-inside-an-action",
    ),
    pytest.param(
        {"trigger": [{"platform": "time", "at": "03:00:00"}]},
        "required key not provided @ data['action']",
        id="no-action",
    ),
]


@pytest.mark.parametrize(("body", "error"), REFUSED)
def test_syntax_newer_than_the_version_is_refused_in_its_words(home: Home, body: dict[str, Any], error: str) -> None:
    # When an automation in a syntax 2024.3 does not know is saved
    with pytest.raises(HABadRequest) as raised:
        home.ha.save_automation_config("conformance_refused", {"alias": "Refused", **body})
    # Then HA's own message says why, and nothing was stored
    assert str(raised.value).endswith(
        f"refused POST /api/config/automation/config/conformance_refused: Message malformed: {error}"
    )
    assert raised.value.status == 400
    with pytest.raises(HAUnknownEntity):
        home.ha.automation_config("conformance_refused")


# ----------------------------------------------------------------------------- configuration


def test_a_scripts_config_is_read_as_its_yaml_has_it(home: Home) -> None:
    script = home.ha.script_config(home.script)
    sequence = script["sequence"]
    # 2024.3 names a step's service with `service:` (the fake writes its scripts so when playing it)
    assert script["alias"] and sequence and any("service" in step for step in sequence)
    assert not [step for step in sequence if "action" in step]
    with pytest.raises(HAUnknownEntity):
        home.ha.script_config("no_such_script")


def test_check_config_finds_the_configuration_valid(home: Home) -> None:
    check = home.ha.check_config()
    assert check.valid and check.errors is None


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \(\w+\) \[[\w.]+\] ")


def test_the_error_log_is_text_in_has_log_format(home: Home) -> None:
    log = home.ha.error_log()
    assert LOG_LINE.match(log), log[:200]


# ----------------------------------------------------------------------------- the fake's own versions


def test_the_fakes_automations_as_2024_3_stores_them_are_accepted_by_the_real_one(
    real_home_assistant: RunningHomeAssistant,
) -> None:
    # Given the sample home's automations, written as a 2024.3 home keeps them
    playing = SampleHome(version=VERSION)
    ids = [str(s.attributes["id"]) for s in playing.states() if s.domain == "automation"]
    assert ids
    # When each is saved to the real 2024.3 (then removed again)
    with RestHomeAssistant(real_home_assistant.url, real_home_assistant.token) as real:
        for automation_id in ids:
            real.save_automation_config(automation_id, playing.automation_config(automation_id))
        stored = {automation_id: real.automation_config(automation_id) for automation_id in ids}
        for automation_id in ids:
            real.delete_automation_config(automation_id)
    # Then the real config API accepted every one, and stored it as the fake does
    assert stored == {automation_id: playing.automation_config(automation_id) for automation_id in ids}


def test_a_fake_playing_2024_10_or_later_accepts_either_syntax() -> None:
    home = SampleHome(version="2024.10.0")
    plural = {
        "alias": "P",
        "triggers": [{"trigger": "time", "at": "03:00:00"}],
        "actions": [{"action": "light.turn_off"}],
    }
    singular = {
        "alias": "S",
        "trigger": [{"platform": "time", "at": "03:00:00"}],
        "action": [{"service": "light.turn_off"}],
    }
    home.save_automation_config("p", plural)
    home.save_automation_config("s", singular)
    assert home.automation_config("p") == {"id": "p", **plural}
    assert home.automation_config("s") == {"id": "s", **singular}
    assert home.config().version == "2024.10.0"
    assert "triggers" in home.automation_config(FACTS.broken_automation_id)  # its own ones, as 2024.10 writes them


def test_a_fake_refuses_a_version_it_cannot_read() -> None:
    with pytest.raises(ValueError, match="not a Home Assistant version"):
        SampleHome(version="latest")


# ----------------------------------------------------------------------------- what a mission does with it

PROPOSAL = {  # as a model writes it today: the 2024.10+ syntax
    "alias": "Lights off at three",
    "triggers": [{"trigger": "time", "at": "03:00:00"}],
    "actions": [{"action": "light.turn_off", "target": {"entity_id": "light.x"}}],
}


def test_a_proposal_is_checked_by_the_home_before_anyone_approves_it(home: Home) -> None:
    # When a proposal is written for the home's version and checked by its own validate_config
    written = written_for(PROPOSAL, home.version)
    # Then 2024.3 gets the singular keys, platform: and service:, and takes them
    assert written["trigger"] == [{"platform": "time", "at": "03:00:00"}] and "service" in written["action"][0]
    assert home.ha.validate_automation(written) == []
    # And the newer spelling is refused in HA's words before anything is saved
    (refused,) = home.ha.validate_automation(PROPOSAL)
    assert "extra keys not allowed @ data['" in refused and "refused validate_config" in refused
    # And so is a step this version cannot tell the kind of
    assert home.ha.validate_automation({"action": [{"action": "light.turn_off"}]}) == [
        "action: Unable to determine action @ data[0]"
    ]


def test_an_approved_schedule_is_deployed_as_this_version_reads_it_and_rolled_back(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a mission that reaches this home
    monkeypatch.setenv("HA_URL", home.url)
    monkeypatch.setenv("HA_TOKEN", home.token)
    driver, asked = DirectDriver(CAPABILITY), []
    approve = lambda interrupt: asked.append(interrupt) or {"approved": True}  # noqa: E731
    # When the user asks for a schedule and approves the automation shown
    envelope = driver.run("Turn off the office lights every night at 23:00", answer_with=approve, user_id=home.name)
    # Then it was written for this version, checked by HA, shown as HA will hold it, and deployed
    (proposal,) = envelope.outputs["proposals"]["proposals"]
    assert proposal["written_for"] == home.version and proposal["checked_by_home_assistant"], proposal
    ((automation_id, status),) = envelope.outputs["deploy"]["results"].items()
    assert status == "deployed" and envelope.terminal_reason == "completed"
    stored = home.ha.automation_config(automation_id)
    assert stored["trigger"] == [{"platform": "time", "at": "23:00:00"}] and "triggers" not in stored
    assert "- platform: time" in asked[0]["question"] and "triggers:" not in asked[0]["question"]
    assert driver.stores.missions.get(envelope.mission_id).status == "completed"
    # When the user undoes it
    undone = driver.run("Undo the office lights automation", answer_with=approve, user_id=home.name)
    # Then it is gone from the home
    assert undone.outputs["rollback"]["status"] == "rolled back"
    with pytest.raises(HAUnknownEntity):
        home.ha.automation_config(automation_id)


def test_long_term_statistics_reach_a_month_back_and_chain_hour_to_hour(home: Home) -> None:
    # When a month of a meter's hourly statistics is read, and of a light (which has none)
    now = home.ha.state(home.light).last_updated.replace(minute=0, second=0, microsecond=0)
    month_ago = now - timedelta(days=31)
    found = eventually(
        lambda: home.ha.statistics([home.meter, home.light], month_ago, now),
        lambda f: len(f.get(home.meter, [])) >= 24 * 30,
    )
    # Then the meter has its hours, each starting at the reading the hour before ended; the light is absent
    assert list(found) == [home.meter]
    hours = found[home.meter]
    assert len(hours) >= 24 * 30 and all(h.end - h.start == timedelta(hours=1) for h in hours)
    for before, after in zip(hours, hours[1:], strict=False):
        assert after.sum == pytest.approx(before.sum + (after.state - before.state), abs=1e-3)


def test_a_dashboard_is_created_saved_listed_and_deleted(home: Home) -> None:
    dashboard_lifecycle(home.ha, [home.light, home.sensor])


def test_a_dashboard_for_energy_use_is_approved_listed_and_rolled_back(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HA_URL", home.url)
    monkeypatch.setenv("HA_TOKEN", home.token)
    designer_flow(home.ha, [home.meter], f"u-dash-{home.name}")


def test_the_registries_place_every_entity_and_name_its_integration(home: Home) -> None:
    found = home.ha.registries()
    listed = {e.entity_id: e for e in found.entities}
    # Then the light is registered with its integration, and every device's area is one of the areas
    assert home.light in listed and listed[home.light].platform
    areas = {a.area_id for a in found.areas}
    assert areas and {d.area_id for d in found.devices if d.area_id} <= areas


def test_the_librarian_refreshes_the_catalog_of_this_home(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HA_URL", home.url)
    monkeypatch.setenv("HA_TOKEN", home.token)
    driver = DirectDriver(CAPABILITY)
    envelope = driver.run("Refresh the catalog of my home", user_id=f"u-lib-{home.name}")
    catalog = envelope.outputs["librarian"]
    assert envelope.terminal_reason == "completed" and catalog["refreshed"] is True
    assert home.light in {e["entity_id"] for e in catalog["entities"]}
    assert envelope.outputs["report"]["answer"].startswith("Your home's catalog is up to date:")


def test_an_energy_analysis_of_last_month_rests_on_this_homes_statistics(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a home whose meter has statistics over the past month (the real one's imported, as HA compiles them)
    monkeypatch.setenv("HA_URL", home.url)
    monkeypatch.setenv("HA_TOKEN", home.token)
    # When the user asks for last month's energy use
    envelope = DirectDriver(CAPABILITY).run("Analyze my energy usage last month", user_id=f"u-month-{home.name}")
    # Then the analysis covers the month from the statistics (the recorder's history holds days at most)
    answer = envelope.outputs["report"]["answer"]
    used = re.search(r"The home used ([0-9.]+) kWh from (\S+) to (\S+),", answer)
    assert used is not None, answer
    start, end = (datetime.fromisoformat(d).date() for d in used.groups()[1:])
    assert (end - start).days == 31 and float(used.group(1)) > 100
    assert envelope.terminal_reason == "completed"
