"""An event's cursor as clients see it: its store position (`missions.ports.events.event_position`: its batch
and its index in it), URL-safe and opaque. GET /missions/{id}/events pages with it (`after`) and the event
stream uses it as each event's id (`Last-Event-ID` resumes); it stays valid for as long as the event is kept."""

from __future__ import annotations

import base64

from missions.ports.events import parse_position


class BadCursor(ValueError):
    pass


def encode_position(position: str) -> str:
    return base64.urlsafe_b64encode(position.encode()).decode()


def decode_position(cursor: str) -> str:
    try:
        position = base64.urlsafe_b64decode(cursor.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        position = ""
    if not position or encode_position(position).rstrip("=") != cursor.rstrip("="):  # no stray characters
        raise BadCursor(f"invalid cursor {cursor[:40]!r}")
    try:
        parse_position(position)
    except ValueError:
        raise BadCursor(f"invalid cursor {cursor[:40]!r}") from None
    return position
