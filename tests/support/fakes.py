"""A runtime on in-memory adapters, for unit tests of the API and services without moto.

`memory_runtime()` is the composition root with every port bound to its reference in-memory adapter
and Step Functions played by `FakeExecutions`; the services on top are the real ones.
"""

from __future__ import annotations

import json
from typing import Any

from missions.adapters.memory.agents import InMemoryAgentStore, InMemoryUsageStore
from missions.adapters.memory.artifacts import MemoryArtifactStore
from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.dispatch import InMemoryDispatchStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.flow import InMemoryFlowRecords
from missions.adapters.memory.idempotency import MemoryIdempotencyLayer
from missions.adapters.memory.interrupts import MemoryInterruptStore
from missions.adapters.memory.learnings import InMemoryLearningsStore
from missions.adapters.memory.longterm import InMemoryLongTermMemory
from missions.adapters.memory.missions import InMemoryMissionsByCapability, MemoryMissionStore
from missions.adapters.memory.repositories import MemoryRepositoryStore, MemorySnapshotStore
from missions.adapters.memory.webhooks import InMemoryDeliveryStore, StaticWebhookSources
from missions.app.runtime import Runtime
from missions.core.capability import registry as registry
from missions.core.errors import TaskGone
from missions.core.llm.provider import LLMProvider
from missions.core.mission.offload import EnvelopeCodec
from missions.core.settings import RuntimeSettings
from missions.ports.checkpoints import Checkpoint

ACCOUNT_ARN = "arn:aws:states:us-east-1:123456789012"


class FakeExecutions:
    """Step Functions as the runtime sees it: starts, stops and answers are recorded. A start also
    leaves the checkpoint its first stage would write (with `next_stage`), so a mission can be forked."""

    def __init__(self, checkpoints: MemoryCheckpointStore, codec: EnvelopeCodec, next_stage: str | None = None):
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.answered: list[tuple[str, dict[str, Any]]] = []
        self.gone_tokens: set[str] = set()
        self._checkpoints, self._codec, self._next_stage = checkpoints, codec, next_stage

    def start(self, state_machine_arn: str, name: str, input: str) -> str:
        arn = f"{ACCOUNT_ARN}:execution:{state_machine_arn.rsplit(':', 1)[-1]}:{name}"
        if name in self.started:  # idempotent by name, as Step Functions is for a retried start
            return arn
        self.started.append(name)
        envelope = self._codec.decode(json.loads(input)["envelope"])
        envelope.next_stage = self._next_stage or registry.load(envelope.capability).pipeline.agents[0].name
        checkpoint = Checkpoint(
            thread_id=name,
            checkpoint_id="0001-start",
            parent_id=None,
            stage="start",
            envelope=self._codec.encode(envelope),
        )
        self._checkpoints.put(checkpoint)
        return arn

    def stop(self, execution_arn: str, cause: str) -> None:
        self.stopped.append(execution_arn.rsplit(":", 1)[-1])

    def send_success(self, task_token: str, output: str) -> None:
        if task_token in self.gone_tokens:
            raise TaskGone(f"task {task_token} timed out")
        self.answered.append((task_token, json.loads(output)))
        self.gone_tokens.add(task_token)  # a token takes one answer, as in Step Functions

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        self.gone_tokens.add(task_token)


def memory_runtime(
    llm: LLMProvider | None = None, capabilities: registry.Registry | None = None, **settings: Any
) -> Runtime:
    """The composition root on in-memory adapters (no AWS, no moto); `llm` answers every stage."""
    values: dict[str, Any] = {
        **{f"{name}_table": f"mem-{name}" for name in ("missions", "checkpoints", "events", "interrupts")},
        **{f"{name}_table": f"mem-{name}" for name in ("memory", "dispatch", "learnings", "deliveries", "artifacts")},
        "idempotency_table": "mem-idempotency",
        "repositories_table": "mem-repositories",
        "agents_table": "mem-agents",
        "usage_table": "mem-usage",
        "blob_bucket": "mem-blobs",
        "snapshot_bucket": "mem-snapshots",
        "event_bus": "mem-bus",
        "state_machine_arns": {
            name: f"{ACCOUNT_ARN}:stateMachine:{name}"
            for name in (capabilities or registry.default_registry()).available()
        },
        **settings,
    }
    runtime = Runtime(RuntimeSettings(**values), llm=llm, capabilities=capabilities)
    missions, checkpoints = MemoryMissionStore(), MemoryCheckpointStore()
    codec = EnvelopeCodec(MemoryBlobStore())
    ports: dict[str, Any] = {
        "missions": missions,
        "checkpoints": checkpoints,
        "events": MemoryEventStore(),
        "interrupts": MemoryInterruptStore(),
        "artifacts": MemoryArtifactStore(),
        "codec": codec,
        "memory": InMemoryLongTermMemory(),
        "learnings": InMemoryLearningsStore(),
        "missions_by_capability": InMemoryMissionsByCapability(missions),
        "dispatch_store": InMemoryDispatchStore(),
        "flow_records": InMemoryFlowRecords(),
        "deliveries": InMemoryDeliveryStore(),
        "webhook_sources": StaticWebhookSources({}),
        "executions": FakeExecutions(checkpoints, codec),
        "repository_store": MemoryRepositoryStore(),
        "snapshot_store": MemorySnapshotStore(),
        "idempotency": MemoryIdempotencyLayer(),
        "agent_store": InMemoryAgentStore(),
        "usage": InMemoryUsageStore(),
    }
    for name, port in ports.items():  # the composition root's cached ports, bound before first use
        setattr(runtime, name, port)
    return runtime
