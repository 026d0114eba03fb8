"""Fixtures several unit test modules share."""

from __future__ import annotations

import pytest

from missions.app.runtime import Runtime
from tests.support.fakes import memory_runtime


@pytest.fixture()
def runtime() -> Runtime:
    """The composition root on in-memory adapters, as the HTTP API's tests drive it."""
    return memory_runtime()
