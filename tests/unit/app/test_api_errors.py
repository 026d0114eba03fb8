"""Errors through the HTTP API: domain errors map to HTTP statuses in one place (missions.app.api), and every
response names its request. The HTTP API over the composition root on in-memory adapters, with no AWS and no
moto.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from missions.app.api import edge
from missions.app.resolver import ERROR_STATUS
from missions.app.runtime import Runtime
from missions.core.errors import (
    AnswerRejected,
    ConflictError,
    DependencyUnavailable,
    MemoryValidationError,
    MissionRequestError,
    NotFound,
    RepositoryConflict,
    RepositoryRequestError,
    TaskGone,
    TransitionRefused,
)
from missions.local.devserver import http_event
from missions.local.moto import LocalContext
from tests.support.api import exchange


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFound("no such thing"), 404),
        (PermissionError("operators only"), 403),
        (ConflictError("already"), 409),
        (TransitionRefused("m_1", "completed", "cancelled"), 409),
        (TaskGone("timed out"), 409),
        (RepositoryConflict("importing"), 409),
        (MissionRequestError("bad goal"), 422),
        (AnswerRejected("not an option"), 422),
        (RepositoryRequestError("bad url"), 422),
        (MemoryValidationError("bad key"), 422),
        (DependencyUnavailable("the event bus refused"), 503),
    ],
)
def test_each_domain_error_has_one_status(runtime: Runtime, monkeypatch: pytest.MonkeyPatch, error, status):
    # Given a service that refuses with a domain error
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(runtime.repository_service, "list", refuse)
    # When a route reaches it (straight through the edge: this route documents none of these errors, and
    # the suite's contract check would refuse them, rightly)
    event = http_event("GET", "/repositories", "", {}, b"", "ann")
    result = edge.handle(event, LocalContext("missions-api"), runtime)
    body = json.loads(result["body"])
    # Then the API answers the error's status with its reason and the request's correlation id
    assert result["statusCode"] == status and body["statusCode"] == status and body["message"]
    assert str(error) in body["message"] and body["correlation_id"] == event["requestContext"]["requestId"]
    if status == 503:
        assert int(result["headers"]["Retry-After"]) > 0


def test_the_status_table_is_the_only_mapping():
    # Every domain error of missions.core.errors that a request can cause has its status in the table
    from missions.core import errors

    requestable = [
        errors.NotFound,
        errors.ConflictError,
        errors.MissionRequestError,
        errors.AnswerRejected,
        errors.MemoryValidationError,
        errors.RepositoryRequestError,
        errors.RepositoryConflict,
        errors.DependencyUnavailable,
    ]
    assert all(kind in ERROR_STATUS for kind in requestable)


def test_every_response_names_its_request_the_way_its_logs_do(runtime: Runtime):
    # Given a request that succeeds, one refused at the edge and one refused by its route
    ok = exchange(runtime, "GET", "/capabilities")
    refused = exchange(runtime, "POST", "/missions", raw=b"not json")
    missing = exchange(runtime, "GET", "/missions/m_none")
    # Then each carries its correlation id as a header, and an error body carries the same one
    for status, headers, _body in (ok, refused, missing):
        assert headers.get("x-correlation-id"), (status, headers)
    for status, headers, body in (refused, missing):
        assert status in (400, 404) and body["correlation_id"] == headers["x-correlation-id"]


def test_a_404_says_what_was_not_found_and_an_unknown_path_that_no_route_matched(runtime: Runtime):
    # Given a mission that does not exist, a checkpoint of it, and a path no route serves
    missing = exchange(runtime, "GET", "/missions/m_none")
    missing_checkpoint = exchange(runtime, "GET", "/missions/m_none/checkpoints/0001")
    unknown = exchange(runtime, "GET", "/nowhere/at/all")
    # Then the first two name what they looked for; the last says no route matched
    assert (missing[0], missing[2]["message"]) == (404, "no mission m_none")
    assert (missing_checkpoint[0], missing_checkpoint[2]["message"]) == (404, "no mission m_none")
    assert (unknown[0], unknown[2]["message"]) == (404, "no route GET /nowhere/at/all")
