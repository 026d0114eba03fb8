"""Agent configuration versions and usage records in memory (tests, the reference the DynamoDB adapters
conform to): the AgentStore and UsageStore ports."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from missions.core.cost.budget import day_of, dollars, units
from missions.core.cost.usage import UsageRecord, UsageTotal, total_key
from missions.core.errors import ConflictError
from missions.core.llm.agents import AgentState, AgentVersion, AuditEntry


class InMemoryAgentStore:
    def __init__(self) -> None:
        self._states: dict[tuple[str, str], AgentState] = {}
        self._versions: dict[tuple[str, str, int], AgentVersion] = {}
        self._audit: list[AuditEntry] = []
        self._lock = threading.Lock()
        self.reads = 0  # how many reads reached the store (tests of the cache count them)

    def states(self, capability: str) -> list[AgentState]:
        with self._lock:
            self.reads += 1
            found = [s for (c, _), s in self._states.items() if c == capability]
        return [s.model_copy(deep=True) for s in sorted(found, key=lambda s: s.agent)]

    def state(self, capability: str, agent: str) -> AgentState | None:
        with self._lock:
            self.reads += 1
            found = self._states.get((capability, agent))
        return found.model_copy(deep=True) if found else None

    def version(self, capability: str, agent: str, version: int) -> AgentVersion | None:
        with self._lock:
            self.reads += 1
            found = self._versions.get((capability, agent, version))
        return found.model_copy(deep=True) if found else None

    def versions(self, capability: str, agent: str) -> list[AgentVersion]:
        with self._lock:
            found = [v for (c, a, _), v in self._versions.items() if (c, a) == (capability, agent)]
        return [v.model_copy(deep=True) for v in sorted(found, key=lambda v: v.version)]

    def _check_revision(self, state: AgentState) -> None:
        current = self._states.get((state.capability, state.agent))
        if (current.revision if current else 0) != state.revision - 1:
            raise ConflictError(f"agent '{state.agent}' of '{state.capability}' changed meanwhile; read it again")

    def add_version(self, version: AgentVersion, state: AgentState, audit: AuditEntry) -> None:
        with self._lock:
            key = (version.capability, version.agent, version.version)
            if key in self._versions:
                raise ConflictError(f"version {version.version} of agent '{version.agent}' exists")
            self._check_revision(state)
            self._versions[key] = version.model_copy(deep=True)
            self._states[(state.capability, state.agent)] = state.model_copy(deep=True)
            self._audit.append(audit.model_copy(deep=True))

    def put_state(self, state: AgentState, audit: AuditEntry) -> None:
        with self._lock:
            self._check_revision(state)
            self._states[(state.capability, state.agent)] = state.model_copy(deep=True)
            self._audit.append(audit.model_copy(deep=True))

    def audit(self, capability: str, agent: str, limit: int = 100) -> list[AuditEntry]:
        with self._lock:
            found = [e for e in self._audit if (e.capability, e.agent) == (capability, agent)]
        return [e.model_copy(deep=True) for e in reversed(found)][:limit]


class InMemoryUsageStore:
    def __init__(self) -> None:
        self._records: list[UsageRecord] = []
        self._counted: list[UsageRecord] = []  # the calls in the totals: ended missions'
        self._spend: dict[tuple[str, str], int] = {}  # (user, day) -> cost units
        self._budgets: dict[str, float] = {}
        self._lock = threading.Lock()

    def record(self, record: UsageRecord, day: str | None = None) -> float | None:
        with self._lock:
            self._records.append(record.model_copy(deep=True))
            if not units(record.cost_usd):
                return None
            key = (record.user_id, day or day_of(record.at))
            self._spend[key] = self._spend.get(key, 0) + units(record.cost_usd)
            return dollars(self._spend[key])

    def spent(self, user_id: str, day: str) -> float:
        with self._lock:
            return dollars(self._spend.get((user_id, day), 0))

    def budget_of(self, user_id: str) -> float | None:
        with self._lock:
            return self._budgets.get(user_id)

    def set_budget(self, user_id: str, daily_budget_usd: float | None) -> None:
        with self._lock:
            if daily_budget_usd is None:
                self._budgets.pop(user_id, None)
            else:
                self._budgets[user_id] = daily_budget_usd

    def for_mission(self, mission_id: str) -> list[UsageRecord]:
        with self._lock:
            return [r.model_copy(deep=True) for r in self._records if r.mission_id == mission_id]

    def add_to_totals(self, records: Sequence[UsageRecord]) -> None:
        with self._lock:
            self._counted += [r.model_copy(deep=True) for r in records]

    def totals(self, capability: str, user_id: str | None = None) -> list[UsageTotal]:
        sums: dict[tuple[str, str, int | None, str], UsageTotal] = {}
        with self._lock:
            for record in self._counted:
                if record.capability != capability or (user_id is not None and record.user_id != user_id):
                    continue
                key = total_key(record)
                if key not in sums:
                    sums[key] = UsageTotal(
                        capability=record.capability, agent=record.agent, version=record.version, model=record.model
                    )
                sums[key].add(record)
        return [sums[key] for key in sorted(sums, key=lambda k: (k[1], k[2] or 0, k[3]))]
