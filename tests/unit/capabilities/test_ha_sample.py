"""The sample home's week holds the patterns missions are built to find: a meter with a standby load
at night and the car charging every night, a heat pump that follows the weather, lights that follow
people, a charger integration that failed two days ago (and says so in the log), a button nobody
presses and an automation firing at a light that is gone. Each is checked through the port only,
as a mission would find it, and against the figures `facts` states."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.dev.sample_data import REFERENCE_NOW
from capabilities.home_assistant.ha import HistoryPoint, HomeAssistant, State

ZONE = ZoneInfo("Europe/Amsterdam")


@pytest.fixture(scope="module")
def home() -> SampleHome:
    """Read only in this module (tests that change the house make their own)."""
    return SampleHome()


def week(home: SampleHome, *entity_ids: str) -> dict[str, list[HistoryPoint]]:
    return home.history(list(entity_ids), home.facts.start, home.facts.now)


def local(moment: datetime) -> datetime:
    return moment.astimezone(ZONE)


def state_at(points: list[HistoryPoint], moment: datetime) -> str:
    """The state an entity was in at a moment, from its history."""
    current = points[0].state
    for point in points:
        if point.last_changed > moment:
            break
        current = point.state
    return current


def nights(home: SampleHome) -> list[datetime]:
    """Local midnights of the week's seven nights."""
    first = local(home.facts.start).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return [first + timedelta(days=n) for n in range(7)]


def test_the_house_has_enough_entities_domains_and_areas(home: SampleHome) -> None:
    states = home.states()
    domains = {s.domain for s in states}
    assert len(states) >= 40
    assert {"sensor", "light", "switch", "climate", "binary_sensor", "button", "automation", "script"} <= domains
    assert {"person", "weather", "media_player", "lock", "cover"} <= domains
    assert len(home.areas) >= 6
    assert home.facts.entity_count == len(states)
    # areas are reachable as HA exposes them: through templates
    assert home.render_template("{{ areas() | count }}") == str(len(home.areas))
    assert "light.office_ceiling" in home.render_template("{{ area_entities('Office') }}")


def test_the_same_now_gives_the_same_house_and_another_now_moves_the_week() -> None:
    first, second = SampleHome(), SampleHome()
    assert first.states() == second.states()
    assert first.error_log() == second.error_log()
    later = SampleHome(REFERENCE_NOW + timedelta(days=1))
    assert later.facts.start == REFERENCE_NOW - timedelta(days=6)
    assert later.state("sensor.home_power") != first.state("sensor.home_power")
    with pytest.raises(ValueError, match="timezone-aware"):
        SampleHome(datetime(2025, 3, 14, 12))  # naive: refused


def test_history_is_seven_days_at_five_minutes(home: SampleHome) -> None:
    facts = home.facts
    points = week(home, facts.home_power)[facts.home_power]
    times = [p.last_changed for p in points]
    assert len(points) == 7 * 24 * 12
    assert times[0] == facts.start and times[-1] == facts.now - timedelta(minutes=5)
    assert {b - a for a, b in zip(times, times[1:], strict=False)} == {timedelta(minutes=5)}
    assert all(p.number() is not None for p in points)


def test_the_week_of_energy_adds_up(home: SampleHome) -> None:
    facts = home.facts
    history = week(home, facts.home_power, facts.home_energy)
    # the meter's reading now minus at the start of the week
    metered = float(home.state(facts.home_energy).state) - float(history[facts.home_energy][0].state)
    # and the power integrated over the week (5-minute readings)
    integrated = sum(float(p.state) for p in history[facts.home_power]) * 5 / 60 / 1000
    assert metered == pytest.approx(facts.week_energy_kwh, abs=0.002)
    assert integrated == pytest.approx(facts.week_energy_kwh, abs=0.01)
    assert 250 < facts.week_energy_kwh < 600


def test_the_whole_home_draws_a_standby_load_at_night(home: SampleHome) -> None:
    points = week(home, home.facts.home_power)[home.facts.home_power]
    for midnight in nights(home):
        quiet = [
            float(p.state)
            for p in points
            if midnight - timedelta(minutes=15) <= local(p.last_changed) < midnight + timedelta(minutes=55)
        ]
        assert len(quiet) == 14
        assert 100 < statistics.median(quiet) < 300, midnight
    assert 100 < home.facts.night_standby_w < 300


