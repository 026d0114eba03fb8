"""The Dashboard Designer's layout and check, and the offline architect's reading of dashboard requests."""

from __future__ import annotations

from typing import Any

from capabilities.home_assistant.dashboards import chosen, dashboard_errors, describe, layout
from capabilities.home_assistant.models import DashboardDraft
from capabilities.home_assistant.policy import architect


def row(entity_id: str, unit: str | None = None, device_class: str | None = None, area: str | None = None) -> dict:
    return {"entity_id": entity_id, "name": entity_id.split(".")[1].replace("_", " ").capitalize(), "unit": unit,
            "device_class": device_class, "area": area, "state": "1"}  # fmt: skip


HOME = [
    row("sensor.home_power", "W", "power", "utility_room"),
    row("sensor.home_energy", "kWh", "energy", "utility_room"),
    row("sensor.living_room_temperature", "°C", "temperature", "living_room"),
    row("light.living_room_ceiling", area="living_room"),
    row("climate.heat_pump", area="living_room"),
    row("binary_sensor.front_door", device_class="door", area="hallway"),
    row("automation.porch", area="living_room"),
]


def cards(config: dict[str, Any]) -> list[dict[str, Any]]:
    return [card for view in config["views"] for card in view["cards"]]


def test_an_energy_dashboard_shows_power_as_gauges_and_history_and_energy_as_daily_statistics():
    # Given a draft for the energy and power device classes
    draft = DashboardDraft(title="Energy", icon="mdi:lightning-bolt", device_classes=["energy", "power"])
    # When it is laid out over the home's entities
    config = layout(draft, HOME)
    # Then the meters get the cards that suit them, and nothing else is on it
    assert [(c["type"], c.get("entity") or c["entities"]) for c in cards(config)] == [
        ("gauge", "sensor.home_power"),
        ("history-graph", ["sensor.home_power"]),
        ("statistics-graph", ["sensor.home_energy"]),
    ]
    bars = cards(config)[2]
    assert bars["stat_types"] == ["change"] and bars["period"] == "day" and bars["chart_type"] == "bar"
    assert (
        config["views"][0]["path"] == "energy" and dashboard_errors("dashboard-energy", draft.icon, config, HOME) == []
    )


def test_an_area_dashboard_lists_what_is_there_by_kind_and_leaves_automations_out():
    # Given a draft for an area, naming no domain nor device class
    draft = DashboardDraft(title="Living room", areas=["living_room"])
    # Then it shows everything there but automations: a thermostat, measurements as history, the rest as a list
    assert [e["entity_id"] for e in chosen(draft, HOME)] == [
        "sensor.living_room_temperature",
        "light.living_room_ceiling",
        "climate.heat_pump",
    ]
    assert [(c["type"], c.get("title")) for c in cards(layout(draft, HOME))] == [
        ("thermostat", None),
        ("history-graph", "Temperature, last 24 hours"),
        ("entities", "Living room"),
    ]


def test_the_check_names_each_thing_home_assistant_would_not_show():
    # Given a dashboard written by hand, with a bad url_path and icon, and cards HA would not show
    config = {
        "views": [
            {
                "cards": [
                    {"type": "gauge", "entity": "light.living_room_ceiling"},  # a light is no measurement
                    {
                        "type": "vertical-stack",
                        "cards": [{"type": "entities", "entities": [{"entity": "sensor.nope"}]}],
                    },
                    {"type": "custom:mushroom-card"},
                ]
            }
        ]
    }
    # Then each is named, cards inside a stack too
    assert dashboard_errors("energy", "lightning", config, HOME) == [
        "url_path energy must be lower-case words joined by hyphens, with at least one hyphen",
        "icon lightning must be prefix:name, e.g. mdi:lightning-bolt",
        "a gauge card needs a measurement: light.living_room_ceiling has no unit",
        "no entity sensor.nope in this home",
        "view 0: no card type 'custom:mushroom-card' in Home Assistant's frontend",
    ]
    assert dashboard_errors("dashboard-x", "mdi:x", {"views": []}, HOME) == ["a dashboard needs at least one view"]


def test_the_description_names_each_card_and_what_it_shows():
    # Given a power dashboard, when it is described, then each card is named with what it shows
    config = layout(DashboardDraft(title="Energy", device_classes=["power"]), HOME)
    said = describe(config, {"sensor.home_power": "Home power"})
    assert said == "1 view(s), 2 card(s): gauge of Home power; history-graph 'Power, last 24 hours' of Home power"


def test_the_offline_architect_drafts_lists_and_undoes_dashboards():
    # Given requests about dashboards, when the offline architect reads them, then it routes each as asked
    energy = architect("a dashboard for my energy use", {})
    assert energy.route == "dashboard" and energy.dashboard is not None
    assert energy.dashboard.title == "Energy" and energy.dashboard.device_classes == ["energy", "power"]
    listed = architect("which dashboards do i have?", {"dashboards": [{"url_path": "dashboard-energy", "title": "E"}]})
    assert listed.route == "answer" and listed.answer == "Your dashboards: E (/dashboard-energy)."
    mine = {"dashboard_deployments": [{"url_path": "dashboard-energy", "title": "Energy"}]}
    undo = architect("roll back the energy dashboard", mine)
    assert undo.route == "dashboard_rollback" and undo.url_path == "dashboard-energy"
    # and a rollback that names no dashboard is still an automation's
    assert architect("roll back the office lights automation", mine).route == "rollback"
