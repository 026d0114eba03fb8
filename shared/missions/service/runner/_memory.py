"""The user's long-term memory as a stage function sees it (`ctx.memory`): namespaces named after the
capability, and writes only from a stage that declares `remembers = true`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from missions.core.capability.registry import StageDefinitionError
from missions.core.pipeline.config import AgentConfig
from missions.ports.memory import LongTermMemory


class UserMemory:
    def __init__(self, memory: Callable[[], LongTermMemory], user_id: str, capability: str, agent: AgentConfig):
        self._memory, self.user_id, self.capability, self.agent = memory, user_id, capability, agent

    @property
    def memory(self) -> LongTermMemory:
        return self._memory()

    def _namespace(self, namespace: str) -> tuple[str, ...]:
        if namespace != self.capability and not namespace.startswith(f"{self.capability}."):
            raise StageDefinitionError(
                f"capability '{self.capability}' may only write memory namespaces named after it, not '{namespace}'"
            )
        return (namespace,)

    def put(self, namespace: str, key: str, value: Any) -> None:
        if not self.agent.remembers:  # in AWS its role could not embed what it writes
            raise StageDefinitionError(f"stage '{self.agent.name}' remembers but does not declare remembers = true")
        self.memory.put(self.user_id, self._namespace(namespace), key, value)

    def get(self, namespace: str, key: str | None) -> Any:
        if key is None:
            return {item.key: item.value for item in self.memory.list(self.user_id, self._namespace(namespace), 1000)}
        item = self.memory.get(self.user_id, self._namespace(namespace), key)
        return item.value if item is not None else None
