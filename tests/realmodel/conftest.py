"""The real-model tier (`make test-model`): llama.cpp's server and a small model, started once per session.

Its tests carry the `realmodel` marker and run only when asked for by it (`-m realmodel`): `make test`,
whose time goal they would break (minutes of a 270M model on two cores), deselects them here. Without
`.model/venv` (`make model`) they skip, as the real Home Assistant's tests do without `.ha/venv`.
At the end the session prints what each mission did and took (the figures `make test-model` reports).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.models.llama_server import (
    MISSING,
    RecordingProxy,
    RunningModelServer,
    installed,
    running_model_server,
)

MARKER = "realmodel"
FIGURES: list[dict[str, Any]] = []  # one row per mission, and the server's start, for the summary


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: runs missions on llama.cpp's server with a real model")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep this tier's tests only when `-m` names it (a hook of this conftest sees every item)."""
    if MARKER in (config.option.markexpr or ""):
        return
    mine = [item for item in items if item.get_closest_marker(MARKER) is not None]
    if mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item.get_closest_marker(MARKER) is None]


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningModelServer]:
    if not installed():
        pytest.skip(MISSING)
    with running_model_server(tmp_path_factory.mktemp("model-server")) as server:
        FIGURES.append({"server_started_in": round(server.started_in, 2)})
        yield server


@pytest.fixture(scope="session")
def wire(model_server: RunningModelServer) -> Iterator[tuple[RecordingProxy, str]]:
    """The recording proxy in front of the server, and the base URL users would set OPENAI_BASE_URL to."""
    proxy = RecordingProxy(model_server.url)
    with proxy.serving() as base_url:
        yield proxy, base_url


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("missions on a real model")
    for row in FIGURES:
        terminalreporter.write_line("  ".join(f"{key}={value}" for key, value in row.items()))
