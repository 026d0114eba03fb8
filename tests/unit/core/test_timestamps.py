"""The runtime's timestamps: utcnow writes what datetime's isoformat writes, at a third of its cost."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from missions.core.mission.envelope import iso_millis, utcnow

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_NS = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - EPOCH) // timedelta(microseconds=1) * 1000 + 999


@given(st.integers(min_value=0, max_value=LAST_NS))
def test_any_instant_is_written_as_datetime_writes_it(ns):
    # Given any instant from 1970 to the end of year 9999, in nanoseconds
    expected = (EPOCH + timedelta(microseconds=ns // 1000)).isoformat(timespec="milliseconds")
    # When it is written, Then the text is datetime's, truncated to the millisecond
    assert iso_millis(ns) == expected


def test_instants_in_the_same_second_and_across_one():
    # Given two instants in one second and one in the next (the second's text is made once)
    second = 1_796_000_000 * 1_000_000_000
    # When each is written, Then each has its own milliseconds and the next second is not the cached one
    assert iso_millis(second + 5_000_000).endswith(":20.005+00:00")
    assert iso_millis(second + 999_999_999).endswith(":20.999+00:00")
    assert iso_millis(second + 1_000_000_000).endswith(":21.000+00:00")


def test_utcnow_is_now():
    # Given the clock, When utcnow is read, Then it is within a second of datetime's now, in UTC
    written = datetime.fromisoformat(utcnow())
    assert written.utcoffset() == timedelta(0)
    assert abs(written - datetime.now(UTC)) < timedelta(seconds=1)
