"""What every part of the stage runner shares: the services it is given, what one invocation measures, and
the bounded preview its events and results show."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from missions.core.capability.registry import Capability
from missions.core.cost.usage import UsageRecord
from missions.core.llm.agents import AgentVersion
from missions.core.llm.provider import LLMProvider
from missions.core.mission.envelope import Counters
from missions.core.mission.offload import EnvelopeCodec
from missions.core.mission.refs import Workspaces
from missions.ports.agents import UsageStore
from missions.ports.artifacts import ArtifactStore
from missions.ports.checkpoints import CheckpointStore
from missions.ports.events import EventStore
from missions.ports.interrupts import InterruptStore
from missions.ports.memory import LongTermMemory
from missions.ports.missions import MissionStore
from missions.ports.sandbox import Sandbox
from missions.service.flow.budgets import Budgets

if TYPE_CHECKING:
    from missions.core.capability.mcp import McpGateway
    from missions.service.conversations import ConversationService

MODES = ("run", "join", "branch", "item", "finalize")
AWAIT_PREFIX = "await:"

Emit = Callable[..., None]  # emit(event_type, /, **payload): an event of the stage in flight


@dataclass
class StageTimings:
    """Where a stage's time went; the overhead is what the runtime itself costs, and `commit_ms` the part
    of it that commits what the stage did (its envelope encoded, its events, its checkpoint, the mission's
    progress)."""

    total_ms: float = 0.0
    llm_ms: float = 0.0
    tools_ms: float = 0.0
    commit_ms: float = 0.0

    @property
    def overhead_ms(self) -> float:
        return self.total_ms - self.llm_ms - self.tools_ms


@dataclass(frozen=True)
class StageReport:
    """What one invocation did, for metrics: counters before and after, and how the mission ended
    when this stage was its last (None otherwise)."""

    capability: str
    stage: str
    before: Counters
    after: Counters
    ended: str | None = None


@dataclass
class StageServices:
    """Everything a stage touches outside itself; injected so tests can use fakes."""

    checkpoints: CheckpointStore
    events: EventStore
    codec: EnvelopeCodec
    llm: Callable[[Capability], LLMProvider]
    missions: MissionStore | None = None
    interrupts: InterruptStore | None = None  # to expire interrupts that ended unanswered
    artifacts: ArtifactStore | None = None  # versioned documents stages write for the user
    workspaces: Workspaces | None = None  # repositories stages read (capabilities with `repository`)
    secrets: Callable[[str], str] | None = None  # secrets by name, for tools that connect to a service
    mcp: McpGateway | None = None  # how the capability's MCP tools reach their servers (missions.service.mcp_tools)
    memory: Callable[[], LongTermMemory] | None = None  # the users' long-term memory, made when a stage remembers
    sandbox: Callable[[], Sandbox] | None = None  # where analysis scripts run, made when a stage runs one
    # where a mission that is a turn of a conversation folds its result, made when such a mission ends
    conversations: Callable[[], ConversationService] | None = None
    # the configuration version a mission pinned for an agent: (capability, agent, version) -> it
    agents: Callable[[str, str, int], AgentVersion] | None = None
    usage: Callable[[], UsageStore] | None = None  # where every model call is recorded
    # users' daily budgets: a stage whose calls bring its user's day to theirs ends its mission (user_budget)
    budgets: Callable[[], Budgets] | None = None
    # how often a stage asks its model again after an invalid answer (settings.model_repairs)
    repairs: int = 2
    clock: Callable[[], float] = time.perf_counter
    on_timings: Callable[[str, StageTimings], None] | None = None  # benchmarks, metrics


@dataclass
class Invocation:
    """What the runner's invocation in flight measures and learns as it goes; the runtime reads it after
    (metrics, and whether an Express segment hands back). Begun afresh by each invocation: the timings
    handed to `on_timings` earlier are never changed afterwards."""

    deadline: float | None = None  # time.monotonic() when the Lambda runs out: model calls never run past it
    timings: StageTimings = field(default_factory=StageTimings)
    usage: list[UsageRecord] = field(default_factory=list)  # its model calls
    report: StageReport | None = None
    # the stage found its mission ended (cancelled) when it read its record after its checkpoint
    mission_ended_meanwhile: bool = False
    # the stage found its user paused the mission: the mission's machine waits after it
    pausing: bool = False
    spent_today: float | None = None  # the user's spend that day, as the last of its paid calls left it

    def begin(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.timings = StageTimings()
        self.usage = []
        self.report = None
        self.mission_ended_meanwhile = False
        self.pausing = False
        self.spent_today = None


def preview(value: Any, limit: int = 300) -> Any:
    """A bounded copy for events and results: long strings are cut, nothing else changes."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, dict):
        return {k: preview(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [preview(v, limit) for v in value[:50]]
    return value