def test_the_car_charges_every_night(home: SampleHome) -> None:
    facts = home.facts
    points = week(home, facts.home_power)[facts.home_power]
    for midnight in nights(home):
        charging = [
            local(p.last_changed)
            for p in points
            if midnight + timedelta(minutes=30) <= local(p.last_changed) < midnight + timedelta(hours=6)
            and float(p.state) > 6500
        ]
        assert len(charging) >= 30, midnight  # 2.5 h or more at ~7 kW
        assert charging[0] - midnight < timedelta(hours=1, minutes=20)  # from about 01:00
    assert len(facts.ev_sessions) == 7
    assert all(6.9 < kwh / ((end - start).total_seconds() / 3600) < 7.6 for start, end, kwh in facts.ev_sessions)
    assert facts.ev_week_kwh == pytest.approx(sum(kwh for _, _, kwh in facts.ev_sessions))


def test_the_charger_energy_sensor_went_unavailable_two_days_ago(home: SampleHome) -> None:
    facts = home.facts
    # Now: unavailable, since about two days
    state = home.state(facts.ev_charger_energy)
    assert state.state == "unavailable"
    assert abs(state.last_changed - (facts.now - timedelta(days=2))) < timedelta(minutes=1)
    assert state.last_changed == facts.ev_failed_at + timedelta(seconds=4.3)
    # History: readings before, nothing but "unavailable" after
    points = week(home, facts.ev_charger_energy)[facts.ev_charger_energy]
    before = [p for p in points if p.last_changed < state.last_changed]
    after = [p for p in points if p.last_changed >= state.last_changed]
    assert before and all(p.number() is not None for p in before)
    assert [p.state for p in after] == ["unavailable"]
    # Its readings rose by what each night's charge drew, while it still reported (a reading counts
    # the energy up to it: the last 5 minutes of a charge show in the next one)
    for start, end, kwh in facts.ev_sessions:
        if end < facts.ev_failed_at:
            rise = float(state_at(points, end + timedelta(minutes=5))) - float(state_at(points, start))
            assert rise == pytest.approx(kwh, abs=0.02)
    # The whole integration is down, not one sensor: every wallbox entity is unavailable
    assert home.render_template("{{ integration_entities('wallbox') | count }}") == "3"
    assert (
        home.render_template("{{ integration_entities('wallbox') | select('is_state', 'unavailable') | list | count }}")
        == "3"
    )


def test_the_error_log_says_why_the_charger_failed(home: SampleHome) -> None:
    facts = home.facts
    log = home.error_log().splitlines()
    assert all(line in log for line in facts.ev_log_lines)
    failing = [line for line in log if "[homeassistant.components.wallbox" in line or "wallbox integration" in line]
    assert len(failing) == 2
    for line in failing:
        # HA's format: local time with milliseconds, level, thread, logger, message
        when = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=ZONE)
        assert abs(when - facts.ev_failed_at) < timedelta(seconds=10)
        assert line[24:].split(" ")[0] in ("ERROR", "WARNING")
    assert any(f"[{facts.ev_logger}]" in line and "Error fetching wallbox data" in line for line in failing)
    # and the log runs in time order, nothing after now
    stamps = [line[:23] for line in log]
    assert stamps == sorted(stamps)
    assert stamps[-1] <= local(facts.now).strftime("%Y-%m-%d %H:%M:%S.999")


def test_the_heat_pump_draws_more_when_it_is_colder_and_rests_at_night(home: SampleHome) -> None:
    facts = home.facts
    history = week(home, facts.heat_pump_power, facts.outdoor_temperature)
    power, outdoor = history[facts.heat_pump_power], history[facts.outdoor_temperature]
    # in the day, the colder it is the more it draws
    day_pairs = [
        (float(p.state), float(state_at(outdoor, p.last_changed)))
        for p in power
        if 7 <= local(p.last_changed).hour < 22
    ]
    assert len(day_pairs) > 7 * 12 * 12
    assert statistics.correlation([p for p, _ in day_pairs], [t for _, t in day_pairs]) < -0.7
    # in the night setback it is off (one "0" reading: HA records a state once, not every 5 minutes)
    for midnight in nights(home):
        for hour in (-0.5, 1, 2.5, 4):
            assert state_at(power, midnight + timedelta(hours=hour)) == "0", midnight
    assert home.state(facts.heat_pump).state == "heat"


