"""Pipeline configuration: agents, routing rules, edge limits, bounds, and their validation.

A pipeline is a routing graph over agent stages. Every edge comes from a routing rule,
a `default_next` or an `error_next`; a target is a stage or a parallel group (`[[pipeline.parallel]]`:
its stages run side by side, then their common `default_next`, the join). Validation guarantees the
compiler can turn any accepted pipeline into a state machine that always terminates.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from missions.core.mission.envelope import Bounds, InterruptKind, Model

NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"


class PipelineError(ValueError):
    """A pipeline that cannot run; the message names the problem."""


class ToolAccess(StrEnum):
    NONE = "none"
    READ = "read"
    WRITE = "write"
    ALL = "all"


class RoutingRule(Model):
    """Route to `target` when the stage's output field `field` equals `value`.

    `field` may be dotted ("verdict.kind") to reach into nested outputs.
    """

    field: str = Field(min_length=1)
    value: Any
    target: str

    def matches(self, output: dict[str, Any]) -> bool:
        current: Any = output
        for part in self.field.split("."):
            if not isinstance(current, dict) or part not in current:
                return False
            current = current[part]
        return bool(current == self.value)


class EdgeLimit(Model):
    """At most `max_count` transitions from `from_stage` to `to_stage` per mission.

    When the limit would be passed the mission goes to `on_exceeded` (default: the final
    stage, ending the mission with terminal reason `edge_limit:<from>-><to>`).
    """

    from_stage: str
    to_stage: str
    max_count: int = Field(ge=0, le=10_000)
    on_exceeded: str | None = None
    # how many times a mission usually takes the edge: what the cost model (`missions cost`) predicts with
    typical_count: int | None = Field(None, ge=0, le=10_000)


class FanOut(Model):
    """Run the stage once per item of `envelope.work_items`, at most `max_concurrency` at a time."""

    max_concurrency: int = Field(4, ge=1, le=40)


class AgentConfig(Model):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""

    has_llm: bool = False
    has_tools: bool = False
    tool_access: ToolAccess = ToolAccess.NONE
    allowed_tools: list[str] | None = None

    model_role: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=200_000)

    routing_rules: list[RoutingRule] = Field(default_factory=list)
    default_next: str | None = None
    error_next: str | None = None

    counts_iteration: bool = False  # entering this stage starts a new iteration (bounded by max_iterations)
    # what users see the mission doing while this stage runs (seed 004's lifecycle); None: executing
    phase: Literal["planning", "executing", "reflecting"] | None = None
    fan_out: FanOut | None = None

    timeout_seconds: int = Field(60, ge=1, le=900)
    max_retries: int = Field(1, ge=0, le=10)
    memory_mb: int = Field(256, ge=128, le=10_240)
    sandbox: bool = False  # it runs analysis scripts (ctx.analyze): its function may invoke the sandbox
    # it keeps things in the user's long-term memory (ctx.remember): writes are embedded for search, so
    # its function may call the embedding model
    remembers: bool = False
    reserved_concurrency: int | None = Field(None, ge=1)

    @property
    def key(self) -> str:
        """Where the stage's output is kept in the envelope."""
        return self.name

    def targets(self) -> list[str]:
        found = [rule.target for rule in self.routing_rules]
        found += [t for t in (self.default_next, self.error_next) if t]
        return list(dict.fromkeys(found))


class ParallelGroup(Model):
    """Stages that run side by side (one Parallel state), entered by routing to the group's name.
    They share one `default_next`, the join, which sees all their outputs."""

    name: str = Field(pattern=NAME_PATTERN)
    stages: list[str] = Field(min_length=2)


