"""Fixtures several unit test modules share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from missions.app.runtime import Runtime
from tests.support.fakes import memory_runtime
from tests.support.models.fake_openai import FakeOpenAI


@pytest.fixture()
def runtime() -> Runtime:
    """The composition root on in-memory adapters, as the HTTP API's tests drive it."""
    return memory_runtime()


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A local OpenAI-compatible server, as the OpenAIProvider's tests talk to it."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    """The waits a provider under test asked for, instead of sleeping them."""
    return []
