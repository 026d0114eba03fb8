"""Shared helpers of the integration tests: small test capabilities and the `integration` marker.

Every test in this folder runs against moto (see shared/missions/local), so every test here is
marked `integration` (`-m "not integration"` skips them).

Test capabilities are built with `make_capability`: a PipelineConfig from a few AgentConfigs,
typed stage functions (missions.core.capability.stages; see tests/support/stages.py) and a deterministic
offline policy (`offline_policy`) for stages that have an LLM. A LocalCloud finds them in the
registry it is given: `with_capabilities` makes one that knows the installed capabilities and these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability
from missions.core.capability.stages import StageFunction
from missions.core.capability.tools import ToolCatalog
from missions.core.llm.provider import LLMRequest
from missions.core.pipeline.compiler import FINALIZE
from missions.core.pipeline.config import AgentConfig
from tests.support.stages import Note, answering, typed_capability

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]  # tests/integration -> tests -> the repository


# --------------------------------------------------------------------------- marker


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test collected from this folder (and only those) as `integration`."""
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


# --------------------------------------------------------------------------- capabilities


def offline_policy(request: LLMRequest) -> Note:
    """The test capabilities' model: names the stage and the latest human answer, if any."""
    answers = getattr(request.envelope, "answers", None) or []
    heard = answers[-1]["response"].get("text") if answers else None
    return Note(text=f"{request.stage} heard {heard!r}")


def final_answer(text: str = "done") -> StageFunction:
    """The stage function of a final stage named `final`: an answer (the mission's result reads `answer`)."""
    return answering("final", text)


def chain(*names: str, **overrides: dict[str, Any]) -> list[AgentConfig]:
    """A linear pipeline names[0] -> names[1] -> ... ; overrides[name] adds AgentConfig fields."""
    agents = []
    for index, name in enumerate(names):
        fields: dict[str, Any] = {"name": name}
        if index + 1 < len(names):
            fields["default_next"] = names[index + 1]
        fields.update(overrides.get(name, {}))
        agents.append(AgentConfig(**fields))
    return agents


def make_capability(
    name: str,
    agents: Iterable[AgentConfig | dict[str, Any]],
    *functions: StageFunction,
    catalog: ToolCatalog | None = None,
    policy: Callable[[LLMRequest], Any] = offline_policy,
    **pipeline: Any,
) -> Capability:
    """A small capability of these stage functions (a stage without one outputs {}); `pipeline` holds
    PipelineConfig fields (bounds, resume stages, ...).

    Retries wait the minimum (1 s: moto really sleeps on Retry intervals).
    """
    pipeline.setdefault("retry_interval_seconds", 1)
    return typed_capability(
        name,
        agents,
        *functions,
        offline_policy=policy,
        catalog=catalog or ToolCatalog(),
        pipeline=pipeline,
        description=f"integration-test capability '{name}'",
    )


def with_capabilities(*capabilities: Capability) -> tuple[list[str], registry.Registry]:
    """Their names, and a registry that knows them beside the installed ones (for a LocalCloud)."""
    return [c.name for c in capabilities], registry.Registry().including(*capabilities)


def stage_tasks(states: Iterable[str], capability: Capability) -> list[str]:
    """The stage Task states among states entered: one per stage run (plus `finalize`)."""
    stages = set(capability.pipeline.stage_names()) | {FINALIZE}
    return [state for state in states if state in stages]