class PipelineConfig(Model):
    name: str = Field(pattern=NAME_PATTERN)
    agents: list[AgentConfig] = Field(min_length=1)
    bounds: Bounds = Field(default_factory=Bounds)
    edge_limits: list[EdgeLimit] = Field(default_factory=list)
    parallel: list[ParallelGroup] = Field(default_factory=list)

    final_stage: str | None = None  # defaults to the last agent
    _positions: dict[str, int] = PrivateAttr(default_factory=dict)
    # the output limit of each model role's calls, for the stages that set none of their own (`[pipeline.max_tokens]`:
    # role -> tokens; a stage's role is its model_role, else its name); capped by the environment's ceiling
    max_tokens: dict[str, int] = Field(default_factory=dict)
    # where the mission goes on after an answer, by interrupt kind; a kind not listed resumes the stage that asked
    resume: dict[InterruptKind, str] = Field(default_factory=dict)
    # the capabilities a stage may hand part of its work to (`ctx.delegate`); the compiled machine waits
    # for a sub-mission only when this names one
    delegates_to: list[str] = Field(default_factory=list)

    interrupt_timeout_seconds: int = Field(7 * 24 * 3600, ge=1, le=365 * 24 * 3600)
    retry_interval_seconds: int = Field(1, ge=1, le=300)
    # stages an Express segment runs before it hands back to the mission's machine (missions.core.pipeline.compiler):
    # fewer costs more Standard transitions, more grows each segment's history
    segment_hops: int = Field(500, ge=1, le=2_000)

    @field_validator("agents")
    @classmethod
    def _unique_names(cls, agents: list[AgentConfig]) -> list[AgentConfig]:
        seen: set[str] = set()
        for agent in agents:
            if agent.name in seen:
                raise ValueError(f"duplicate stage name '{agent.name}'")
            seen.add(agent.name)
        return agents

    @model_validator(mode="after")
    def _validate_graph(self) -> PipelineConfig:
        validate_pipeline(self)
        return self

    # -- queries -------------------------------------------------------------------

    def awaited(self) -> list[InterruptKind]:
        """The kinds of interrupt the machine waits on: every question, and a delegation if it delegates."""
        return [kind for kind in InterruptKind if kind is not InterruptKind.DELEGATION or self.delegates_to]

    @property
    def start(self) -> str:
        return self.agents[0].name

    @property
    def final(self) -> str:
        return self.final_stage or self.agents[-1].name

    def agent(self, name: str) -> AgentConfig:
        # by an index of positions (a stage runs several lookups: a scan cost a long pipeline's every stage
        # its length), checked on use: the agents list is a plain list a caller may change
        private = self.__pydantic_private__  # (not pydantic's attribute lookup: a stage makes a dozen of these)
        assert private is not None
        at: int | None = private["_positions"].get(name)
        if at is None or at >= len(self.agents) or self.agents[at].name != name:
            private["_positions"] = {agent.name: i for i, agent in enumerate(self.agents)}
            at = private["_positions"].get(name)
        if at is None:
            raise KeyError(f"pipeline '{self.name}' has no stage '{name}'")
        return self.agents[at]

    def has_stage(self, name: str) -> bool:
        try:
            self.agent(name)
        except KeyError:
            return False
        return True

    def role_of(self, agent: AgentConfig) -> str:
        """The model role a stage's calls are made as (its model_role, else its name)."""
        return agent.model_role or agent.name

    def output_limit(self, agent: AgentConfig) -> int | None:
        """The stage's own output limit, else its role's default; None: the environment's ceiling."""
        return agent.max_tokens if agent.max_tokens is not None else self.max_tokens.get(self.role_of(agent))

    def stage_names(self) -> list[str]:
        return [agent.name for agent in self.agents]

    def edge_limit(self, source: str, target: str) -> EdgeLimit | None:
        for limit in self.edge_limits:
            if limit.from_stage == source and limit.to_stage == target:
                return limit
        return None

    def resume_stage(self, kind: InterruptKind) -> str | None:
        """The configured stage to resume at after an interrupt, or None for 'the stage that asked'."""
        return self.resume.get(kind)

    def parallel_groups(self) -> list[list[str]]:
        return [list(group.stages) for group in self.parallel]

    def group_of(self, name: str) -> list[str] | None:
        """The stages of the group called `name`, or of the group `name` belongs to; None for neither."""
        for group in self.parallel:
            if name == group.name or name in group.stages:
                return list(group.stages)
        return None

    def group_names(self) -> list[str]:
        return [group.name for group in self.parallel]

    def group_name_of(self, stage: str) -> str:
        """The name of the parallel group `stage` is a branch of (KeyError when it is none's)."""
        for group in self.parallel:
            if stage in group.stages:
                return group.name
        raise KeyError(f"pipeline '{self.name}': stage '{stage}' is in no parallel group")

    def asks_in_branches(self) -> bool:
        """Whether a question may come from a branch of a group or an item of a fan-out, whose answers run
        that group again (the machine routes to it after the answer)."""
        return bool(self.parallel) or any(agent.fan_out for agent in self.agents)

    def targets_of(self, stage: str) -> list[str]:
        """Every stage `stage` can hand over to: its routes and the reroutes of its edge limits."""
        found = self.agent(stage).targets()
        found += [lim.on_exceeded for lim in self.edge_limits if lim.from_stage == stage and lim.on_exceeded]
        return list(dict.fromkeys(found))

    def edges(self) -> list[tuple[str, str]]:
        return [(agent.name, target) for agent in self.agents for target in agent.targets()]


