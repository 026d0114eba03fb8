"""Capabilities: plugin mission types, and the hooks a stage may implement.

A capability folder under `capabilities/` exposes `CAPABILITY` (a `Capability`). The
registry finds them by scanning the package, so adding one touches nothing in the core.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from missions.envelope import Envelope, InterruptKind, InterruptResponse
from missions.llm.scripted import OfflinePolicy
from missions.pipeline import AgentConfig, PipelineConfig
from missions.tools import ToolCatalog, ToolExecutor
from missions.triggers import Triggers


class InterruptRequested(Exception):
    """Raised by a hook to ask a human; the runner turns it into an interrupt."""

    def __init__(
        self,
        kind: InterruptKind,
        question: str,
        *,
        options: list[str] | None = None,
        data: dict[str, Any] | None = None,
    ):
        super().__init__(question)
        self.kind, self.question = kind, question
        self.options, self.data = options or [], data or {}


class StageDefinitionError(Exception):
    """A capability's stage is wired wrongly (a bug, not a transient failure): never retried."""


class EvidenceChainViolation(Exception):
    """A stage cited evidence no tool returned, or a critic added content. Never retried."""


@dataclass
class StageContext:
    envelope: Envelope
    agent: AgentConfig
    pipeline: PipelineConfig
    tools: ToolExecutor | None = None
    resume: InterruptResponse | None = None  # the answer, when this stage is resumed
    llm_output: BaseModel | None = None
    item: Any = None  # the work item, for a fan-out stage's per-item run
    item_results: list[Any] | None = None  # per-item outputs, for a fan-out stage's join
    scratch: dict[str, Any] = field(default_factory=dict)

    @property
    def goal(self) -> str:
        return self.envelope.raw_input

    def output_of(self, stage: str) -> dict[str, Any]:
        return self.envelope.output(stage)

    def ask(
        self,
        kind: InterruptKind,
        question: str,
        options: list[str] | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        raise InterruptRequested(kind, question, options=options, data=data)


class StageHooks:
    """Override what a stage needs. Order: pre -> prompt/LLM -> act (tools) -> post."""

    output_model: type[BaseModel] | None = None  # the LLM's structured output

    def pre(self, ctx: StageContext) -> None:
        """Prepare or ask a human before any work (raise via ctx.ask)."""

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        raise StageDefinitionError(f"stage '{ctx.agent.name}' has an LLM but no prompt hook")

    def act(self, ctx: StageContext) -> None:
        """Call tools through ctx.tools; keep what post() needs in ctx.scratch."""

    def post(self, ctx: StageContext) -> dict[str, Any]:
        """Build the stage's output (the dict routing rules are matched against)."""
        if ctx.llm_output is not None:
            return ctx.llm_output.model_dump(mode="json")
        return {}


@dataclass
class Capability:
    name: str
    description: str
    pipeline: PipelineConfig
    hooks: dict[str, StageHooks]
    offline_policy: OfflinePolicy
    catalog: ToolCatalog = field(default_factory=ToolCatalog)
    auto_approve_tools: frozenset[str] = frozenset()
    keywords: tuple[str, ...] = ()
    triggers: Triggers = field(default_factory=Triggers)
    example_goal: str = ""
    # validate and complete a mission's context before it starts (e.g. resolve a repo path)
    prepare_context: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        names = set(self.pipeline.stage_names())
        unknown = set(self.hooks) - names
        if unknown:
            raise StageDefinitionError(f"capability '{self.name}': hooks for unknown stages {sorted(unknown)}")
        for agent in self.pipeline.agents:
            hooks = self.hooks.get(agent.name)
            if agent.has_llm and (hooks is None or hooks.output_model is None):
                raise StageDefinitionError(
                    f"capability '{self.name}': stage '{agent.name}' has an LLM but no output_model"
                )
            for tool in agent.allowed_tools or []:
                if self.catalog.get(tool) is None:
                    raise StageDefinitionError(
                        f"capability '{self.name}': stage '{agent.name}' allows unknown tool '{tool}'"
                    )

    def hooks_for(self, stage: str) -> StageHooks:
        return self.hooks.get(stage) or StageHooks()

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "stages": self.pipeline.stage_names(),
            "llm_stages": [a.name for a in self.pipeline.agents if a.has_llm],
            "tools": [spec.id for spec in self.catalog.list()],
            "bounds": self.pipeline.bounds.model_dump(),
            "example": self.example_goal,
        }


class UnknownCapability(LookupError):
    pass


_CACHE: dict[str, Capability] = {}


def register(capability: Capability) -> None:
    """Make a capability loadable by name without a package (tests, notebooks)."""
    _CACHE[capability.name] = capability


def installed(package: str = "capabilities") -> list[str]:
    """Capabilities shipped as packages (what gets deployed), without ones registered in-process."""
    module = importlib.import_module(package)
    return sorted(info.name for info in pkgutil.iter_modules(module.__path__) if info.ispkg)


def available(package: str = "capabilities") -> list[str]:
    return sorted(set(installed(package)) | set(_CACHE))


def load(name: str, package: str = "capabilities") -> Capability:
    """Import one capability (only that one: cold starts should not pay for the others)."""
    if name in _CACHE:
        return _CACHE[name]
    names = available(package)
    if name not in names:
        raise UnknownCapability(f"unknown capability '{name}'; installed: {', '.join(names) or 'none'}")
    module = importlib.import_module(f"{package}.{name}")
    capability = getattr(module, "CAPABILITY", None)
    if not isinstance(capability, Capability):
        raise UnknownCapability(f"capabilities/{name} does not define CAPABILITY")
    _CACHE[name] = capability
    return capability


def load_all(package: str = "capabilities") -> list[Capability]:
    return [load(name, package) for name in available(package)]
