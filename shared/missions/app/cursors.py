"""An event's cursor as clients see it: its store position, URL-safe and opaque. GET /missions/{id}/events
pages with it (`after`) and the event stream uses it as each event's id (`Last-Event-ID` resumes)."""

from __future__ import annotations

import base64


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
    return position
