"""Agents as data: the one owner of agent configuration versions (missions.core.llm.agents).

New missions pin the active versions (`pins`), read through a cache each warm function keeps for
`cache_seconds`: a promotion or rollback reaches every new mission within that time, with no deploy, and
at once in the process that made it (its cache is dropped). Stages read the version their mission pinned
(`pinned`): versions never change once stored, so those are cached for the life of the process.

Each deploy stores what capability.toml ships (`deploy`, run by the stack's deploy-time custom resource,
missions.service.deployment): version 1 the first time, and a new version whenever a later deploy
ships another configuration, promoted unless an operator's own version is active. A version once stored
never changes, so a mission pinned to version 1 runs version 1 as it was, whatever is deployed later.
Before any deploy stored it (the emulation, whose tables live only as long as the process that ships one
capability.toml; unit tests), version 1 is read from capability.toml.

Every write goes through here: checked against the capability (`missions.core.llm.agents.check`), stored
with its audit entry in one step, refused (ConflictError) when another write came first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability
from missions.core.cost.pricing import Price, price_of
from missions.core.errors import AgentDisabled, ConflictError, MissionRequestError, NotFound
from missions.core.llm import agents as rules
from missions.core.llm.agents import AgentSettings, AgentState, AgentVersion, AuditEntry
from missions.ports.agents import AgentStore

DEPLOY_ATTEMPTS = 3  # a deploy racing another write to the same agent reads it again
PINNED_CACHE_LIMIT = 4096  # versions a process keeps (immutable: only memory bounds it)


class AgentConfigs:
    def __init__(
        self,
        store: AgentStore,
        capabilities: registry.Registry,
        *,
        prices: Mapping[str, Price] | None = None,
        environment_models: list[str] | None = None,
        cache_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._store = store
        self._capabilities = capabilities
        self._prices = dict(prices or {})
        self._environment_models = list(environment_models or [])
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._active: dict[str, tuple[float, dict[str, AgentState]]] = {}
        self._pinned: dict[tuple[str, str, int], AgentVersion] = {}
        self._lock = threading.Lock()

    # -- what missions run -------------------------------------------------------------------------

    def pins(self, capability: str) -> dict[str, int]:
        """The versions a mission of the capability starting now runs, by agent; AgentDisabled when an
        operator disabled one of its agents."""
        found = self._capability(capability)
        states = self._states(found.name)
        disabled = sorted(name for name, state in states.items() if not state.enabled)
        if disabled:
            raise AgentDisabled(
                f"{found.name}: agent(s) {', '.join(disabled)} disabled by an operator; no new mission starts"
            )
        return {agent.name: states[agent.name].active if agent.name in states else 1 for agent in found.pipeline.agents}

    def pinned(self, capability: str, agent: str, version: int) -> AgentVersion:
        """The version a stage runs (its mission pinned it): read once per process."""
        key = (capability, agent, version)
        cached = self._pinned.get(key)
        if cached is not None:
            return cached
        found = self._store.version(capability, agent, version)
        if found is None:
            if version != 1:
                raise NotFound(f"no version {version} of agent '{agent}' of '{capability}'")
            found = rules.seed(self._capability(capability), rules.agent_of(self._capability(capability), agent))
        with self._lock:
            if len(self._pinned) >= PINNED_CACHE_LIMIT:
                self._pinned.clear()
            self._pinned[key] = found
        return found

    def check_model(self, capability: str, model: str) -> str:
        """The model a mission names, if it may (MissionRequestError otherwise: nothing is started)."""
        allowed = self.models(capability)
        if model not in allowed:
            raise MissionRequestError(f"model '{model}' is not one {capability} may use here (allowed: {allowed})")
        if price_of(model, self._prices) is None:  # the settings refuse such lists; kept for the budget's sake
            raise MissionRequestError(f"model '{model}' has no price")
        return model

    def models(self, capability: str) -> list[str]:
        return rules.allowed_models(self._capability(capability).models, self._environment_models)

    def _states(self, capability: str) -> dict[str, AgentState]:
        now = self._clock()
        cached = self._active.get(capability)
        if cached is not None and now < cached[0]:
            return cached[1]
        states = {state.agent: state for state in self._store.states(capability)}
        self._active[capability] = (now + self._cache_seconds, states)
        return states

    def forget(self, capability: str) -> None:
        """Drop the cached active versions (after a write here: this process sees it at once)."""
        self._active.pop(capability, None)

    # -- what operators read -----------------------------------------------------------------------

    def overview(self, capability: str) -> list[dict[str, Any]]:
        found = self._capability(capability)
        stored = {state.agent: state for state in self._store.states(found.name)}
        return [
            self._view(found, agent.name, stored.get(agent.name) or self._implicit(found.name, agent.name))
            for agent in found.pipeline.agents
        ]

    def agent(self, capability: str, agent: str) -> dict[str, Any]:
        found = self._capability(capability)
        rules.agent_of(found, agent)
        state = self._state(found.name, agent)
        versions = self._store.versions(found.name, agent) or [rules.seed(found, rules.agent_of(found, agent))]
        return {**self._view(found, agent, state), "versions": [v.model_dump(mode="json") for v in versions]}

    def version(self, capability: str, agent: str, version: int) -> AgentVersion:
        found = self._capability(capability)
        rules.agent_of(found, agent)
        stored = self._store.version(found.name, agent, version)
        if stored is None:
            if version != 1:
                raise NotFound(f"no version {version} of agent '{agent}' of '{capability}'")
            return rules.seed(found, rules.agent_of(found, agent))
        return stored

    def diff(self, capability: str, agent: str, older: int, newer: int) -> dict[str, dict[str, Any]]:
        return rules.diff(self.version(capability, agent, older), self.version(capability, agent, newer))

    def audit(self, capability: str, agent: str, limit: int = 100) -> list[AuditEntry]:
        rules.agent_of(self._capability(capability), agent)
        return self._store.audit(capability, agent, limit)

    # -- what operators change ---------------------------------------------------------------------

    def deploy(self, capability: str, actor: str = "deploy") -> list[dict[str, Any]]:
        """Store what capability.toml ships now, agent by agent (see `rules.shipped_again`); what happened
        to each: "seeded" (version 1), "unchanged", "promoted" or "stored" (an operator's version stays
        active). Running it again with the same capability.toml changes nothing."""
        found = self._capability(capability)
        report = []
        for definition in found.pipeline.agents:
            for attempt in range(DEPLOY_ATTEMPTS):  # another write came first (a retried deploy): read again
                try:
                    state, seeded = self._materialize(found, definition.name)
                    outcome, version = ("seeded", 1) if seeded else self._ship(found, definition.name, state, actor)
                    break
                except ConflictError:
                    if attempt == DEPLOY_ATTEMPTS - 1:
                        raise
            report.append({"agent": definition.name, "outcome": outcome, "version": version})
        self.forget(found.name)
        return report

    def _ship(self, capability: Capability, agent: str, state: AgentState, actor: str) -> tuple[str, int]:
        shipped = rules.seed(capability, rules.agent_of(capability, agent), state.latest + 1, actor)
        versions = self._store.versions(capability.name, agent)
        last = rules.last_shipped(versions)
        if last is not None and last.settings() == shipped.settings():
            return "unchanged", last.version
        active = next((version for version in versions if version.version == state.active), None)
        promote = active is not None and active.source == rules.SEED_SOURCE
        audit = AuditEntry(
            capability=capability.name,
            agent=agent,
            actor=actor,
            action="deploy",
            detail={
                "version": shipped.version,
                "promoted": promote,
                "active": shipped.version if promote else state.active,
            },
        )
        self._store.add_version(shipped, rules.shipped_again(state, shipped.version, promote, actor), audit)
        return ("promoted" if promote else "stored"), shipped.version

    def create(
        self,
        capability: str,
        agent: str,
        changes: AgentSettings,
        actor: str,
        *,
        based_on: int | None = None,
        note: str = "",
    ) -> AgentVersion:
        """A new version: `based_on` (default: the active one) with the fields `changes` sets (an explicit
        null: the stage's own setting). Checked against the capability; not active until promoted."""
        found = self._capability(capability)
        definition = rules.agent_of(found, agent)
        state, _ = self._materialize(found, agent)
        base = self.version(found.name, agent, based_on if based_on is not None else state.active)
        settings = AgentSettings.model_validate(
            {**base.settings(), **changes.model_dump(include=changes.model_fields_set)}
        )
        rules.check(found, definition, settings, self._prices)
        source = "api" if changes.model_fields_set else f"clone of {base.version}"
        return self._add(found.name, agent, state, settings, actor, note, source, based_on=base.version)

    def clone(self, capability: str, agent: str, version: int, actor: str, note: str = "") -> AgentVersion:
        """A new version with exactly the settings of `version` (to change from there, or to promote again)."""
        return self.create(capability, agent, AgentSettings(), actor, based_on=version, note=note)

    def promote(self, capability: str, agent: str, version: int, actor: str) -> AgentState:
        found = self._capability(capability)
        rules.agent_of(found, agent)
        state, _ = self._materialize(found, agent)
        changed = rules.promoted(state, version, actor)
        return self._put(changed, actor, "promote", {"from": state.active, "to": version})

    def rollback(self, capability: str, agent: str, actor: str) -> AgentState:
        found = self._capability(capability)
        rules.agent_of(found, agent)
        state, _ = self._materialize(found, agent)
        changed = rules.rolled_back(state, actor)
        return self._put(changed, actor, "rollback", {"from": state.active, "to": changed.active})

    def set_enabled(self, capability: str, agent: str, enabled: bool, actor: str) -> AgentState:
        found = self._capability(capability)
        rules.agent_of(found, agent)
        state, _ = self._materialize(found, agent)
        changed = rules.with_enabled(state, enabled, actor)
        return self._put(changed, actor, "enable" if enabled else "disable", {})

    # -- internals ---------------------------------------------------------------------------------

    def _capability(self, name: str) -> Capability:
        try:
            return self._capabilities.load(name)
        except registry.UnknownCapability as exc:
            raise NotFound(str(exc)) from None

    @staticmethod
    def _implicit(capability: str, agent: str) -> AgentState:
        """An agent nobody wrote yet: version 1 (capability.toml) active."""
        return AgentState(capability=capability, agent=agent)

    def _state(self, capability: str, agent: str) -> AgentState:
        return self._store.state(capability, agent) or self._implicit(capability, agent)

    def _materialize(self, capability: Capability, agent: str) -> tuple[AgentState, bool]:
        """The agent's stored state, storing version 1 first when it has none (True: this call stored it)."""
        state = self._store.state(capability.name, agent)
        if state is not None:
            return state, False
        first = rules.seed(capability, rules.agent_of(capability, agent))
        seeded = AgentState(capability=capability.name, agent=agent, revision=1)
        audit = AuditEntry(capability=capability.name, agent=agent, actor=rules.SEED_SOURCE, action="seed")
        try:
            self._store.add_version(first, seeded, audit)
        except ConflictError:  # another process seeded it first: theirs is the same capability.toml
            stored = self._store.state(capability.name, agent)
            assert stored is not None
            return stored, False
        return seeded, True

    def _add(
        self,
        capability: str,
        agent: str,
        state: AgentState,
        settings: AgentSettings,
        actor: str,
        note: str,
        source: str,
        *,
        based_on: int,
    ) -> AgentVersion:
        number = state.latest + 1
        version = AgentVersion(
            **settings.model_dump(),
            capability=capability,
            agent=agent,
            version=number,
            created_by=actor,
            note=note,
            source=source,
        )
        action: rules.AuditAction = "create" if source == "api" else "clone"
        audit = AuditEntry(
            capability=capability,
            agent=agent,
            actor=actor,
            action=action,
            detail={"version": number, "based_on": based_on, **({"note": note} if note else {})},
        )
        self._store.add_version(version, rules.with_version(state, number, actor), audit)
        self.forget(capability)
        return version

    def _put(self, state: AgentState, actor: str, action: rules.AuditAction, detail: dict[str, Any]) -> AgentState:
        audit = AuditEntry(capability=state.capability, agent=state.agent, actor=actor, action=action, detail=detail)
        self._store.put_state(state, audit)
        self.forget(state.capability)
        return state

    def _view(self, capability: Capability, agent: str, state: AgentState) -> dict[str, Any]:
        definition = rules.agent_of(capability, agent)
        return {
            "capability": capability.name,
            "agent": agent,
            "active": state.active,
            "latest": state.latest,
            "enabled": state.enabled,
            "history": list(state.history),
            "asks_model": definition.has_llm,
            "declared_tools": rules.declared_tools(capability, definition),
            "updated_by": state.updated_by,
            "updated_at": state.updated_at,
        }


__all__ = ["AgentConfigs"]
