"""Where agent configuration versions (missions.core.llm.agents) and per-call usage records live."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from missions.core.cost.usage import UsageRecord, UsageTotal
from missions.core.llm.agents import AgentState, AgentVersion, AuditEntry


class AgentStore(Protocol):
    """Versions, the state (active version, enabled) and the audit trail of each agent of a capability.

    Every write is one atomic step that also appends its audit entry; a write names the state revision it
    read, and ConflictError means another write came first (nothing was changed)."""

    def states(self, capability: str) -> list[AgentState]:
        """Every stored agent state of the capability (one read: new missions pin them)."""

    def state(self, capability: str, agent: str) -> AgentState | None: ...

    def version(self, capability: str, agent: str, version: int) -> AgentVersion | None: ...

    def versions(self, capability: str, agent: str) -> list[AgentVersion]:
        """Oldest first."""

    def add_version(self, version: AgentVersion, state: AgentState, audit: AuditEntry) -> None:
        """Store a new version (ConflictError if that number exists) with the agent's state after it
        (`state.revision - 1` is the revision it replaces; 0: the agent had none)."""

    def put_state(self, state: AgentState, audit: AuditEntry) -> None:
        """Replace the state whose revision is `state.revision - 1` (ConflictError otherwise)."""

    def audit(self, capability: str, agent: str, limit: int = 100) -> list[AuditEntry]:
        """Newest first."""


class UsageStore(Protocol):
    """Every model call (missions.core.cost.usage): per mission, and totals per user, capability, agent,
    version and model."""

    def record(self, record: UsageRecord, day: str | None = None) -> float | None:
        """Keep the call, and its dollars in its user's spend of `day` (default: the UTC day of the call;
        missions.core.cost.budget); returns that day's spend after it (None for a call that cost nothing: the
        spend is neither written nor read). Its totals wait for its mission's end (`add_to_totals`)."""

    def add_to_totals(self, records: Sequence[UsageRecord]) -> None:
        """Count these calls (an ended mission's, once: by whoever wrote its end) in their users' totals and
        everyone's: one write per (capability, agent, version, model) and owner, however many calls."""

    def spent(self, user_id: str, day: str) -> float:
        """What the user's model calls of that UTC day cost (0.0 when none was made)."""

    def budget_of(self, user_id: str) -> float | None:
        """The user's own daily budget in dollars, set by an operator (None: the environment's default)."""

    def set_budget(self, user_id: str, daily_budget_usd: float | None) -> None:
        """Set (or, with None, drop) the user's own daily budget."""

    def for_mission(self, mission_id: str) -> list[UsageRecord]:
        """The mission's calls, in the order they were made."""

    def totals(self, capability: str, user_id: str | None = None) -> list[UsageTotal]:
        """The capability's totals per (agent, version, model): the user's, or everyone's (None)."""


def count_ended_mission(usage: UsageStore, mission_id: str) -> None:
    """An ended mission's model calls into the usage totals: called once, by the one writer of its end (the
    final stage, or the cancel or the execution's end that ended it)."""
    usage.add_to_totals(usage.for_mission(mission_id))
