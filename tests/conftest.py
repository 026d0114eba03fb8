"""Suite-wide: every response of the HTTP API any test observes is checked against the OpenAPI document
the API publishes (tests/support/contract.py); a response it does not describe fails that test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True, scope="session")
def responses_keep_the_contract() -> Iterator[None]:
    from missions.app import api
    from tests.support.contract import Contract

    contract = Contract(json.loads(api.app.get_openapi_json_schema()))
    handle = api.handle

    def checked(event: dict[str, Any], context: Any, service: Any) -> dict[str, Any]:
        result = handle(event, context, service)
        contract.check_result(event, result)
        return result

    api.handle = checked  # the functions' API handler calls missions.app.api.handle
    yield
    api.handle = handle
