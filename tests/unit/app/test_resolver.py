"""The one router (missions.app.resolver): its request is its thread's, so two requests resolved at once
(the dev server runs both HTTP functions in one process, the stream function many requests at once)
never read each other's caller."""

from __future__ import annotations

import json
import threading
from typing import Any

from missions.app.http_event import http_event
from missions.app.resolver import Resolver


def test_two_requests_at_once_each_read_their_own_caller():
    # Given a route that waits, once it has begun, until a second request is inside it too
    app = Resolver()
    both_inside = threading.Barrier(2)

    @app.get("/who")
    def who() -> dict[str, Any]:
        both_inside.wait(timeout=10)
        return {"user": app.current_user(), "path": app.current_event.path}

    seen: dict[str, Any] = {}

    def ask(user: str) -> None:
        result = app.resolve(http_event("GET", "/who", "", {}, b"", user), None)
        seen[user] = json.loads(result["body"])["user"]

    # When ann and bob ask at the same moment
    threads = [threading.Thread(target=ask, args=(user,)) for user in ("ann", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    # Then each was told who they are, not who asked last
    assert seen == {"ann": "ann", "bob": "bob"}
