"""Capabilities: plugin mission types.

A capability folder under `capabilities/` (or a package named by a `missions.capabilities` entry
point) holds a `capability.toml` (its config, see missions.core.capability.config) and an
`__init__.py` with its stage functions (missions.core.capability.stages), and optionally
`offline_policy`, `CATALOG` and `prepare_context`; or it builds `CAPABILITY` (a `Capability`) in
code. A `Registry` finds them, so adding one touches nothing in the core.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import pkgutil
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from missions.core.capability.config import CONFIG_FILE, CapabilityConfig, CapabilityConfigError, load_config
from missions.core.capability.mcp import McpLock, McpServerConfig, load_lock, mcp_tools
from missions.core.capability.offline import SchemaAnswers
from missions.core.capability.stages import Ctx as Ctx  # re-exported: a capability imports what it needs from here
from missions.core.capability.stages import InterruptRequested as InterruptRequested  # re-exported for hooks
from missions.core.capability.stages import StageFunction, StageSignatureError, check_stages
from missions.core.capability.stages import stage as stage
from missions.core.capability.tools import ToolCatalog, ToolExecutor
from missions.core.errors import EvidenceChainViolation as EvidenceChainViolation  # re-exported for capabilities
from missions.core.errors import InvalidAnswer as InvalidAnswer  # re-exported: a `ctx.think` check raises it
from missions.core.errors import StageDefinitionError as StageDefinitionError  # re-exported for capabilities
from missions.core.llm.provider import OfflinePolicy
from missions.core.mission.artifacts import Artifact, ArtifactRejected, Artifacts
from missions.core.mission.envelope import Envelope, InterruptResponse
from missions.core.mission.refs import CONTEXT_KEY, RepositoryRef, Workspaces
from missions.core.mission.requests import MultitaskStrategy
from missions.core.pipeline.config import AgentConfig, PipelineConfig
from missions.core.triggers.declared import Triggers


@dataclass
class StageContext:
    envelope: Envelope
    agent: AgentConfig
    pipeline: PipelineConfig
    tools: ToolExecutor | None = None
    resume: InterruptResponse | None = None  # the answer, when this stage is resumed
    approved_call: bool = False  # that answer approved (or declined) a tool call, not a question
    item: Any = None  # the work item, for a fan-out stage's per-item run
    item_results: list[Any] | None = None  # per-item outputs, for a fan-out stage's join
    scratch: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None  # the capability config's prompt for this stage
    artifacts: Artifacts | None = None
    write_token: str = ""  # "<stage>@<hop>": a retried stage rewrites nothing
    workspaces: Workspaces | None = None  # where the mission's repository can be read

    def repository_root(self) -> str:
        """The directory holding the mission's repository (materialized on first use in this container).

        The runtime resolved and checked the repository when the mission started; it is checked
        again here, and every tool call is checked against the allowed roots once more.
        """
        if self.workspaces is None:
            raise StageDefinitionError(f"stage '{self.agent.name}' reads a repository but no workspace is wired")
        named = self.envelope.context.get(CONTEXT_KEY)
        if not isinstance(named, dict):
            raise StageDefinitionError(f"mission {self.envelope.mission_id} names no repository")
        return str(self.workspaces.root_for(RepositoryRef.model_validate(named), self.envelope.user_id))

    def save_artifact(self, path: str, content: Any) -> Artifact:
        """Write the next version of a document for the user (listed and read through the API)."""
        if self.artifacts is None:
            raise StageDefinitionError(f"stage '{self.agent.name}' saved an artifact but no artifact store is wired")
        try:
            return self.artifacts.put(
                self.envelope.mission_id, path, content, stage=self.agent.name, written_by=f"{self.write_token}:{path}"
            )
        except ArtifactRejected as exc:  # a bug in the stage: retrying cannot help
            raise StageDefinitionError(str(exc)) from None

    def read_artifact(self, path: str, version: int | None = None) -> Any:
        """The content of a document this mission saved (the latest version unless one is named)."""
        if self.artifacts is None:
            raise StageDefinitionError(f"stage '{self.agent.name}' read an artifact but no artifact store is wired")
        return self.artifacts.get(self.envelope.mission_id, path, version).content

    @property
    def goal(self) -> str:
        return self.envelope.raw_input


@dataclass
class Capability:
    name: str
    description: str
    pipeline: PipelineConfig
    stages: Mapping[
        str, StageFunction
    ]  # stage -> its function (missions.core.capability.stages); a stage without one outputs {}
    offline_policy: OfflinePolicy
    catalog: ToolCatalog = field(default_factory=ToolCatalog)
    auto_approve_tools: frozenset[str] = frozenset()
    keywords: tuple[str, ...] = ()
    triggers: Triggers = field(default_factory=Triggers)
    example_goal: str = ""
    # validate and complete a mission's context before it starts (e.g. resolve a repo path)
    prepare_context: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    complexity: int = 1  # 1 simple, 2 coordinated, 3 complex
    prompts: dict[str, str] = field(default_factory=dict)  # stage -> system prompt
    models: tuple[str, ...] = ()  # models a mission may name (capability.toml `models`; none: the environment's)
    default_context: dict[str, Any] = field(default_factory=dict)
    repository: str = "none"  # none | optional | required (capability.toml): see missions.repositories
    # what a second request of an active conversation or key does (capability.toml `multitask_strategy`)
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    # the MCP servers its tools come from (capability.toml `mcp_servers`); their tools are in `catalog`
    mcp_servers: tuple[McpServerConfig, ...] = ()
    folder: Path | None = None  # where its capability.toml is (None: built in code)

    def __post_init__(self) -> None:
        names = set(self.pipeline.stage_names())
        unknown = set(self.stages) - names
        if unknown:
            raise StageDefinitionError(f"capability '{self.name}': functions for unknown stages {sorted(unknown)}")
        fan_outs = {a.name: a.default_next or "" for a in self.pipeline.agents if a.fan_out}
        check_stages(list(self.stages.values()), self.pipeline.stage_names(), fan_outs)
        for agent in self.pipeline.agents:
            if agent.has_llm and agent.name not in self.stages:
                raise StageDefinitionError(
                    f"capability '{self.name}': stage '{agent.name}' has an LLM but no stage function to ask it"
                )
            for tool in agent.allowed_tools or []:
                if self.catalog.get(tool) is None:
                    raise StageDefinitionError(
                        f"capability '{self.name}': stage '{agent.name}' allows unknown tool '{tool}'"
                    )

    @classmethod
    def from_config(
        cls,
        config: CapabilityConfig,
        *,
        stages: Mapping[str, StageFunction],
        offline_policy: OfflinePolicy,
        catalog: ToolCatalog | None = None,
        prepare_context: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        source: str = "",
        lock: McpLock | None = None,
        folder: Path | None = None,
    ) -> Capability:
        """The capability of a capability.toml plus its package's code; errors name `source`. Its MCP servers'
        tools join the package's catalog in a catalog of its own (the package's is shared by its modules)."""
        catalog = catalog or ToolCatalog()
        if config.mcp_servers:
            served = mcp_tools(config.name, config.mcp_servers, lock or McpLock())
            clash = sorted(set(served) & set(catalog.tools))
            if clash:
                raise CapabilityConfigError(f"{source}: mcp_servers: tools {clash} are also in the package's CATALOG")
            catalog = ToolCatalog({**catalog.tools, **served})
        missing = [tool for tool in config.tools if catalog.get(tool) is None]
        if missing:
            raise CapabilityConfigError(f"{source}: tools: {missing} are not in the package's CATALOG")
        try:
            return cls(
                name=config.name,
                description=config.description,
                pipeline=config.pipeline,
                stages=stages,
                offline_policy=offline_policy,
                catalog=catalog,
                auto_approve_tools=frozenset(config.auto_approve_tools),
                keywords=tuple(config.keywords),
                triggers=config.triggers,
                example_goal=config.example_goal,
                prepare_context=prepare_context,
                complexity=config.complexity,
                prompts=dict(config.prompts),
                models=tuple(config.models),
                default_context=dict(config.defaults.context),
                repository=config.repository,
                multitask_strategy=config.multitask_strategy,
                mcp_servers=tuple(config.mcp_servers),
                folder=folder,
            )
        except StageDefinitionError as exc:
            raise CapabilityConfigError(f"{source}: {exc}") from None

    def function_for(self, stage: str) -> StageFunction | None:
        return self.stages.get(stage)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "stages": self.pipeline.stage_names(),
            "llm_stages": [a.name for a in self.pipeline.agents if a.has_llm],
            "tools": [spec.id for spec in self.catalog.list()],
            "bounds": self.pipeline.bounds.model_dump(),
            "example": self.example_goal,
            "complexity": self.complexity,
            "multitask_strategy": self.multitask_strategy.value,
            "triggers": self.trigger_names(),
        }

    def trigger_names(self) -> list[str]:
        """Its triggers as GET /triggers/{trigger}/decisions names them: "<capability>.<trigger id>"."""
        return [f"{self.name}.{trigger_id}" for trigger_id in self.triggers.by_id()]


class UnknownCapability(LookupError):
    pass


ENTRY_POINT_GROUP = "missions.capabilities"  # a capability in its own package: name = "module"


class Registry:
    """The capabilities a runtime knows: the folders of a package (`capabilities/<name>/`), the
    `missions.capabilities` entry points of installed distributions, and any given as values.

    A value, not a global: the runtime, the emulation and each test hold their own. Loading imports
    one capability only (cold starts should not pay for the others) and keeps what it built.
    """

    def __init__(
        self,
        package: str = "capabilities",
        extra: Iterable[Capability] = (),
        plugins: Callable[[], Mapping[str, str]] | None = None,
    ):
        """`plugins`: capability name -> module of capabilities living in packages of their own
        (default: the `missions.capabilities` entry points of the installed distributions)."""
        self.package = package
        self._extra = {capability.name: capability for capability in extra}
        self._plugins_source = plugins or entry_point_plugins
        self._loaded: dict[str, Capability] = dict(self._extra)
        self._installed: list[str] | None = None
        self._lock = threading.Lock()

    def including(self, *capabilities: Capability) -> Registry:
        """A registry that also knows these (tests, notebooks)."""
        return Registry(self.package, [*self._extra.values(), *capabilities], self._plugins_source)

    def installed(self) -> list[str]:
        """Capabilities shipped as packages (what gets deployed), without ones given as values.

        Looked up once: what a process can import does not change while it runs (a new capability
        needs a new deployment or a restarted dev server), and reading every installed distribution's
        entry points was a few percent of each API request's time."""
        with self._lock:
            if self._installed is None:
                self._installed = self._look_up()
            return list(self._installed)

    def _look_up(self) -> list[str]:
        try:
            module = importlib.import_module(self.package)
        except ModuleNotFoundError:
            folders: set[str] = set()
        else:
            folders = {info.name for info in pkgutil.iter_modules(module.__path__) if info.ispkg}
        return sorted(folders | set(self._plugins()))

    def available(self) -> list[str]:
        return sorted(set(self.installed()) | set(self._extra))

    def load(self, name: str) -> Capability:
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
        names = self.available()
        if name not in names:
            raise UnknownCapability(f"unknown capability '{name}'; installed: {', '.join(names) or 'none'}")
        module_name = self._plugins().get(name, f"{self.package}.{name}")
        capability = _from_module(importlib.import_module(module_name), name)
        with self._lock:
            return self._loaded.setdefault(name, capability)

    def load_all(self) -> list[Capability]:
        return [self.load(name) for name in self.available()]

    def with_delegates(self, names: Iterable[str]) -> list[str]:
        """`names` and every capability their pipelines delegate to (`delegates_to`), transitively, in the
        order first met: a deployment that runs travel runs dining too, whose missions travel starts. One
        this registry does not have is left out: a delegation to it is refused with that reason."""
        available = set(self.available())
        selected: list[str] = []
        pending = list(names)
        while pending:
            name = pending.pop(0)
            if name not in selected:
                selected.append(name)
                pending += [d for d in self.load(name).pipeline.delegates_to if d in available]
        return selected

    def _plugins(self) -> Mapping[str, str]:
        return self._plugins_source()