def test_lights_follow_occupancy(home: SampleHome) -> None:
    facts = home.facts
    for lights, motion_sensor, grace in (
        (facts.living_room_lights[:1], facts.living_room_motion, timedelta(minutes=5)),
        (facts.office_lights, facts.office_motion, timedelta(minutes=10)),
    ):
        history = week(home, *lights, motion_sensor)
        motion = history[motion_sensor]
        for light in lights:
            changes = history[light][1:]
            assert len(changes) >= 10, light
            for point in changes:
                if point.state == "on":  # someone is there when it goes on
                    assert state_at(motion, point.last_changed) == "on", (light, point.last_changed)
                else:  # and it goes off only once nobody has moved for the grace period
                    assert state_at(motion, point.last_changed - grace + timedelta(seconds=1)) == "off"
    # the logbook says the automations did it
    day = home.logbook(facts.now - timedelta(days=1), facts.now, entity_ids=[facts.office_lights[0]])
    assert day and all(e.context_event_type == "automation_triggered" for e in day)
    assert {e.context_name for e in day} == {"Office lights follow occupancy"}


def test_nobody_presses_the_hood_filter_button(home: SampleHome) -> None:
    facts = home.facts
    points = week(home, facts.unpressed_button, facts.pressed_button)
    assert [p.state for p in points[facts.unpressed_button]] == ["unknown"]  # the week's start: no change since
    assert home.logbook(facts.start, facts.now, entity_ids=[facts.unpressed_button]) == []
    pressed = home.logbook(facts.start, facts.now, entity_ids=[facts.pressed_button])
    assert len(pressed) == 2 and all(e.context_service == "press" for e in pressed)


def test_the_garage_automation_fires_at_an_unavailable_light(home: SampleHome) -> None:
    facts = home.facts
    # The target has been unavailable all week
    assert [p.state for p in week(home, facts.broken_target)[facts.broken_target]] == ["unavailable"]
    # yet the automation is on and fires whenever the garage door opens, as the logbook shows
    automation = home.state(facts.broken_automation)
    assert automation.state == "on"
    fired = home.logbook(facts.start, facts.now, entity_ids=[facts.broken_automation])
    assert [e.when for e in fired] == list(facts.broken_automation_fired)
    assert len(fired) >= 5
    assert {e.message for e in fired} == {"triggered by state of binary_sensor.garage_door"}
    assert automation.attributes["last_triggered"] == fired[-1].when.isoformat()
    # each run left a warning in the log about the missing light
    warnings = [line for line in home.error_log().splitlines() if f"Referenced entities {facts.broken_target}" in line]
    assert len(warnings) >= len(fired)
    # and its config targets that light
    config = home.automation_config(facts.broken_automation_id)
    assert config["actions"][0]["target"]["entity_id"] == facts.broken_target


def test_automations_and_scripts_are_HA_configs(home: SampleHome) -> None:
    automations = [s for s in home.states() if s.domain == "automation"]
    assert len(automations) >= 8
    for automation in automations:
        config = home.automation_config(str(automation.attributes["id"]))
        assert {"id", "alias", "triggers", "conditions", "actions", "mode"} <= set(config)
        assert config["alias"] == automation.name
    assert home.state("automation.vacation_lights").state == "off"
    scripts = [s.entity_id.split(".", 1)[1] for s in home.states() if s.domain == "script"]
    assert scripts and all(home.script_config(s)["sequence"] for s in scripts)


def test_the_services_are_the_ones_the_house_uses(home: SampleHome) -> None:
    offered = {(d.domain, name): service for d in home.services() for name, service in d.services.items()}
    for needed in [
        ("light", "turn_on"),
        ("light", "turn_off"),
        ("switch", "toggle"),
        ("climate", "set_temperature"),
        ("automation", "reload"),
        ("automation", "trigger"),
        ("script", "turn_on"),
        ("script", "good_night"),
        ("notify", "mobile_app_sam_phone"),
    ]:
        assert needed in offered, needed
    assert offered[("notify", "mobile_app_sam_phone")].fields["message"].required
    assert offered[("light", "turn_on")].target == {"entity": [{"domain": ["light"]}]}


