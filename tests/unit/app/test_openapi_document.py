"""The published OpenAPI document: its links (missions.app.api.links) from each response that gives an id
to every operation taking it, so a client or a stateful fuzzer can chain calls instead of guessing ids;
and what it says of a 204."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import schemathesis

from missions.app.api import app
from missions.app.api.links import GIVES, Gives, link_operations

METHODS = ("get", "put", "post", "delete", "patch")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return json.loads(app.get_openapi_json_schema())  # type: ignore[no-any-return]


def _operations(document: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    return {
        op["operationId"]: (method, path, op)
        for path, item in document["paths"].items()
        for method, op in item.items()
        if method in METHODS
    }


def _links(document: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", status, name, link)
        for path, item in document["paths"].items()
        for method, op in item.items()
        if method in METHODS
        for status, response in op["responses"].items()
        for name, link in (response.get("links") or {}).items()
    ]


def test_every_operation_taking_an_id_is_the_target_of_a_link(document):
    # Given the published document / When every link's target is collected
    targets = {link["operationId"] for _, _, _, link in _links(document)}
    # Then each operation with a path parameter (an id, a name, a version) is reached by one
    taking = [op for op, (_, path, _) in _operations(document).items() if "{" in path]
    assert taking, "the API has operations taking an id"
    assert [op for op in taking if op not in targets] == []


def test_a_created_mission_leads_to_reading_it_and_its_question_to_answering_it(document):
    # Given the responses of POST /missions and GET /missions/{mission_id}
    paths = document["paths"]
    created = paths["/missions"]["post"]["responses"]["202"]["links"]
    read = paths["/missions/{mission_id}"]["get"]["responses"]["200"]["links"]
    # Then the mission id it gives is the path parameter of the mission's operations
    get_mission = paths["/missions/{mission_id}"]["get"]["operationId"]
    assert created[get_mission]["parameters"] == {"path.mission_id": "$response.body#/mission_id"}
    # And the question a mission waits on is the one its answer names
    answer = paths["/missions/{mission_id}/interrupts/{interrupt_id}"]["post"]["operationId"]
    assert read[answer]["parameters"] == {
        "path.mission_id": "$request.path.mission_id",
        "path.interrupt_id": "$response.body#/pending_interrupt/interrupt_id",
    }


def test_every_link_names_an_operation_and_each_of_its_path_parameters(document):
    # Given every link of the document
    operations = _operations(document)
    links = _links(document)
    assert links, "the document has links"
    for source, status, name, link in links:
        # Then its target exists, and it gives every path parameter the target takes, and query
        # parameters the target has
        _, path, target = operations[link["operationId"]]
        takes = {f"path.{p}" for p in re.findall(r"{(\w+)}", path)}
        queries = {f"query.{p['name']}" for p in target.get("parameters", []) if p["in"] == "query"}
        given = set(link.get("parameters") or {})
        assert takes <= given <= takes | queries, (source, status, name)
        for expression in [*(link.get("parameters") or {}).values(), *(link.get("requestBody") or {}).values()]:
            assert re.fullmatch(r"\$(response\.body#/[\w/]+|request\.path\.\w+)", expression), (source, expression)


def test_schemathesis_builds_its_state_machine_from_the_links(document):
    # Given the document as schemathesis loads it / When it builds its stateful test from the links
    machine = schemathesis.openapi.from_dict(document).as_state_machine()
    # Then every link is a transition it accepts (an invalid one raises here), from the creating responses
    assert machine.schema is not None
    assert len(_links(document)) >= len(GIVES)


def test_a_response_that_is_not_documented_cannot_be_linked_from(document):
    # Given a source naming a status its operation does not answer
    wrong = Gives("post", "/missions", 201, {"mission_id": "$response.body#/mission_id"})
    # When the document is linked / Then it says which response is missing rather than linking nothing
    with pytest.raises(LookupError, match="no 201 response of POST /missions"):
        link_operations(app.get_openapi_schema(), [wrong])


def test_a_204_documents_no_content(document):
    # Given every 204 the document describes (a deletion, an opt-out)
    empty = [
        (method, path, op["responses"]["204"])
        for path, item in document["paths"].items()
        for method, op in item.items()
        if method in METHODS and "204" in op["responses"]
    ]
    assert empty, "the API answers 204 somewhere"
    # Then none promises a body or a content type: a 204 has neither (RFC 9110 15.3.5)
    assert [(method, path) for method, path, response in empty if "content" in response] == []
