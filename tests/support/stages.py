"""Typed test capabilities: small pipelines whose stages are typed stage functions.

Tests write stages the way capabilities do (missions.core.capability.stages): a function named after its
stage, reading what it needs by parameter and returning a pydantic model. `typed_capability`
builds a Capability around them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from missions.core.capability.offline import SchemaAnswers
from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.stages import StageFunction
from missions.core.llm.provider import OfflinePolicy
from missions.core.pipeline.config import AgentConfig, PipelineConfig


class Out(BaseModel):
    """Any JSON object: the output of a test stage that only needs "some dict" (routing reads it)."""

    model_config = ConfigDict(extra="allow")


class Note(BaseModel):
    """The structured output of test LLM stages."""

    text: str = ""
    decision: str | None = None


class Answer(BaseModel):
    """A final stage's output: the mission's result reads `answer`."""

    answer: str


def stage_named(name: str, func: Callable[..., BaseModel]) -> StageFunction:
    """`func` as the stage function of stage `name`: one body for stages of several pipelines, or for
    stages whose names are generated. Its parameters are checked as any stage function's are."""
    return dataclasses.replace(stage(func), name=name)


def answering(name: str = "final", text: str = "done") -> StageFunction:
    """A final stage answering `text`."""

    def final() -> Answer:
        return Answer(answer=text)

    return stage_named(name, final)


def thinking(name: str) -> StageFunction:
    """An LLM stage whose output is its model's Note."""

    def think(ctx: Ctx) -> Note:
        return ctx.think(Note)

    return stage_named(name, think)


def functions_by_name(*functions: StageFunction) -> dict[str, StageFunction]:
    """The stage functions the way Capability takes them (`stages=`): by stage."""
    named: dict[str, StageFunction] = {}
    for function in functions:
        assert function.name not in named, f"two functions for stage '{function.name}'"
        named[function.name] = function
    return named


def stage_functions(capability: Capability) -> dict[str, StageFunction]:
    """The typed stage functions a capability holds, by stage."""
    return dict(capability.stages)


def typed_capability(
    name: str,
    agents: PipelineConfig | Iterable[AgentConfig | Mapping[str, Any]],
    *functions: StageFunction,
    offline_policy: OfflinePolicy | None = None,
    pipeline: Mapping[str, Any] | None = None,
    prompts: Mapping[str, str] | None = None,
    description: str = "",
    **fields: Any,
) -> Capability:
    """A capability of these stage functions. `agents` is a pipeline, or its agents (then `pipeline`
    holds its other PipelineConfig fields); `fields` are other Capability fields (catalog, triggers,
    auto_approve_tools, ...). Every LLM stage gets a prompt unless `prompts` says otherwise, and the
    model is the generic offline one unless `offline_policy` is given."""
    if isinstance(agents, PipelineConfig):
        assert not pipeline, "pipeline fields go into the PipelineConfig given"
        config = agents
    else:
        config = PipelineConfig(
            name=name,
            agents=[a if isinstance(a, AgentConfig) else AgentConfig(**a) for a in agents],
            **dict(pipeline or {}),
        )
    if prompts is None:
        prompts = {a.name: f"You are the {a.name} stage." for a in config.agents if a.has_llm}
    return Capability(
        name=name,
        description=description or f"test capability '{name}'",
        pipeline=config,
        stages=functions_by_name(*functions),
        offline_policy=offline_policy or SchemaAnswers(),
        prompts=dict(prompts),
        **fields,
    )