ACTIONS: list[tuple[str, str, dict[str, object], str, Callable[[State], object], object]] = [
    ("switch", "turn_on", {"entity_id": "switch.coffee_machine"}, "switch.coffee_machine", lambda s: s.state, "on"),
    ("climate", "set_temperature", {"entity_id": "climate.heat_pump", "temperature": 19.5}, "climate.heat_pump",
     lambda s: s.attributes["temperature"], 19.5),
    ("lock", "unlock", {"target": {"entity_id": "lock.back_door"}}, "lock.back_door", lambda s: s.state, "unlocked"),
    ("cover", "close_cover", {"entity_id": "cover.living_room_blinds"}, "cover.living_room_blinds",
     lambda s: s.state, "closed"),
    ("light", "turn_on", {"target": {"area_id": "garden"}}, "light.garden_path", lambda s: s.state, "on"),
    ("homeassistant", "turn_on", {"entity_id": "input_boolean.guest_mode"}, "input_boolean.guest_mode",
     lambda s: s.state, "on"),
    ("automation", "turn_off", {"entity_id": "automation.morning_coffee"}, "automation.morning_coffee",
     lambda s: s.state, "off"),
    ("button", "press", {"entity_id": "button.kitchen_hood_filter_reset"}, "button.kitchen_hood_filter_reset",
     lambda s: s.state, REFERENCE_NOW.replace(microsecond=1000).isoformat()),
]  # fmt: skip


@pytest.mark.parametrize(("domain", "service", "data", "entity_id", "read", "expected"), ACTIONS)
def test_services_change_the_house(
    domain: str,
    service: str,
    data: dict[str, object],
    entity_id: str,
    read: Callable[[State], object],
    expected: object,
) -> None:
    home = SampleHome()
    changed = home.call_service(domain, service, data)
    assert entity_id in [s.entity_id for s in changed]
    assert read(home.state(entity_id)) == expected
    assert read(SampleHome().state(entity_id)) != expected  # another mission's house is untouched


def test_scripts_run_their_actions_and_notifications_are_kept() -> None:
    home = SampleHome()
    home.call_service("light", "turn_on", {"entity_id": "light.living_room_floor_lamp"})
    changed = home.call_service("script", "good_night")
    assert {"light.living_room_floor_lamp", "lock.front_door", "script.good_night"} <= {s.entity_id for s in changed}
    assert home.state("light.living_room_floor_lamp").state == "off"
    started = home.logbook(home.now, home.now + timedelta(seconds=1), entity_ids=["script.good_night"])
    assert [e.message for e in started] == ["started"]
    home.call_service("notify", "mobile_app_sam_phone", {"message": "Charger offline since Wednesday"})
    assert home.notifications == [
        {"service": "notify.mobile_app_sam_phone", "data": {"message": "Charger offline since Wednesday"}}
    ]


def test_check_config_reports_what_it_was_told() -> None:
    assert SampleHome().check_config().valid
    broken = SampleHome(config_errors="Integration error: wallbox - Integration not found.").check_config()
    assert not broken.valid and broken.errors and "wallbox" in broken.errors


def test_the_sample_is_a_home_assistant() -> None:
    ha: HomeAssistant = SampleHome()
    assert isinstance(ha, HomeAssistant)
    assert ha.config().location_name == "Aether Sample Home"
    assert REFERENCE_NOW.tzinfo is UTC


def test_what_a_mission_is_given_cannot_change_the_cached_week() -> None:
    # Given a mission that mutates everything it was handed
    home = SampleHome()
    for state in home.states():
        state.attributes.clear()
    for points in home.history(
        ["light.office_ceiling"], home.facts.start, home.facts.now, no_attributes=False
    ).values():
        for point in points:
            point.attributes.setdefault("supported_color_modes", []).append("hacked")
    home.automation_config(home.facts.broken_automation_id)["triggers"].clear()
    # Then a new house is as it was
    fresh = SampleHome()
    assert fresh.state("light.office_ceiling").attributes["supported_color_modes"] == ["color_temp"]
    assert fresh.automation_config(fresh.facts.broken_automation_id)["triggers"]
    assert fresh.states() == SampleHome().states()
    assert home.state("light.office_ceiling").attributes  # and the mission's own house too
