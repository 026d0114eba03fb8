"""Long-term statistics: energy analyses over any period read HA's hourly statistics (kept for ever), not
the state history its recorder purges after 10 days; entities without statistics fall back to history."""

from __future__ import annotations

from datetime import timedelta

import pytest

from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HomeAssistant
from missions.core.capability import registry
from tests.support.driver import DirectDriver

FACTS = SampleHome().facts
CAPABILITY = registry.load("home_assistant")


def test_statistics_reach_back_where_the_history_has_been_purged(ha: HomeAssistant):
    # Given a home whose recorder holds a week of states
    now = SampleHome().now
    month_ago = now - timedelta(days=31)
    # When a month of a meter's and a power sensor's statistics are read, per hour and per day
    hourly = ha.statistics([FACTS.home_energy, FACTS.home_power], month_ago, now)
    daily = ha.statistics([FACTS.home_energy, FACTS.home_power], month_ago, now, period="day")
    # Then every hour of the month is there, long before the oldest recorded state
    assert len(hourly[FACTS.home_energy]) == 31 * 24
    assert hourly[FACTS.home_energy][0].start == month_ago
    assert ha.history([FACTS.home_energy], month_ago, month_ago + timedelta(days=1)) == {}
    # And a meter's hours chain (each starts at the reading the hour before ended), its sum counts them
    meter = hourly[FACTS.home_energy]
    for before, after in zip(meter, meter[1:], strict=False):
        assert after.state == pytest.approx(before.state + after.change, abs=1e-3)
        assert after.sum == pytest.approx(before.sum + after.change, abs=1e-3)
    # And the days sum the hours, in the home's zone (32 days: the month's ends fall inside two of them)
    assert len(daily[FACTS.home_energy]) == 32
    assert sum(d.change for d in daily[FACTS.home_energy]) == pytest.approx(sum(h.change for h in meter), abs=1e-2)
    power = hourly[FACTS.home_power]
    assert all(p.min <= p.mean <= p.max for p in power) and all(p.state is None for p in power)


def test_the_last_week_of_statistics_is_what_the_recorded_week_says(ha: HomeAssistant):
    now = SampleHome().now
    week = ha.statistics([FACTS.home_energy], now - timedelta(days=7), now)[FACTS.home_energy]
    # the meter's use over the week's finished hours, up to its reading now
    used = sum(h.change for h in week) + (float(ha.state(FACTS.home_energy).state) - week[-1].state)
    assert used == pytest.approx(FACTS.week_energy_kwh, abs=0.01)


def test_entities_without_statistics_are_absent(ha: HomeAssistant):
    now = SampleHome().now
    found = ha.statistics(
        ["light.living_room_ceiling", "sensor.does_not_exist", FACTS.home_energy], now - timedelta(days=1), now
    )
    assert list(found) == [FACTS.home_energy]


def test_an_energy_analysis_of_last_month_rests_on_the_statistics():
    # Given the sample home, whose states go back a week and whose statistics go back months
    home = SampleHome()
    now = home.now
    month = home.statistics([FACTS.home_energy], now - timedelta(days=31), now)[FACTS.home_energy]
    expected = sum(h.change for h in month) + (float(home.state(FACTS.home_energy).state) - month[-1].state)
    # When the user asks for last month's energy use
    envelope = DirectDriver(CAPABILITY).run("Analyze my energy usage last month", user_id="u-month")
    # Then the analysis covers the month, with the figure the statistics give, far more than a week's
    answer = envelope.outputs["report"]["answer"]
    assert f"The home used {expected:.1f} kWh from {(now - timedelta(days=31)).date()} to {now.date()}" in answer
    assert expected > 4 * FACTS.week_energy_kwh
    assert envelope.terminal_reason == "completed"
