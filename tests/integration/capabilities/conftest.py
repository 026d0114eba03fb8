"""Fixtures of the capability tests: a real Home Assistant, started once per worker that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from capabilities.home_assistant.dev.fake_server import serve
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HomeAssistant
from capabilities.home_assistant.ha.rest import RestHomeAssistant
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


@pytest.fixture(params=["sample", "rest"])
def ha(request: pytest.FixtureRequest) -> Iterator[HomeAssistant]:
    """Each implementation of the port over its own fresh sample home: the sample answered directly, and
    the same house behind HA's REST and websocket APIs (the fake server on localhost)."""
    if request.param == "sample":
        yield SampleHome()
        return
    with serve(SampleHome()) as fake, RestHomeAssistant(fake.url, fake.token) as client:
        yield client
