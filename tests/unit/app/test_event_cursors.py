"""Event positions and the cursors clients hold (missions.ports.events, missions.app.cursors)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.app.cursors import BadCursor, decode_position, encode_position
from missions.ports.events import event_position, parse_position

PLACES = st.tuples(st.integers(1, 10**12 - 1), st.integers(0, 999_999))


@given(a=PLACES, b=PLACES)
def test_positions_sort_as_text_as_their_places_do(a: tuple[int, int], b: tuple[int, int]) -> None:
    # Given two places in a timeline (batch, index in it) / When they become positions
    # Then they parse back, and compare as text exactly as the places compare
    assert parse_position(event_position(*a)) == a
    assert (event_position(*a) < event_position(*b)) == (a < b)


@given(place=PLACES)
def test_a_cursor_is_an_opaque_url_safe_position(place: tuple[int, int]) -> None:
    # Given an event's position / When it is handed out as a cursor and comes back
    cursor = encode_position(event_position(*place))
    # Then it is URL-safe and decodes to that position
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=")
    assert decode_position(cursor) == event_position(*place)


def test_a_position_of_one_event_an_item_names_the_first_event_of_its_batch() -> None:
    assert parse_position("e000000000042") == (42, 0)


@pytest.mark.parametrize("position", ["", "c", "e42", "e000000000042.", "e000000000042.1", "x000000000042.000000"])
def test_what_is_not_a_position_is_refused(position: str) -> None:
    with pytest.raises(ValueError):
        parse_position(position)
    with pytest.raises(BadCursor):
        decode_position(encode_position(position) if position else "")


@pytest.mark.parametrize(("batch", "index"), [(0, 0), (1, -1), (1, 1_000_000)])
def test_there_is_no_position_outside_the_timeline(batch: int, index: int) -> None:
    with pytest.raises(ValueError):
        event_position(batch, index)
