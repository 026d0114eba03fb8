"""Fixtures of the capability tests: a real Home Assistant, started once per worker that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.home_assistant import MISSING, RunningHomeAssistant, installed, running_home_assistant


@pytest.fixture(scope="session")
def real_home_assistant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHomeAssistant]:
    """The pinned HA from `.ha/venv` (`make ha`; `make test` prepares it), onboarded, on loopback.
    Only tests/integration/capabilities/test_ha_real_conformance.py uses it, so under `--dist loadfile`
    one worker starts it; it stops when that worker's session ends."""
    if not installed():
        pytest.skip(MISSING)
    with running_home_assistant(tmp_path_factory.mktemp("home-assistant")) as ha:
        yield ha