def validate_pipeline(pipeline: PipelineConfig) -> None:
    """Raise PipelineError naming the first problem found."""
    names = set(pipeline.stage_names())
    where = f"pipeline '{pipeline.name}'"

    if pipeline.final_stage is not None and pipeline.final_stage not in names:
        raise PipelineError(f"{where}: final_stage '{pipeline.final_stage}' is not a stage")
    final = pipeline.final

    groups = {group.name: group.stages for group in pipeline.parallel}
    members = {stage: name for name, stages in groups.items() for stage in stages}
    for agent in pipeline.agents:
        for target in agent.targets():
            if target in members and agent.name not in groups[members[target]]:
                raise PipelineError(
                    f"{where}: stage '{agent.name}' routes to '{target}', which runs in parallel group "
                    f"'{members[target]}': route to the group"
                )
            if target not in names and target not in groups:
                raise PipelineError(f"{where}: stage '{agent.name}' routes to unknown stage '{target}'")
        if agent.name != final and not agent.default_next:
            raise PipelineError(f"{where}: stage '{agent.name}' has no default_next (only the final stage may end)")
        if agent.name == final and agent.targets():
            raise PipelineError(f"{where}: the final stage '{final}' must not route anywhere")
        if agent.allowed_tools and not agent.has_tools:
            raise PipelineError(f"{where}: stage '{agent.name}' lists allowed_tools but has_tools is false")
        if agent.has_tools and agent.tool_access is ToolAccess.NONE:
            raise PipelineError(f"{where}: stage '{agent.name}' has tools but tool_access is 'none'")

    for limit in pipeline.edge_limits:
        for stage in (limit.from_stage, limit.to_stage, limit.on_exceeded):
            if stage is not None and stage not in names and stage not in groups:
                raise PipelineError(f"{where}: edge limit names unknown stage '{stage}'")
        if (limit.from_stage, limit.to_stage) not in set(pipeline.edges()):
            raise PipelineError(
                f"{where}: edge limit {limit.from_stage}->{limit.to_stage} is not an edge of the pipeline"
            )

    for kind, stage in pipeline.resume.items():
        if stage not in names:
            raise PipelineError(f"{where}: resume.{kind.value}: stage '{stage}' does not exist")

    _validate_output_limits(pipeline, where)
    _validate_parallel_groups(pipeline, where)
    _validate_reachability(pipeline, where)
    _validate_cycles(pipeline, where)


