"""The cron evaluator: AWS's cron forms, time zones across DST changes, and the expressions it refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from missions.core.triggers.cron import parse_cron


def fires(expression: str, start: str, end: str, timezone: str = "UTC") -> list[str]:
    cron = parse_cron(expression)
    begin, finish = (datetime.fromisoformat(t).replace(tzinfo=UTC) for t in (start, end))
    return [t.strftime("%Y-%m-%dT%H:%M") for t in cron.fire_times(begin, finish, timezone)]


def test_cron_every_15_minutes():
    assert fires("cron(*/15 * * * ? *)", "2024-01-01T00:00", "2024-01-01T01:00") == [
        "2024-01-01T00:15",
        "2024-01-01T00:30",
        "2024-01-01T00:45",
        "2024-01-01T01:00",
    ]
    assert fires("cron(5/20 * * * ? *)", "2024-01-01T00:00", "2024-01-01T00:59") == [
        "2024-01-01T00:05",
        "2024-01-01T00:25",
        "2024-01-01T00:45",
    ]


def test_cron_weekdays_at_8_in_paris_across_the_spring_dst_change():
    # Given 8:00 on weekdays in Paris, over the week clocks go forward (Sunday 2024-03-31)
    got = fires("cron(0 8 ? * MON-FRI *)", "2024-03-28T00:00", "2024-04-03T00:00", "Europe/Paris")
    # Then it stays 8:00 local: 07:00 UTC before, 06:00 UTC after, never on the weekend
    assert got == ["2024-03-28T07:00", "2024-03-29T07:00", "2024-04-01T06:00", "2024-04-02T06:00"]


def test_cron_in_the_gap_is_skipped_and_in_the_repeated_hour_fires_once():
    # 02:30 does not exist in Paris on 2024-03-31 and happens twice on 2024-10-27
    assert fires("cron(30 2 * * ? *)", "2024-03-30T00:00", "2024-04-02T00:00", "Europe/Paris") == [
        "2024-03-30T01:30",
        "2024-04-01T00:30",
    ]
    assert fires("cron(30 2 * * ? *)", "2024-10-26T00:00", "2024-10-28T00:00", "Europe/Paris") == [
        "2024-10-26T00:30",
        "2024-10-27T00:30",
    ]


def test_cron_day_of_week_numbers_and_names_agree():
    # EventBridge numbers days 1 = SUN ... 7 = SAT; 2024-01-07 is a Sunday
    window = ("2024-01-01T00:00", "2024-01-15T00:00")
    by_number = fires("cron(0 12 ? * 1,7 *)", *window)
    by_name = fires("cron(0 12 ? * sun,SAT *)", *window)
    assert by_number == by_name == ["2024-01-06T12:00", "2024-01-07T12:00", "2024-01-13T12:00", "2024-01-14T12:00"]
    assert fires("cron(0 0 ? * FRI-MON *)", "2024-01-01T00:00", "2024-01-08T00:00") == [
        "2024-01-05T00:00",
        "2024-01-06T00:00",
        "2024-01-07T00:00",
        "2024-01-08T00:00",
    ]


def test_cron_question_mark_in_either_day_field():
    assert fires("cron(0 9 15 * ? *)", "2024-01-01T00:00", "2024-03-31T00:00") == [
        "2024-01-15T09:00",
        "2024-02-15T09:00",
        "2024-03-15T09:00",
    ]
    assert fires("cron(0 9 ? JAN-FEB 2 2024)", "2024-01-01T00:00", "2024-01-20T00:00") == [
        "2024-01-01T09:00",
        "2024-01-08T09:00",
        "2024-01-15T09:00",
    ]


def test_cron_last_weekday_and_nth_day_forms():
    window = ("2024-02-01T00:00", "2024-03-31T23:59")
    assert fires("cron(0 0 L * ? *)", *window) == ["2024-02-29T00:00", "2024-03-31T00:00"]
    assert fires("cron(0 0 LW * ? *)", *window) == ["2024-02-29T00:00", "2024-03-29T00:00"]
    assert fires("cron(0 0 ? * 6L *)", *window) == ["2024-02-23T00:00", "2024-03-29T00:00"]
    assert fires("cron(0 0 ? * MON#1 *)", *window) == ["2024-02-05T00:00", "2024-03-04T00:00"]
    assert fires("cron(0 0 16W * ? *)", *window) == ["2024-02-16T00:00", "2024-03-15T00:00"]  # 2024-03-16 is a Saturday


def test_cron_year_field_limits_firings():
    assert fires("cron(0 0 1 1 ? 2025)", "2024-01-01T00:00", "2024-12-31T00:00") == []


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 8 * * *)",  # five fields
        "cron(0 8 * * MON *)",  # neither day field is '?'
        "cron(0 8 ? * ? *)",  # both are
        "cron(60 8 * * ? *)",  # minute out of range
        "cron(0 24 * * ? *)",
        "cron(0 8 32 * ? *)",
        "cron(0 8 ? * 8 *)",  # day-of-week is 1-7
        "cron(0 8 ? * 0 *)",
        "cron(0 8 * 13 ? *)",
        "cron(0 8 * FOO ? *)",
        "cron(*/0 8 * * ? *)",  # zero step
        "cron(? 8 * * ? *)",  # '?' in minutes
        "cron(0 8 * * ? 1969)",
        "cron(0,,5 8 * * ? *)",
        "cron(0 8 ? * MON#6 *)",
        "rate(5 minutes)",
    ],
)
def test_invalid_cron_expressions_are_value_errors(expression: str):
    with pytest.raises(ValueError):
        parse_cron(expression)


def test_fire_times_refuse_naive_datetimes_and_windows_over_a_year():
    cron = parse_cron("cron(0 0 * * ? *)")
    with pytest.raises(ValueError):
        next(cron.fire_times(datetime(2024, 1, 1), datetime(2024, 1, 2)))
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        next(cron.fire_times(start, start + timedelta(days=367)))
