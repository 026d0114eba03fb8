"""Property-based fuzzing of the HTTP API on the dev server (schemathesis, seeded and bounded): no
request it generates gets a 5xx, no response strays from the published OpenAPI document, and every
operation answers at least one 2xx: the stateful phase follows the document's links from what a call
created to the operations taking its id. `make fuzz` runs a longer one with workers."""

from __future__ import annotations

import pytest

from tests.support import fuzz

pytestmark = pytest.mark.e2e

# Each operation fuzzed alone a few times (after the schema's examples and its coverage cases), then
# chains along the links: the budget the stateless phase had alone, shared with the stateful one.
BUDGET = fuzz.Budget(max_examples=3, scenarios=60)


def test_the_api_keeps_its_contract_under_fuzzing_and_every_operation_is_reached():
    # Given the dev server over a fresh emulation / When schemathesis fuzzes every operation, then chains
    result = fuzz.run(BUDGET, workers=1, timeout=600)
    # Then it found nothing: no server error, no undocumented status, header or body
    assert result.returncode == 0, result.output[-6000:]
    assert result.coverage.server_errors == 0
    # And every operation answered a 2xx at least once: none was only ever refused or missing
    assert result.coverage.unreached == [], result.coverage.summary()