def entry_point_plugins() -> dict[str, str]:
    """Capabilities installed as distributions: `[project.entry-points."missions.capabilities"]`."""
    return {point.name: point.value for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _from_module(module: ModuleType, name: str) -> Capability:
    """The capability a package defines: capability.toml plus its stage functions (or hooks), or
    a `CAPABILITY` built in code."""
    capability = getattr(module, "CAPABILITY", None)
    config_path = Path(module.__file__ or "").parent / CONFIG_FILE
    if capability is None and config_path.exists():
        config = load_config(config_path)
        stages = {value.name: value for value in vars(module).values() if isinstance(value, StageFunction)}
        try:
            capability = Capability.from_config(
                config,
                stages=stages,
                offline_policy=getattr(module, "offline_policy", None) or SchemaAnswers(config.offline),
                catalog=getattr(module, "CATALOG", None),
                prepare_context=getattr(module, "prepare_context", None),
                source=str(config_path),
                lock=load_lock(config_path.parent) if config.mcp_servers else None,
                folder=config_path.parent,
            )
        except (StageSignatureError, ValueError) as exc:
            raise CapabilityConfigError(str(exc)) from None
    if not isinstance(capability, Capability):
        raise UnknownCapability(f"{module.__name__} ({name}) defines neither CAPABILITY nor {CONFIG_FILE} + stages")
    return capability


@functools.cache
def default_registry() -> Registry:
    """The installed capabilities, for entry points that hold no runtime (the CLI, the CDK app)."""
    return Registry()


def load(name: str) -> Capability:
    return default_registry().load(name)


def installed() -> list[str]:
    return default_registry().installed()


def available() -> list[str]:
    return default_registry().available()


def load_all() -> list[Capability]:
    return default_registry().load_all()


def with_delegates(names: Iterable[str]) -> list[str]:
    return default_registry().with_delegates(names)
