"""Which configuration a stage runs: the agent version its mission pinned (missions.core.llm.agents), else the
capability as shipped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from missions.core.capability.registry import Capability
from missions.core.llm import agents as agents_rules
from missions.core.llm.agents import AgentVersion
from missions.core.mission.envelope import Envelope
from missions.core.pipeline.config import AgentConfig
from missions.service.runner._base import StageServices


@dataclass(eq=False)
class PinnedAgents:
    _capability: Capability
    _services: StageServices

    def configured(self, envelope: Envelope, stage: str) -> tuple[AgentConfig, str | None, AgentVersion | None]:
        """The stage's agent config, its rendered prompt and the version they come from."""
        capability = self._capability
        agent = capability.pipeline.agent(stage)
        version = self.version(envelope, stage)
        if version is None:
            return agent, capability.prompts.get(agent.name), None
        configured = agents_rules.applied(agent, version)
        template = version.prompt if version.prompt is not None else capability.prompts.get(agent.name)
        prompt = agents_rules.render(template, agents_rules.variables_for(capability, configured)) if template else None
        return configured, prompt, version

    def version(self, envelope: Envelope, stage: str) -> AgentVersion | None:
        number = envelope.agents.get(stage)
        agents = self._services.agents  # (capability, agent, version) -> that version; None: none kept here
        if number is None or agents is None:
            return None
        return agents(self._capability.name, stage, number)


def pinned(version: AgentVersion | None, envelope: Envelope) -> dict[str, Any]:
    """What an agent.started event says about the configuration the stage runs."""
    shown: dict[str, Any] = {}
    if version is not None:
        shown["config_version"] = version.version
    if envelope.model is not None:
        shown["model"] = envelope.model
    return shown
