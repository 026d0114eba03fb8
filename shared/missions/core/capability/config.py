"""A capability's declarative half: one pydantic schema for `capabilities/<name>/capability.toml`.

The config holds what is data (pipeline, tools used, prompts, triggers, defaults, complexity
level); the package's `__init__.py` holds what is code (stage hooks, tools, offline policy).
The same schema is validated when the runtime loads a capability and when the CDK app
synthesizes it, and every error names the file and the field.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from missions.core.capability.mcp import McpServerConfig
from missions.core.mission.requests import MultitaskStrategy
from missions.core.pipeline.config import NAME_PATTERN, PipelineConfig
from missions.core.triggers.declared import Triggers

CONFIG_FILE = "capability.toml"


class CapabilityConfigError(ValueError):
    """A capability's config is invalid; the message names the file and the field."""


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    context: dict[str, Any] = Field(default_factory=dict)  # merged under each mission's own context


class CapabilityConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1)
    complexity: Literal[1, 2, 3]  # 1 simple, 2 coordinated, 3 complex (seed 004)
    keywords: list[str] = Field(default_factory=list)  # goals naming none pick a capability by these
    example_goal: str = ""
    tools: list[str] = Field(default_factory=list)  # tool ids the stages use; each must be in the catalog
    auto_approve_tools: list[str] = Field(default_factory=list)
    # MCP servers whose allow-listed tools the stages may use, as `<server>__<tool>` (missions.core.capability.mcp)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list, max_length=20)
    # whether missions read a code repository: the runtime resolves and checks it (never the capability),
    # and the stack gives the stages that use tools read access to snapshots and room to unpack them
    repository: Literal["none", "optional", "required"] = "none"
    # what a request does while a mission of its conversation (or concurrency key) is active: enqueue (the
    # default), reject, interrupt or rollback (missions.core.mission.requests.MultitaskStrategy); a request
    # may say otherwise
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    prompts: dict[str, str] = Field(default_factory=dict)  # stage -> system prompt
    # models a mission of this capability may name (within the environment's allowed_models); none: the
    # environment's list
    models: list[str] = Field(default_factory=list, max_length=50)
    defaults: Defaults = Field(default_factory=Defaults)
    triggers: Triggers = Field(default_factory=Triggers)
    # the offline model's canned answers: stage -> field -> value (missions.core.capability.offline)
    offline: dict[str, dict[str, Any]] = Field(default_factory=dict)
    pipeline: PipelineConfig  # `[bounds]` at the top level of the file is the pipeline's bounds

    @model_validator(mode="before")
    @classmethod
    def _pipeline_takes_the_capability_name_and_bounds(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("pipeline"), dict):
            data = dict(data)
            pipeline = dict(data["pipeline"])
            pipeline.setdefault("name", data.get("name"))
            if "bounds" in data:
                pipeline.setdefault("bounds", data.pop("bounds"))
            data["pipeline"] = pipeline
        return data

    @model_validator(mode="after")
    def _references_exist(self) -> CapabilityConfig:
        stages = {agent.name: agent for agent in self.pipeline.agents}
        servers = [server.name for server in self.mcp_servers]
        if len(set(servers)) != len(servers):
            raise ValueError(f"mcp_servers: a server is named twice ({', '.join(servers)})")
        known = set(self.tools) | {tool for server in self.mcp_servers for tool in server.tool_ids()}
        for stage in self.prompts:
            if stage not in stages:
                raise ValueError(f"prompts.{stage}: no such stage (stages: {', '.join(stages)})")
            if not stages[stage].has_llm:
                raise ValueError(f"prompts.{stage}: the stage has no LLM (set has_llm = true)")
        for agent in self.pipeline.agents:
            for tool in agent.allowed_tools or []:
                if tool not in known:
                    raise ValueError(
                        f"pipeline.agents.{agent.name}.allowed_tools: '{tool}' is not in tools or an MCP server's tools"
                    )
        for stage in self.offline:
            if stage not in stages:
                raise ValueError(f"offline.{stage}: no such stage (stages: {', '.join(stages)})")
        for tool in self.auto_approve_tools:
            if tool not in known:
                raise ValueError(f"auto_approve_tools: '{tool}' is not in tools or an MCP server's tools")
        return self


def load_config(path: Path) -> CapabilityConfig:
    """Read and validate one capability.toml."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CapabilityConfigError(f"{path}: not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise CapabilityConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        config = CapabilityConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(_describe(error, raw) for error in exc.errors())
        raise CapabilityConfigError(f"{path}: {problems}") from None
    if config.name != path.parent.name:
        raise CapabilityConfigError(f"{path}: name: '{config.name}' must match its folder '{path.parent.name}'")
    return config


def _describe(error: Any, raw: dict[str, Any]) -> str:
    """`pipeline.agents.planner.timeout_seconds: ...` rather than `pipeline.agents.2.timeout_seconds`."""
    location: list[str] = []
    node: Any = raw
    for part in error["loc"]:
        if isinstance(part, int) and isinstance(node, list) and part < len(node):
            item = node[part]
            location.append(str(item.get("name", part)) if isinstance(item, dict) else str(part))
            node = item
        else:
            location.append(str(part))
            node = node.get(part) if isinstance(node, dict) else None
    where = ".".join(location)
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
