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


# Files run whole on one worker (`--dist loadfile`) in the order collected; the long end-to-end and
# infrastructure files go first so two workers finish together instead of one waiting on the last.
_FIRST = ("tests/e2e/", "tests/infra/", "tests/browser/", "tests/integration/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> int:
        path = item.nodeid
        return next((i for i, prefix in enumerate(_FIRST) if path.startswith(prefix)), len(_FIRST))

    items.sort(key=weight)  # stable: within a folder, collection order
