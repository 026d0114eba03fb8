"""How the fuzz run counts the operations it reached (tests.support.fuzz_coverage): each request of its
HAR report matched to the document's operation, a 2xx reaching it."""

from __future__ import annotations

from typing import Any

from tests.support.fuzz_coverage import Operation, coverage

DOCUMENT = {
    "paths": {
        "/missions": {"get": {}, "post": {}},
        "/missions/{mission_id}": {"get": {}},
        "/missions/{mission_id}/events": {"get": {}},
        "/missions/{mission_id}/cancel": {"post": {}},
    }
}


def _entry(method: str, url: str, status: int) -> dict[str, Any]:
    return {"request": {"method": method, "url": url}, "response": {"status": status}}


def test_a_request_counts_for_the_operation_its_path_and_method_fit_and_a_2xx_reaches_it():
    # Given a run that created a mission, read its events, and was refused cancelling a missing one
    har = {
        "log": {
            "entries": [
                _entry("POST", "http://127.0.0.1:1/missions", 202),
                _entry("GET", "http://127.0.0.1:1/missions/m_1/events?after=x", 200),
                _entry("POST", "http://127.0.0.1:1/missions/nope/cancel", 404),
                _entry("PATCH", "http://127.0.0.1:1/missions", 405),  # a method the path does not have
                _entry("GET", "http://127.0.0.1:1/missions/m_1", 0),  # no response at all
            ]
        }
    }
    # When it is counted
    counted = coverage(DOCUMENT, har)
    # Then the events were read by their own operation (a literal segment wins over a parameter)
    assert counted.statuses[Operation("get", "/missions/{mission_id}/events")] == {200: 1}
    assert [str(op) for op in counted.reached] == ["POST /missions", "GET /missions/{mission_id}/events"]
    # And the refused and never-answered operations are not reached; the stray method matches none
    assert [str(op) for op in counted.unreached] == [
        "GET /missions",
        "GET /missions/{mission_id}",
        "POST /missions/{mission_id}/cancel",
    ]
    assert counted.unmatched == 1 and counted.responses == 4 and counted.server_errors == 0
