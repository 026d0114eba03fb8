"""Property-based fuzzing of the HTTP API on the dev server (schemathesis, seeded and bounded): no
request it generates gets a 5xx, and no response strays from the published OpenAPI document.
`make fuzz` runs a longer one with workers."""

from __future__ import annotations

import pytest

from tests.support import fuzz

pytestmark = pytest.mark.e2e


def test_the_api_keeps_its_contract_under_fuzzing():
    # Given the dev server over a fresh emulation / When schemathesis fuzzes every operation
    result = fuzz.run(max_examples=10, workers=1, timeout=600)
    # Then it found nothing: no server error, no undocumented status, header or body
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
