"""What a stage writes when it is done: its events and its write-once checkpoint, which holds the mission's
progress (missions.service.progress); the final stage then writes the mission's end through the lifecycle
(the one writer of a mission's status). A failing attempt writes only its events, under a name of its own."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from missions.core.capability.liveness import OutputLiveness
from missions.core.errors import NON_RETRYABLE, NotFound, TransitionRefused
from missions.core.mission.checkpoints import diff, snapshot_due
from missions.core.mission.envelope import Envelope, StageRecord
from missions.core.mission.events import Event, EventType
from missions.core.mission.status import ACTIVE, MissionStatus
from missions.core.pipeline.config import PipelineConfig
from missions.ports.agents import count_ended_mission
from missions.ports.checkpoints import Checkpoint
from missions.service.checkpoints import state_at
from missions.service.lifecycle import Lifecycle
from missions.service.runner._base import Invocation, StageServices, preview

log = logging.getLogger(__name__)


@dataclass(eq=False)
class StageCommit:
    _pipeline: PipelineConfig
    _services: StageServices
    _invocation: Invocation
    _liveness: OutputLiveness | None = None

    def commit(
        self,
        envelope: Envelope,
        given: dict[str, Any],
        stage: str,
        checkpoint_id: str,
        events: list[Event],
        status: str,
        records: list[StageRecord],
        hops_before: int,
    ) -> dict[str, Any]:
        """Write the stage's events and its checkpoint (write-once), then the mission's progress; return
        the envelope for the state machine. An earlier attempt of this very stage that committed wins:
        its state is returned (folded from its checkpoint), so a retried stage returns the same result."""
        checkpoints = self._services.checkpoints
        try:  # an earlier attempt of this very stage committed: its state stands, its events are written
            return state_at(checkpoints, envelope.mission_id, checkpoints.get(envelope.mission_id, checkpoint_id))
        except NotFound:
            pass
        self._drop_dead_outputs(envelope, given, stage)
        parent = envelope.checkpoint_id
        envelope.checkpoint_id = checkpoint_id
        encoded = self._services.codec.encode(envelope)
        # an attempt that wrote its events and died before its checkpoint left them as the last batch:
        # this one rewrites them in place
        self._services.events.append(envelope.mission_id, checkpoint_id, events)
        whole = snapshot_due(parent, hops_before, envelope.counters.agent_hops)
        progress = self._progress(envelope, stage)
        checkpoint = Checkpoint(
            thread_id=envelope.mission_id,
            checkpoint_id=checkpoint_id,
            parent_id=parent,
            stage=stage,
            envelope=encoded if whole else None,
            delta=None if whole else diff(given, encoded),
            records=records,
            progress=progress,
        )
        stored = checkpoints.put(checkpoint)
        if (stored.envelope, stored.delta) != (checkpoint.envelope, checkpoint.delta):
            # an earlier attempt of this very stage committed meanwhile: its state stands
            return state_at(checkpoints, envelope.mission_id, stored)
        notes = self._update_mission(envelope, stage, status, progress)
        if notes is None:
            # the mission ended meanwhile (cancelled): an Express segment cannot be stopped from outside,
            # so the app tells it to hand back now instead of running the stages after this one
            self._invocation.mission_ended_meanwhile = True
        # written between two stages, like the machine's own fields (missions.core.mission.checkpoints): the
        # user's notes for the next stage, and whether the machine waits for the user's resume first
        if notes:
            encoded["notes"] = notes
        encoded["pause"] = self._invocation.pausing
        return encoded

    def _drop_dead_outputs(self, envelope: Envelope, given: dict[str, Any], stage: str) -> None:
        """Outputs no stage from here on reads leave the envelope (missions.core.capability.liveness), but
        not the ones this stage wrote: those go into its checkpoint first, and leave at the next commit."""
        if self._liveness is None:
            return
        before = given.get("outputs") or {}
        written = self._pipeline.agent(stage).key
        older = [key for key in envelope.outputs if key != written and key in before]
        for key in self._liveness.dead(envelope.next_stage, older):
            del envelope.outputs[key]

    def _progress(self, envelope: Envelope, stage: str) -> dict[str, Any]:
        """Where the mission stands after this stage, as a running mission's record shows it
        (missions.service.progress): kept in the stage's checkpoint."""
        return {
            "stage": stage,
            "next_stage": envelope.next_stage,
            "phase": self._pipeline.agent(stage).phase or "executing",
            "counters": envelope.counters.model_dump(),
            # the question is only `asking`: the interrupt function makes it pending (and the mission
            # interrupted) once its answer can be delivered, so no client sees a question it cannot answer
            "asking": envelope.interrupt.id if envelope.interrupt else None,
        }

    def _update_mission(
        self, envelope: Envelope, stage: str, status: str, progress: dict[str, Any]
    ) -> list[dict[str, Any]] | None:
        """The final stage writes the mission's end; any other reads its record: the notes it holds, None
        when the mission ended meanwhile (cancelled). A mission its user is pausing stays pausing, and
        this stage says so (`pausing`). Its progress is in its checkpoint: the record is not written."""
        missions = self._services.missions
        if missions is None:
            return []
        if envelope.next_stage is None:  # the final stage ran: the mission is over
            try:
                Lifecycle(missions).end(
                    envelope.mission_id,
                    "failed" if status == "failed" else "completed",
                    terminal_reason=envelope.terminal_reason,
                    result=self.result(envelope),
                    **progress,
                )
            except TransitionRefused as refused:
                # cancelled while this stage ran: its execution is being stopped; the user's choice stands
                log.info("stage %s of %s did not record the end: %s", stage, envelope.mission_id, refused)
                return None
            self._count_usage(envelope.mission_id)
            return []
        record = missions.get(envelope.mission_id)
        if record.status == MissionStatus.PAUSING:
            self._invocation.pausing = True
        elif record.status not in ACTIVE:  # cancelled (or cancelling) while this stage ran
            log.info("stage %s of %s ran after its mission became %s", stage, envelope.mission_id, record.status)
            return None
        return record.notes

    def _count_usage(self, mission_id: str) -> None:
        """This stage wrote its mission's end (no other write can): the mission's calls go into the usage
        totals, once. A store that fails is logged: the calls stay in the mission's usage."""
        if self._services.usage is None:
            return
        try:
            count_ended_mission(self._services.usage(), mission_id)
        except Exception:
            log.exception("the model calls of mission %s were not added to the usage totals", mission_id)

    def result(self, envelope: Envelope) -> dict[str, Any]:
        """The ended mission's result, as its record keeps it."""
        output = envelope.output(self._pipeline.final)
        cited = output.get("citations")
        return {
            "answer": output.get("answer"),
            "output": preview(output, 20_000),
            "citations": cited if isinstance(cited, list) else [c.ref for c in envelope.citations][:200],
            "evidence": [c.model_dump() for c in envelope.citations][:200],  # everything the tools returned
            "terminal_reason": envelope.terminal_reason,
            # why it failed, when it did (the last few errors: who reads a failed mission's result, a parent too)
            **({"errors": [e.model_dump() for e in envelope.errors[-3:]]} if envelope.errors else {}),
            # which configuration produced the answer: each agent's version, and the model the mission named
            "agent_versions": dict(envelope.agents),
            "model": envelope.model,
        }

    def fail(self, envelope: Envelope, stage: str, checkpoint_id: str, exc: Exception, events: list[Event]) -> None:
        """Record a failing attempt's events under a unique prefix, then let it raise. The original error
        matters more than its audit record: a store that fails here is logged with both, and the stage
        raises the original."""
        events.append(
            Event(
                type=EventType.FLOW_ERROR,
                mission_id=envelope.mission_id,
                stage=stage,
                payload={
                    "error": type(exc).__name__,
                    "message": str(exc)[:1000],
                    "retryable": not isinstance(exc, NON_RETRYABLE),
                },
            )
        )
        try:
            self._services.events.append(envelope.mission_id, f"{checkpoint_id}!{uuid.uuid4().hex[:8]}", events)
        except Exception as lost:
            log.warning(
                "the failure of stage %s of mission %s (%s) was not recorded in its events: %s: %s",
                stage,
                envelope.mission_id,
                type(exc).__name__,
                type(lost).__name__,
                lost,
                exc_info=lost,
            )

    def expire(self, mission_id: str, interrupt_id: str) -> None:
        """An interrupt that ended unanswered is expired, so no client answers it any more."""
        if self._services.interrupts is not None:
            try:
                self._services.interrupts.expire(mission_id, interrupt_id)
            except NotFound:
                pass  # it timed out before its token was even stored