def _validate_output_limits(pipeline: PipelineConfig, where: str) -> None:
    """A role's output limit names a role some stage asks a model as (a typo would be ignored in silence)."""
    roles = {pipeline.role_of(agent) for agent in pipeline.agents if agent.has_llm}
    for role, tokens in pipeline.max_tokens.items():
        if role not in roles:
            raise PipelineError(
                f"{where}: max_tokens.{role}: no stage asks a model as '{role}' (roles: {sorted(roles)})"
            )
        if not 1 <= tokens <= 200_000:
            raise PipelineError(f"{where}: max_tokens.{role}: {tokens} is not between 1 and 200000")


def _validate_parallel_groups(pipeline: PipelineConfig, where: str) -> None:
    names = set(pipeline.stage_names())
    seen: dict[str, str] = {}
    for group in pipeline.parallel:
        if group.name in names:
            raise PipelineError(f"{where}: parallel group '{group.name}' has the name of a stage")
        for name in group.stages:
            if name not in names:
                raise PipelineError(f"{where}: parallel group '{group.name}' names unknown stage '{name}'")
            if name in seen:
                raise PipelineError(f"{where}: stage '{name}' is in parallel groups '{seen[name]}' and '{group.name}'")
            seen[name] = group.name
            agent = pipeline.agent(name)
            if agent.routing_rules or agent.error_next:
                raise PipelineError(
                    f"{where}: stage '{name}' runs in parallel group '{group.name}' and so cannot have routing rules"
                )
            if agent.fan_out:
                raise PipelineError(f"{where}: stage '{name}' cannot both fan out and run in parallel")
            if name in (pipeline.start, pipeline.final):
                raise PipelineError(f"{where}: the first and final stages cannot run in parallel group '{group.name}'")
        joins = {pipeline.agent(name).default_next for name in group.stages}
        join = joins.pop() if len(joins) == 1 else None
        if join is None or join in group.stages:
            raise PipelineError(
                f"{where}: the stages of parallel group '{group.name}' need one default_next after them (the join)"
            )
    if len({group.name for group in pipeline.parallel}) < len(pipeline.parallel):
        raise PipelineError(f"{where}: two parallel groups have the same name")


def _validate_reachability(pipeline: PipelineConfig, where: str) -> None:
    adjacency = _adjacency(pipeline)
    seen = {pipeline.start}
    frontier = [pipeline.start]
    while frontier:
        node = frontier.pop()
        for target in adjacency[node]:
            group = pipeline.group_of(target)
            for reached in group or [target]:
                if reached not in seen:
                    seen.add(reached)
                    frontier.append(reached)
    unreachable = [name for name in pipeline.stage_names() if name not in seen]
    if unreachable:
        raise PipelineError(f"{where}: unreachable stage(s) {unreachable} from '{pipeline.start}'")


def _validate_cycles(pipeline: PipelineConfig, where: str) -> None:
    """Every cycle must cross an edge limit or a stage that counts iterations."""
    limited = {
        (limit.from_stage, stage)
        for limit in pipeline.edge_limits
        for stage in (pipeline.group_of(limit.to_stage) or [limit.to_stage])
    }
    counting = {agent.name for agent in pipeline.agents if agent.counts_iteration}
    adjacency = {
        source: [t for t in targets if (source, t) not in limited and t not in counting]
        for source, targets in _adjacency(pipeline).items()
        if source not in counting
    }
    state: dict[str, int] = {}  # 1 = on stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in adjacency.get(node, []):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in adjacency:
        if node not in state and (cycle := visit(node)):
            path = " -> ".join(cycle)
            raise PipelineError(f"{where}: cycle {path} has no edge limit and no stage with counts_iteration")


def _adjacency(pipeline: PipelineConfig) -> dict[str, list[str]]:
    """Stage -> the stages it may hand over to (a group's name stands for its stages)."""
    return {
        name: [stage for target in pipeline.targets_of(name) for stage in (pipeline.group_of(target) or [target])]
        for name in pipeline.stage_names()
    }
