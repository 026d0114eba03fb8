"""One conformance suite for the HomeAssistant port: the sample home answered directly, and the same
house behind HA's REST API (RestHomeAssistant -> real HTTP on localhost -> the fake server), must
give the same answers to every operation, and change the same way when a mission acts."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import (
    HABadRequest,
    HAUnknownEntity,
    HomeAssistant,
)

FACTS = SampleHome().facts
SOME_ENTITIES = [
    FACTS.home_power,
    FACTS.home_energy,
    FACTS.ev_charger_energy,
    FACTS.heat_pump,
    FACTS.outdoor_temperature,
    "light.living_room_ceiling",
    "binary_sensor.living_room_motion",
    "weather.home",
    "zone.home",
    FACTS.unpressed_button,
    FACTS.broken_automation,
]


@pytest.fixture
def reference() -> SampleHome:
    """The same house, untouched by the implementation under test: what every answer must equal."""
    return SampleHome()


def test_implementations_satisfy_the_port(ha: HomeAssistant) -> None:
    assert isinstance(ha, HomeAssistant)


def test_config_and_services_are_the_same(ha: HomeAssistant, reference: SampleHome) -> None:
    # When the configuration and the services are read
    config, services = ha.config(), ha.services()
    # Then both equal the sample's, which names the home's zone, units and HA's services
    assert config == reference.config()
    assert services == reference.services()
    assert config.time_zone == "Europe/Amsterdam" and config.unit_system.temperature == "°C"
    offered = {(d.domain, name) for d in services for name in d.services}
    assert {("light", "turn_on"), ("automation", "reload"), ("climate", "set_temperature")} <= offered


def test_states_are_the_same(ha: HomeAssistant, reference: SampleHome) -> None:
    # When every state, then a few one by one, are read
    states = ha.states()
    # Then they equal the sample's, field for field (times, attributes, contexts)
    assert states == reference.states()
    assert len(states) >= 40
    for entity_id in SOME_ENTITIES:
        assert ha.state(entity_id) == reference.state(entity_id)


def test_an_unknown_entity_is_HAUnknownEntity(ha: HomeAssistant) -> None:
    with pytest.raises(HAUnknownEntity) as raised:
        ha.state("sensor.does_not_exist")
    assert raised.value.entity_id == "sensor.does_not_exist"
    assert "sensor.does_not_exist" in str(raised.value)


@pytest.mark.parametrize(("minimal", "no_attributes"), [(True, True), (False, False), (True, False)])
def test_history_is_the_same(ha: HomeAssistant, reference: SampleHome, minimal: bool, no_attributes: bool) -> None:
    # Given the week's window, and a mix of meters, lights, climate and steady entities
    start, end = FACTS.start, FACTS.now
    # When their history is read with HA's options
    history = ha.history(SOME_ENTITIES, start, end, minimal_response=minimal, no_attributes=no_attributes)
    # Then it is the sample's, in the order asked, every point with the same fields
    expected = reference.history(SOME_ENTITIES, start, end, minimal_response=minimal, no_attributes=no_attributes)
    assert history == expected
    assert list(history) == SOME_ENTITIES
    assert len(history[FACTS.home_power]) == 2016


def test_history_edges_are_the_same(ha: HomeAssistant, reference: SampleHome) -> None:
    # A window of one day, an unknown entity left out, a window in the future empty
    start, end = FACTS.now - timedelta(days=1), FACTS.now
    asked = ["light.office_ceiling", "sensor.nothing_here"]
    assert ha.history(asked, start, end) == reference.history(asked, start, end)
    assert "sensor.nothing_here" not in ha.history(asked, start, end)
    assert ha.history(asked, FACTS.now + timedelta(days=1), FACTS.now + timedelta(days=2)) == {}


def test_logbook_is_the_same(ha: HomeAssistant, reference: SampleHome) -> None:
    start, end = FACTS.now - timedelta(days=2), FACTS.now
    entries = ha.logbook(start, end)
    assert entries == reference.logbook(start, end)
    assert entries and all(start <= entry.when < end for entry in entries)
    only = [FACTS.broken_automation, "light.living_room_ceiling"]
    assert ha.logbook(start, end, entity_ids=only) == reference.logbook(start, end, entity_ids=only)


def test_error_log_is_the_same(ha: HomeAssistant, reference: SampleHome) -> None:
    assert ha.error_log() == reference.error_log()


@pytest.mark.parametrize(
    "template",
    [
        "{{ states('sensor.home_power') }} W",
        "{{ states('sensor.home_power') | float(0) + states('sensor.heat_pump_power') | float(0) }}",
        "{{ states.light | selectattr('state', 'eq', 'on') | map(attribute='entity_id') | list | tojson }}",
        "{{ area_entities('office') | tojson }} {{ area_name('light.garage_ceiling') }}",
        "{{ integration_entities('wallbox') | select('is_state', 'unavailable') | list | count }}",
        "{{ is_state('person.sam', 'home') }} {{ state_attr('climate.heat_pump', 'temperature') }}",
        "{{ now().isoformat() }}",
    ],
)
def test_templates_render_the_same(ha: HomeAssistant, reference: SampleHome, template: str) -> None:
    assert ha.render_template(template) == reference.render_template(template)


def test_a_template_that_does_not_render_is_HABadRequest(ha: HomeAssistant) -> None:
    with pytest.raises(HABadRequest, match="rendering template"):
        ha.render_template("{{ states('sensor.ev_charger_energy') | float }}")  # 'unavailable': no default


def test_check_config_and_configs_are_the_same(ha: HomeAssistant, reference: SampleHome) -> None:
    assert ha.check_config() == reference.check_config()
    assert ha.check_config().valid
    assert ha.automation_config(FACTS.broken_automation_id) == reference.automation_config(FACTS.broken_automation_id)
    assert ha.script_config("good_night") == reference.script_config("good_night")
    with pytest.raises(HAUnknownEntity):
        ha.automation_config("no-such-automation")
    with pytest.raises(HAUnknownEntity):
        ha.script_config("no_such_script")


def test_turning_a_light_on_changes_the_house_the_same_way(ha: HomeAssistant, reference: SampleHome) -> None:
    # Given the kitchen light is off
    assert ha.state("light.kitchen_ceiling").state == "off"
    # When it is turned on at half brightness (once approved)
    changed = ha.call_service("light", "turn_on", {"entity_id": "light.kitchen_ceiling", "brightness_pct": 50})
    expected = reference.call_service("light", "turn_on", {"entity_id": "light.kitchen_ceiling", "brightness_pct": 50})
    # Then both report the same change, and the light is on from now on
    assert changed == expected
    assert [s.entity_id for s in changed] == ["light.kitchen_ceiling"]
    assert ha.state("light.kitchen_ceiling").state == "on"
    assert ha.state("light.kitchen_ceiling").attributes["brightness"] == 128
    assert ha.states() == reference.states()
    # And its history and the logbook show it, caused by the API's user
    later = FACTS.now + timedelta(minutes=1)
    assert ha.history(["light.kitchen_ceiling"], FACTS.start, later) == reference.history(
        ["light.kitchen_ceiling"], FACTS.start, later
    )
    entries = ha.logbook(FACTS.now, later, entity_ids=["light.kitchen_ceiling"])
    assert [(e.state, e.context_event_type, e.context_service) for e in entries] == [("on", "call_service", "turn_on")]


def test_a_service_at_an_unavailable_entity_succeeds_and_logs_a_warning(ha: HomeAssistant) -> None:
    changed = ha.call_service("light", "turn_on", {"entity_id": FACTS.broken_target})
    assert changed == []
    warning = f"Referenced entities {FACTS.broken_target} are missing or not currently available"
    assert ha.error_log().splitlines()[-1].endswith(f"[homeassistant.helpers.service] {warning}")


def test_an_unknown_service_is_HABadRequest(ha: HomeAssistant) -> None:
    with pytest.raises(HABadRequest):
        ha.call_service("light", "explode", {"entity_id": "light.kitchen_ceiling"})


def test_saving_an_automation_creates_it_and_reload_succeeds(ha: HomeAssistant, reference: SampleHome) -> None:
    # Given a new automation, as HA's editor stores one
    config = {
        "alias": "Porch light at dusk",
        "description": "Proposed by a mission",
        "triggers": [{"trigger": "sun", "event": "sunset"}],
        "conditions": [],
        "actions": [{"action": "light.turn_on", "target": {"entity_id": "light.garden_path"}}],
        "mode": "single",
    }
    # When it is saved, automations are reloaded, and it is read back
    ha.save_automation_config("1710000000001", config)
    reference.save_automation_config("1710000000001", config)
    assert ha.call_service("automation", "reload") == reference.call_service("automation", "reload") == []
    stored = ha.automation_config("1710000000001")
    # Then it is stored with its id, and its entity exists and is on
    assert stored == {"id": "1710000000001", **config}
    assert stored == reference.automation_config("1710000000001")
    state = ha.state("automation.porch_light_at_dusk")
    assert state.state == "on" and state.attributes["id"] == "1710000000001"
    assert ha.states() == reference.states()


def test_saving_an_existing_automation_updates_it(ha: HomeAssistant) -> None:
    # Given the broken garage automation, pointed at a light that works
    config = ha.automation_config(FACTS.broken_automation_id)
    config["actions"][0]["target"]["entity_id"] = "light.hallway"
    # When it is saved
    ha.save_automation_config(FACTS.broken_automation_id, config)
    # Then the same automation (same entity) now targets the hallway light, and triggering it lights it
    # (in the automation run's own context, so HA reports no state changed by the call itself)
    assert ha.automation_config(FACTS.broken_automation_id)["actions"][0]["target"]["entity_id"] == "light.hallway"
    changed = ha.call_service("automation", "trigger", {"entity_id": FACTS.broken_automation})
    assert changed == []
    assert ha.state("light.hallway").state == "on"


def test_a_malformed_automation_is_HABadRequest(ha: HomeAssistant) -> None:
    with pytest.raises(HABadRequest, match="triggers"):
        ha.save_automation_config("1710000000002", {"alias": "No triggers", "actions": [{"action": "light.turn_on"}]})


def test_deleting_an_automation_removes_it(ha: HomeAssistant) -> None:
    ha.delete_automation_config("1709900000008")
    with pytest.raises(HAUnknownEntity):
        ha.automation_config("1709900000008")
    with pytest.raises(HAUnknownEntity):
        ha.state("automation.vacation_lights")
    with pytest.raises(HAUnknownEntity):
        ha.delete_automation_config("1709900000008")


def test_bad_arguments_are_refused_before_any_call(ha: HomeAssistant) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ha.history([FACTS.home_power], datetime(2025, 3, 10), FACTS.now)  # naive: refused
    with pytest.raises(ValueError, match="entity id"):
        ha.history([], FACTS.start, FACTS.now)
