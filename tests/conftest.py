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


# Files run whole on one worker (`--dist loadfile --no-loadscope-reorder`: in the order collected, not
# the most tests first); the longest files go first
# (measured: the fuzzer, the flaky-model fleet, mypy from a cold cache, the deploy into moto), then
# the other end-to-end, infrastructure, browser and integration files, so the workers finish together
# instead of one waiting on the last long file.
_LONGEST = (
    "tests/e2e/test_fuzz.py",
    "tests/e2e/test_llm_faults.py",
    "tests/unit/test_layering.py",
    "tests/infra/test_deploy_smoke.py",
    "tests/e2e/test_docs_examples.py",
    "tests/integration/test_dispatch_concurrency.py",
)
_FIRST = ("tests/e2e/", "tests/infra/", "tests/browser/", "tests/integration/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        if path in _LONGEST:
            return 0, _LONGEST.index(path)
        return 1, next((i for i, prefix in enumerate(_FIRST) if path.startswith(prefix)), len(_FIRST))

    items.sort(key=weight)  # stable: otherwise in collection order
