"""The stage runner: checks a request, hands the envelope to the mode it names, and keeps what the
invocation measured. It composes the runner's parts and does no stage work itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from missions.core.capability.liveness import OutputLiveness
from missions.core.capability.registry import Capability
from missions.core.cost.usage import UsageRecord
from missions.core.errors import StageRequestError
from missions.core.pipeline.config import PipelineConfig
from missions.service.runner._agents import PinnedAgents
from missions.service.runner._base import MODES, Invocation, StageReport, StageServices, StageTimings
from missions.service.runner._commit import StageCommit
from missions.service.runner._function import StageFunctions
from missions.service.runner._model import ModelCalls
from missions.service.runner._modes import StageModes
from missions.service.runner._tools import StageTools
from missions.service.runner._usage import UsageLedger


@dataclass
class StageRunner:
    capability: Capability
    services: StageServices
    _invocation: Invocation = field(default_factory=Invocation, init=False, repr=False)
    _modes: StageModes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        capability, services, invocation = self.capability, self.services, self._invocation
        agents = PinnedAgents(capability, services)
        model = ModelCalls(capability, services, agents, UsageLedger(capability.name, services, invocation), invocation)
        functions = StageFunctions(capability, services, model, StageTools(capability, services), invocation)
        liveness = OutputLiveness(capability.pipeline, capability.stages)
        commit = StageCommit(capability.pipeline, services, invocation, liveness)
        self._modes = StageModes(capability, services, agents, functions, commit, invocation)

    @property
    def pipeline(self) -> PipelineConfig:
        return self.capability.pipeline

    # -- what the last invocation measured and learned (metrics, an Express segment's hand-back) ----------

    @property
    def last_timings(self) -> StageTimings:
        return self._invocation.timings

    @property
    def last_report(self) -> StageReport | None:
        return self._invocation.report

    @property
    def last_usage(self) -> list[UsageRecord]:
        """The model calls of the last invocation."""
        return self._invocation.usage

    @property
    def mission_ended_meanwhile(self) -> bool:
        """The last stage found its mission ended (cancelled) when it read its record after its checkpoint."""
        return self._invocation.mission_ended_meanwhile

    @property
    def pausing(self) -> bool:
        """The last stage found its user paused the mission: the mission's machine waits after it."""
        return self._invocation.pausing

    # -- entry point ----------------------------------------------------------------

    def handle(self, request: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """Run the stage the request names. `deadline` (time.monotonic()) is when its Lambda runs out:
        model calls never run past it, so the stage can still commit what it has."""
        invocation = self._invocation
        invocation.begin(deadline)
        started = self.services.clock()
        stage, mode = request.get("stage"), request.get("mode", "run")
        if mode not in MODES:
            raise StageRequestError(f"unknown mode '{mode}'")
        if not isinstance(stage, str) or not self.pipeline.has_stage(stage):
            raise StageRequestError(f"capability '{self.capability.name}' has no stage '{stage}'")
        if not isinstance(request.get("envelope"), dict):
            raise StageRequestError("request has no envelope")
        given: dict[str, Any] = request["envelope"]
        if mode in ("run", "join", "finalize"):
            # the stage gets a copy: values it changes in place must not change `given`, which its
            # checkpoint's delta is taken against
            envelope = self.services.codec.decode(given, detach=True)
        else:
            envelope = self.services.codec.decode(given)
        if envelope.capability != self.capability.name:
            raise StageRequestError(f"envelope belongs to '{envelope.capability}', not '{self.capability.name}'")
        envelope.segment_yield = False  # said afresh by each stage (the app's segment clock)
        envelope.pause = False  # likewise: only the stage that finds its mission pausing says it
        envelope.mission_ended = False  # and only the one that finds it ended (the app says it)
        before = envelope.counters.model_copy()
        try:
            if mode == "branch" or mode == "item":
                return self._modes.partial(envelope, stage, mode, request)
            hop = request.get("hop")
            if mode == "join":
                return self._modes.join(envelope, given, stage, hop)
            if mode == "finalize":
                return self._modes.finalize(envelope, given, stage, hop)
            return self._modes.run(envelope, given, stage, hop)
        finally:
            invocation.timings.total_ms = (self.services.clock() - started) * 1000
            if invocation.report is None:
                invocation.report = StageReport(self.capability.name, stage, before, envelope.counters.model_copy())
            if self.services.on_timings is not None:
                self.services.on_timings(stage, invocation.timings)
