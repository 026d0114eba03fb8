"""The launcher and mission control over in-memory stores, with a fake Executions port playing Step Functions
(tests.support.fakes): what the flow-control tests (daily budgets, double-texting) start missions on.
Executions end when a test says so, as the status function would hear of it."""

from __future__ import annotations

from typing import Any

from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.conversations import InMemoryConversationStore
from missions.adapters.memory.dispatch import InMemoryDispatchStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.interrupts import MemoryInterruptStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.capability import registry as registry
from missions.core.errors import ConflictError
from missions.core.mission.offload import EnvelopeCodec
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import MissionStatus
from missions.service.control import MissionControl
from missions.service.dispatch import DispatchResult
from missions.service.flow.budgets import Budgets
from missions.service.launcher import Launcher
from missions.service.lifecycle import Lifecycle
from tests.support.fakes import FakeExecutions

CAPABILITY = "shopping"  # reads no repository: its requests need no resolver


class LaunchWorld:
    def __init__(
        self, limit: int = 10, budgets: Budgets | None = None, capabilities: registry.Registry | None = None
    ) -> None:
        self.missions, self.events = MemoryMissionStore(), MemoryEventStore()
        self.conversations = InMemoryConversationStore()
        self.store = InMemoryDispatchStore()
        self.checkpoints, self.codec = MemoryCheckpointStore(), EnvelopeCodec(MemoryBlobStore())
        self.executions = FakeExecutions(self.checkpoints, self.codec, next_stage="present")
        self.launcher = Launcher(
            missions=self.missions,
            checkpoints=self.checkpoints,
            codec=self.codec,
            executions=self.executions,
            dispatch=self.store,
            state_machine_arn=lambda name: f"arn:aws:states:us-east-1:123456789012:stateMachine:{name}",
            limit=limit,
            capabilities=capabilities,
            conversations=lambda: self.conversations,
            budgets=budgets,
            events=self.events,
            cancel=lambda record, reason: self.control.cancel(record, reason),
        )
        self.control = MissionControl(
            missions=self.missions,
            events=self.events,
            interrupts=MemoryInterruptStore(),
            executions=self.executions,
            launcher=self.launcher,
        )

    def request(self, goal: str = "a charger", user: str = "ann", **fields: Any) -> DispatchResult:
        fields.setdefault("capability", CAPABILITY)
        return self.launcher.submit(MissionRequest.parse(goal=goal, user_id=user, **fields))

    def status(self, mission_id: str) -> str:
        return self.missions.get(mission_id).status

    def end(self, mission_id: str) -> None:
        """The final stage ran, then Step Functions reported the execution's end."""
        record = self.missions.get(mission_id)
        try:
            Lifecycle(self.missions).end(mission_id, MissionStatus.COMPLETED, terminal_reason="completed")
        except ConflictError:
            pass  # cancelled meanwhile: the stage's write is refused
        self.control.execution_ended(record.execution_arn or f"x:{mission_id}", "SUCCEEDED")

    def started_context(self, mission_id: str) -> dict[str, Any]:
        """The context the mission's execution started with."""
        checkpoint = self.checkpoints.get(mission_id, "0001-start")
        assert checkpoint is not None, f"{mission_id} never started"
        return self.codec.decode(checkpoint.envelope).context
