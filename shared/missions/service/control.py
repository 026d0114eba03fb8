"""What a user and the platform do to a mission under way: cancel it (in any state that is not over),
and record how it ended when its execution stops.

Every status change goes through the lifecycle (missions.service.lifecycle), whose conditional
writes make the order of racing writers irrelevant: once a mission is cancelling, a stage that
finishes late cannot write it back to running, and a queued mission cancelled before its claim is
never started by it.
"""

from __future__ import annotations

import logging

from missions.core.envelope import utcnow
from missions.core.errors import NotFound, TaskGone, TransitionRefused
from missions.core.events import Event, EventType
from missions.ports.store import EventStore, Executions, InterruptStore, MissionRecord, MissionStatus, MissionStore
from missions.service.launcher import Launcher
from missions.service.lifecycle import NOT_STARTED, Lifecycle

log = logging.getLogger(__name__)


class MissionControl:
    def __init__(
        self,
        *,
        missions: MissionStore,
        events: EventStore,
        interrupts: InterruptStore,
        executions: Executions,
        launcher: Launcher,
    ):
        self._missions = missions
        self._events = events
        self._interrupts = interrupts
        self._executions = executions
        self._launcher = launcher
        self._lifecycle = Lifecycle(missions)

    def cancel(self, record: MissionRecord, reason: str = "cancelled") -> None:
        """Cancel a queued, running or waiting mission; TransitionRefused when it already ended.

        Queued: it leaves the queue and never starts. Running: cancelling (stage writes refused from
        here), its execution stopped, then cancelled. Waiting for an answer: its question expires and
        the token is released, so a late answer is refused."""
        if record.status in NOT_STARTED:
            try:
                self._lifecycle.cancelled(record.mission_id, reason)  # from here on no claim can start it
            except TransitionRefused:
                record = self._missions.get(record.mission_id)  # claimed meanwhile: stop it below
            else:
                self._launcher.withdraw(record.user_id, record.mission_id)
                self._announce(record.mission_id, reason)
                return
        self._lifecycle.move(record.mission_id, MissionStatus.CANCELLING, terminal_reason=reason)
        self._launcher.withdraw(record.user_id, record.mission_id)  # an answer queued to resume it
        current = self._missions.get(record.mission_id)
        if current.execution_arn:
            self._executions.stop(current.execution_arn, reason)
        for interrupt in self._interrupts.pending(record.mission_id):
            self._interrupts.expire(record.mission_id, interrupt.interrupt_id)
            try:  # in AWS the stop already freed the token; an emulator may still be waiting on it
                self._executions.send_failure(interrupt.task_token, "MissionCancelled", reason)
            except TaskGone:
                pass
        try:
            self._lifecycle.cancelled(record.mission_id, reason)
        except TransitionRefused as refused:  # the stopped execution's end was reported first: it finished the cancel
            if refused.current != MissionStatus.CANCELLED:
                raise
        self._announce(record.mission_id, reason)
        self._launcher.finished(record.mission_id)

    def execution_ended(self, execution_arn: str, status: str) -> None:
        """Step Functions says an execution ended: record what the stages could not, free its slot."""
        mission_id = execution_arn.rsplit(":", 1)[-1]
        try:
            record = self._missions.get(mission_id)
        except NotFound:
            log.warning("execution %s ended for an unknown mission", execution_arn)
            return
        try:
            if record.status == MissionStatus.CANCELLING:  # its cancel stopped it: finish the cancel
                self._lifecycle.cancelled(mission_id, record.terminal_reason or "cancelled")
            elif record.status not in MissionStatus.TERMINAL:
                # a succeeded execution's last stage records the end before the execution ends; a mission
                # still open after it (a bug on the way) would otherwise show as running for ever
                reason = "execution_ended_unrecorded" if status == "SUCCEEDED" else f"execution_{status.lower()}"
                self._lifecycle.move(
                    mission_id,
                    MissionStatus.FAILED,
                    completed_at=utcnow(),
                    terminal_reason=reason,
                    pending_interrupt=None,
                )
        except TransitionRefused:
            pass  # it ended (or was cancelled) in the meantime: that writer's status stands
        if record.status in MissionStatus.TERMINAL and not record.completed_at:
            self._missions.update(mission_id, completed_at=utcnow())
        self._launcher.finished(mission_id)

    def _announce(self, mission_id: str, reason: str) -> None:
        event = Event(type=EventType.MISSION_CANCELLED, mission_id=mission_id, payload={"reason": reason})
        self._events.append(mission_id, "cancelled", [event])


__all__ = ["MissionControl"]
