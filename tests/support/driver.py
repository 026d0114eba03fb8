"""A pure-Python stand-in for the compiled state machine, for unit and property tests.

It walks a *sequential* pipeline the way the ASL does: run a stage, follow
`envelope.next_stage`, wait at `await:<kind>` for the next scripted answer, and on any
stage failure go through the final stage in "finalize" mode with `envelope.failure` set
as a Step Functions Catch would set it. It does not model Parallel/Map states, retries,
or the state machine's own hop/counter guards (the runner must keep the bounds itself), and it
follows a `next_stage` naming any stage, where the compiled ASL only has routes to the stage's
own targets. It is not a replacement for the moto integration tests.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from missions.adapters.llm.scripted import ScriptedProvider
from missions.adapters.memory.artifacts import MemoryArtifactStore
from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.longterm import InMemoryLongTermMemory
from missions.adapters.memory.missions import MemoryMissionStore
from missions.adapters.sandbox_local import LocalSandbox
from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability
from missions.core.llm.provider import LLMProvider
from missions.core.mission.envelope import Envelope, InterruptKind, StageRecord
from missions.core.mission.offload import DEFAULT_THRESHOLD, EnvelopeCodec
from missions.core.mission.requests import MissionRequest
from missions.core.roots import AllowedRoots
from missions.core.triggers.declared import TriggerSource
from missions.ports.agents import UsageStore
from missions.ports.missions import MissionRecord
from missions.service.agents import AgentConfigs
from missions.service.checkpoints import stage_history, states, with_earlier_outputs
from missions.service.launcher import build_envelope
from missions.service.repositories.resolver import UserRepositories
from missions.service.repositories.workspace import RepositoryWorkspaces
from missions.service.runner import AWAIT_PREFIX, StageRunner, StageServices

MAX_STEPS = 10_000


@dataclass
class Stores:
    checkpoints: MemoryCheckpointStore = field(default_factory=MemoryCheckpointStore)
    events: MemoryEventStore = field(default_factory=MemoryEventStore)
    missions: MemoryMissionStore = field(default_factory=MemoryMissionStore)
    blobs: MemoryBlobStore = field(default_factory=MemoryBlobStore)
    artifacts: MemoryArtifactStore = field(default_factory=MemoryArtifactStore)
    memory: InMemoryLongTermMemory = field(default_factory=InMemoryLongTermMemory)
    secrets: dict[str, str] = field(default_factory=dict)


@dataclass
class Step:
    """One state-machine step the driver took: which stage, in which mode, what it chose."""

    stage: str
    mode: str
    next_stage: str | None = None
    error: str | None = None


class DirectDriver:
    def __init__(
        self,
        capability: Capability,
        llm: LLMProvider | None = None,
        threshold: int | None = None,
        agents: AgentConfigs | None = None,
        usage: UsageStore | None = None,
    ):
        self.capability = capability
        self.registry = registry.Registry().including(capability)  # the installed ones, and this one
        self.workspace_dir = Path(tempfile.gettempdir()) / "missions-driver-workspaces"
        self.stores = Stores()
        self.codec = EnvelopeCodec(self.stores.blobs, threshold or DEFAULT_THRESHOLD)
        self.services = StageServices(
            checkpoints=self.stores.checkpoints,
            events=self.stores.events,
            codec=self.codec,
            llm=lambda cap: llm or ScriptedProvider(cap.offline_policy),
            missions=self.stores.missions,
            artifacts=self.stores.artifacts,
            memory=lambda: self.stores.memory,
            sandbox=LocalSandbox,
            secrets=self.stores.secrets.__getitem__,
            agents=agents.pinned if agents is not None else None,
            usage=(lambda: usage) if usage is not None else None,
        )
        self.agents = agents
        self.runner = StageRunner(capability, self.services)
        self.steps: list[Step] = []
        self.last_state: dict[str, Any] | None = None  # the last encoded envelope
        # what each whole stage returned, by the checkpoint it wrote: the state its checkpoint must give back
        self.returned: dict[str, dict[str, Any]] = {}
        self.children: list[DirectDriver] = []  # the drivers of the sub-missions its stages delegated to

    @property
    def pipeline(self):
        return self.capability.pipeline

    def history(self, envelope: Envelope) -> list[StageRecord]:
        """The mission's stages as its checkpoints recorded them (the envelope does not carry them)."""
        return stage_history(self.stores.checkpoints, envelope.mission_id)

    def outputs(self, envelope: Envelope) -> dict[str, Any]:
        """Every stage's output as it was last written: the envelope drops those no later stage reads, its
        checkpoints keep them."""
        state = with_earlier_outputs(self.stores.checkpoints, envelope.mission_id, envelope.checkpoint_id)
        return self.codec.decode(state).outputs

    def checkpointed(self, envelope: Envelope) -> dict[str, dict[str, Any]]:
        """The state at each of the mission's checkpoints, read back from its snapshots and deltas
        (to compare with `returned`: what each stage really returned)."""
        return {c.checkpoint_id: state for c, state in states(self.stores.checkpoints, envelope.mission_id)}

    def run(
        self,
        goal: str,
        context: dict[str, Any] | None = None,
        bounds: dict[str, Any] | None = None,
        answers: list[dict[str, Any]] | None = None,
        answer_with: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        user_id: str = "local",
        model: str | None = None,
    ) -> Envelope:
        """Run to the end; questions take `answers` in order, else `answer_with(interrupt)`, else time out."""
        # like `missions run --repo` on one's own machine: the repository named is the one root
        roots = AllowedRoots.of([(context or {}).get("repo") or "."])
        self.services.workspaces = RepositoryWorkspaces(roots, self.workspace_dir)
        envelope = build_envelope(
            MissionRequest(
                capability=self.capability.name,
                goal=goal,
                context=context or {},
                bounds=bounds or {},
                trigger=TriggerSource.CLI,  # a developer's own run: its bounds may pass the capability's
                user_id=user_id,
                model=model,
            ),
            UserRepositories(roots),
            self.registry,
            self.agents,
        )
        self.stores.missions.create(
            MissionRecord(
                mission_id=envelope.mission_id,
                user_id=envelope.user_id,
                capability=envelope.capability,
                goal=envelope.raw_input,
                status="running",
            )
        )
        pending = list(answers or [])
        state = self.codec.encode(envelope)
        stage: str = self.pipeline.start

        for _ in range(MAX_STEPS):
            try:
                if self.pipeline.agent(stage).fan_out:  # the ASL's Map: one run per item, then the stage joins
                    items = state.get("work_items") or []
                    state = {
                        **state,
                        "branch_results": [self._partial(stage, "item", state, i, x) for i, x in enumerate(items)],
                    }
                    state = self._handle(stage, "join", state)
                else:
                    state = self._handle(stage, "run", state)
            except Exception as exc:  # the ASL's Catch: States.ALL -> <stage>.failed -> finalize
                failure = {
                    "Error": type(exc).__name__,
                    "Cause": str(exc),
                    "at": {"state": stage, "reason": "stage_failed"},
                }
                return self._finalize(state, failure)
            next_stage = state.get("next_stage")
            if next_stage is None:
                return self._done(state)
            if next_stage.startswith(AWAIT_PREFIX):
                kind = InterruptKind(next_stage[len(AWAIT_PREFIX) :])
                if kind is InterruptKind.DELEGATION:  # a sub-mission: run to its end, its questions answered alike
                    interrupt = state["interrupt"]
                    ended = self._delegated(state, interrupt["data"], answer_with, user_id)
                    state = {**state, "resume": {"interrupt_id": interrupt["id"], "response": ended}}
                    stage = interrupt["stage"]
                    continue
                if not pending and answer_with is not None:
                    pending.append(answer_with(state["interrupt"]))
                if not pending:
                    failure = {
                        "Error": "States.Timeout",
                        "Cause": "",
                        "at": {"state": f"await.{kind.value}", "reason": "interrupt_timeout"},
                    }
                    return self._finalize(state, failure)
                interrupt = state["interrupt"]
                state = {**state, "resume": {"interrupt_id": interrupt["id"], "response": pending.pop(0)}}
                stage = self.pipeline.resume_stage(kind) or interrupt["stage"]
                continue
            group = self.pipeline.group_of(next_stage) if next_stage in self.pipeline.group_names() else None
            if group:  # the ASL's Parallel: each stage as a branch of the same envelope, then the join runs
                state = {**state, "branch_results": [self._partial(m, "branch", state, i) for i, m in enumerate(group)]}
                next_stage = self.pipeline.agent(group[0]).default_next or ""
            if next_stage not in self.pipeline.stage_names():  # the ASL's Default: guard.unroutable
                failure = {
                    "Error": "Unroutable",
                    "Cause": f"no route to '{next_stage}'",
                    "at": {"state": "guard.unroutable", "reason": "unroutable"},
                }
                return self._finalize(state, failure)
            stage = next_stage
        raise AssertionError(f"mission did not terminate within {MAX_STEPS} steps: {self.steps[-5:]}")

    # -- internals -----------------------------------------------------------------------

    def _delegated(
        self,
        state: dict[str, Any],
        asked: dict[str, Any],
        answer_with: Callable[[dict[str, Any]], dict[str, Any]] | None,
        user_id: str,
    ) -> dict[str, Any]:
        """What missions.service.delegation hands back when a sub-mission ends: run here by a driver of its own
        (the same registry), within what is left of this mission's cost bound. Cycles and depth are the
        launcher's to refuse (tests/integration/test_delegation.py); here every delegation runs."""
        capability = self.registry.load(asked["capability"])
        child = DirectDriver(capability, agents=self.agents)
        child.registry = self.registry
        self.children.append(child)
        left = float(state["bounds"]["max_cost_usd"]) - float(state["counters"]["cost_usd"])
        bounds = {"max_cost_usd": min(left, capability.pipeline.bounds.max_cost_usd)}
        ended = child.run(asked["goal"], asked.get("context") or {}, bounds, answer_with=answer_with, user_id=user_id)
        final = ended.output(capability.pipeline.final)
        failed = ended.failed or ended.terminal_reason not in (None, "completed")
        return {
            "data": {
                "child": ended.mission_id,
                "capability": capability.name,
                "status": "failed" if failed else "completed",
                "reason": ended.terminal_reason or "completed",
                "output": None if failed else final,
                "cost_usd": ended.counters.cost_usd,
            }
        }

    def _handle(self, stage: str, mode: str, state: dict[str, Any]) -> dict[str, Any]:
        step = Step(stage, mode)
        self.steps.append(step)
        try:
            result = self.runner.handle({"stage": stage, "mode": mode, "envelope": state})
        except Exception as exc:
            step.error = f"{type(exc).__name__}: {exc}"
            raise
        step.next_stage = result.get("next_stage")
        self.last_state = result
        self.returned[result["checkpoint_id"]] = json.loads(json.dumps(result))
        return result

    def _partial(self, stage: str, mode: str, state: dict[str, Any], index: int, item: Any = None) -> Any:
        """A branch of a Parallel state or an item of a Map: the stage's delta, as the ASL collects it."""
        self.steps.append(Step(stage, mode))
        request = {"stage": stage, "mode": mode, "envelope": state, "index": index}
        return self.runner.handle({**request, "item": item} if mode == "item" else request)

    def _finalize(self, state: dict[str, Any], failure: dict[str, Any]) -> Envelope:
        # the Catch writes the error into the failing stage's *input*, as ResultPath does
        result = self._handle(self.pipeline.final, "finalize", {**state, "failure": failure})
        return self._done(result)

    def _done(self, state: dict[str, Any]) -> Envelope:
        return self.codec.decode(state)
