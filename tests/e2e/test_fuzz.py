"""Property-based fuzzing of the HTTP API on the dev server (schemathesis, seeded and bounded): no
request it generates gets a 5xx, no response strays from the published OpenAPI document, and every
operation answers at least one 2xx: the stateful phase follows the document's links from what a call
created to the operations taking its id, and a set-up gives the few acting on what random data cannot
make (a running mission, a question waiting, a git repository) an example naming it (tests.support.fuzz_setup).
`make fuzz` runs a longer one with workers."""

from __future__ import annotations

import pytest

from tests.support import fuzz

pytestmark = pytest.mark.e2e

# The stateless phases had the whole budget; the stateful one (40 chains) is paid for by 2 random cases
# an operation (from 10) and one unexpected method a path in the coverage phase (from all).
BUDGET = fuzz.Budget(max_examples=2, scenarios=40, unexpected_methods=("patch",))


def test_the_api_keeps_its_contract_under_fuzzing_and_every_operation_is_reached():
    # Given the dev server over a fresh emulation / When schemathesis fuzzes every operation, then chains
    result = fuzz.run(BUDGET, workers=1, timeout=600)
    print(result.coverage.summary())  # the figures, with -s or -rP
    # Then it found nothing: no server error, no undocumented status, header or body
    assert result.returncode == 0, result.output[-6000:]
    assert result.coverage.server_errors == 0
    # And every operation answered a 2xx at least once
    assert result.coverage.unreached == [], result.coverage.summary()
