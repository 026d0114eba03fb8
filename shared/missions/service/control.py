"""What a user and the platform do to a mission under way: cancel it (in any state that is not over),
pause and resume it, send it a note, and record how it ended when its execution stops.

Every status change goes through the lifecycle (missions.service.lifecycle), whose conditional
writes make the order of racing writers irrelevant: once a mission is cancelling, a stage that
finishes late cannot write it back to running, and a queued mission cancelled before its claim is
never started by it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from missions.core.errors import ConflictError, NotFound, TaskGone, TransitionRefused
from missions.core.mission.envelope import new_id, utcnow
from missions.core.mission.events import Event, EventType
from missions.core.mission.notes import MAX_NOTES, Note
from missions.core.mission.status import NOT_STARTED, NOTEABLE, TERMINAL, MissionStatus
from missions.ports.agents import UsageStore, count_ended_mission
from missions.ports.dispatch import ResumeTicket
from missions.ports.events import EventStore
from missions.ports.executions import Executions
from missions.ports.interrupts import InterruptStore
from missions.ports.missions import MissionRecord, MissionStore
from missions.service.launcher import Launcher
from missions.service.lifecycle import Lifecycle
from missions.service.progress import MissionProgress

if TYPE_CHECKING:
    from missions.service.delegation import Delegations
    from missions.service.notifications import NotificationService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecutionStatus:
    """Step Functions says an execution's status changed (the status function's event, read by missions.app.events)."""

    execution_arn: str
    status: str
    name: str | None = None


class MissionControl:
    def __init__(
        self,
        *,
        missions: MissionStore,
        events: EventStore,
        interrupts: InterruptStore,
        executions: Executions,
        launcher: Launcher,
        notifications: Callable[[], NotificationService] | None = None,
        delegations: Callable[[], Delegations] | None = None,
        usage: Callable[[], UsageStore] | None = None,
        progress: MissionProgress | None = None,
    ):
        """`notifications`: made on first use, by the status function only (notices of missions that ended).
        `delegations`: made on first use, for missions that have a parent or children. `usage`: where a
        mission this service ends (cancelled, or failed when its execution ended) has its calls counted.
        `progress`: where its stages got to, folded into the write that ends it (missions.service.progress)."""
        self._missions = missions
        self._notifications = notifications
        self._events = events
        self._interrupts = interrupts
        self._executions = executions
        self._launcher = launcher
        self._progress = progress
        self._lifecycle = Lifecycle(missions, progress=progress.latest if progress is not None else None)
        self._delegations = delegations
        self._usage = usage

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
                self._launcher.withdraw(record.user_id, record.mission_id, record.flow_key)
                self._announce(record.mission_id, reason)
                self._tell_parent(record.mission_id)  # it never ran: no execution will report its end
                return
        self._lifecycle.move(record.mission_id, MissionStatus.CANCELLING, terminal_reason=reason)
        self._launcher.withdraw(record.user_id, record.mission_id)  # an answer queued to resume it
        current = self._missions.get(record.mission_id)
        if current.execution_arn:
            self._executions.stop(current.execution_arn, reason)
        if current.pause_token:  # paused: as for a question, an emulator may still be waiting on its token
            try:
                self._executions.send_failure(current.pause_token, "MissionCancelled", reason)
            except TaskGone:
                pass
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
        else:
            self._count_usage(record.mission_id)
        self._announce(record.mission_id, reason)
        self._launcher.finished(record.mission_id, record.user_id, record.flow_key)
        self._cancel_children(record, reason)

    def _cancel_children(self, parent: MissionRecord, reason: str) -> None:
        """A cancelled parent's sub-missions go with it (their ends find the parent no longer waiting)."""
        if not parent.children or self._delegations is None:
            return
        for child in self._delegations().children_of(self._missions.get(parent.mission_id)):
            try:
                self.cancel(child, f"parent_cancelled: {reason}"[:200])
            except TransitionRefused:
                pass  # it ended meanwhile

    def _tell_parent(self, mission_id: str) -> None:
        if self._delegations is None:
            return
        record = self._missions.get(mission_id)
        if record.parent is not None:
            self._delegations().ended(record)

    def pause(self, record: MissionRecord) -> None:
        """Pause a running mission: its stage in flight finishes (and checkpoints), then its execution waits
        for the resume at no compute cost, holding no running slot (missions.service.lifecycle).
        ConflictError (nothing changed) when it is not running."""
        if record.status == MissionStatus.INTERRUPTED and self._paused_children(record, pause=True):
            return  # it waits on sub-missions: they pause (it waits on, at no cost, until they end)
        if record.status != MissionStatus.RUNNING:
            raise ConflictError(_why_not("paused", record.status))
        self._lifecycle.pause(record.mission_id)  # TransitionRefused when it moved on meanwhile
        if self._progress is not None:
            record = self._progress.current(record)
        self._announce_event(record.mission_id, EventType.MISSION_PAUSING, stage=record.next_stage or record.stage)

    def resume(self, record: MissionRecord) -> bool:
        """Resume a paused mission where it stopped, with the notes sent meanwhile: at once when its user
        has a running slot free (True), else queued for one. ConflictError when it is not paused (a
        pausing one is still finishing its stage) or its wait is over."""
        if record.status == MissionStatus.INTERRUPTED and self._paused_children(record, pause=False):
            return True
        if record.status != MissionStatus.PAUSED or not record.pause_id or not record.pause_token:
            if record.status == MissionStatus.PAUSING:
                raise ConflictError(f"mission {record.mission_id} is still pausing (its stage in flight ends first)")
            raise ConflictError(_why_not("resumed", record.status))
        ticket = ResumeTicket(
            interrupt_id=record.pause_id, task_token=record.pause_token, output=json.dumps(record.notes), kind="unpause"
        )
        # recorded before the execution goes on, so the resume precedes what the next stage writes (as an
        # answer does); nothing runs after it until then, so the same batch is rewritten in place with what
        # the resume turned out to be (queued for a slot, or refused)
        batch = f"resumed-{record.pause_id}"
        self._events.append(
            record.mission_id, batch, [self._event(record.mission_id, EventType.MISSION_RESUMED, queued=False)]
        )
        try:
            now = self._launcher.unpause(record.mission_id, ticket)
        except TaskGone as gone:
            reason = f"the resume could not be delivered ({gone})"
            expired = self._event(
                record.mission_id, EventType.INTERRUPT_EXPIRED, interrupt_id=record.pause_id, reason=reason
            )
            self._events.append(record.mission_id, batch, [expired])
            raise ConflictError(f"mission {record.mission_id} can no longer be resumed ({gone})") from gone
        if not now:
            self._events.append(
                record.mission_id, batch, [self._event(record.mission_id, EventType.MISSION_RESUMED, queued=True)]
            )
        return now

    def _paused_children(self, parent: MissionRecord, *, pause: bool) -> bool:
        """Pause (or resume) the sub-missions a waiting parent waits on; False when it has none to."""
        if not parent.children or self._delegations is None:
            return False
        wanted = MissionStatus.RUNNING if pause else MissionStatus.PAUSED
        children = [c for c in self._delegations().children_of(parent) if c.status == wanted]
        for child in children:
            try:
                if pause:
                    self.pause(child)
                else:
                    self.resume(child)
            except (ConflictError, TaskGone) as exc:
                log.info(
                    "sub-mission %s of %s not %s: %s",
                    child.mission_id,
                    parent.mission_id,
                    "paused" if pause else "resumed",
                    exc,
                )
        return bool(children)

    def note(self, record: MissionRecord, text: str) -> Note:
        """A note for a mission that has not ended: the next stage that starts receives it
        (missions.core.mission.notes).
        ConflictError when it ended (or has MAX_NOTES already); ValueError when the text is empty or long."""
        if record.status not in NOTEABLE:
            raise ConflictError(f"mission {record.mission_id} already {record.status}: a note would reach no stage")
        note = Note(text=text)
        try:
            self._missions.add_note(record.mission_id, note.model_dump(), NOTEABLE, MAX_NOTES)
        except TransitionRefused as refused:
            raise ConflictError(
                f"mission {record.mission_id} already {refused.current}: a note would reach no stage"
            ) from None
        self._announce_event(record.mission_id, EventType.NOTE_RECEIVED, note_id=note.note_id, text=note.text)
        return note

    def execution_changed(self, change: ExecutionStatus) -> dict[str, Any]:
        """The status function: record how the execution ended, free its slot, tell the user who opted in."""
        ended = self.execution_ended(change.execution_arn, change.status)
        if self._notifications is not None and ended is not None:  # None: no mission of ours (logged)
            self._notifications().mission_ended(ended)
        return {"mission_id": change.name, "status": change.status}

    def execution_ended(self, execution_arn: str, status: str) -> MissionRecord | None:
        """Step Functions says an execution ended: record what the stages could not, free its slot. The
        mission's record as it ended (one read, and the write if this call ended it); None if unknown."""
        mission_id = execution_arn.rsplit(":", 1)[-1]
        try:
            record = self._missions.get(mission_id)
        except NotFound:
            log.warning("execution %s ended for an unknown mission", execution_arn)
            return None
        try:
            if record.status == MissionStatus.CANCELLING:  # its cancel stopped it: finish the cancel
                record = self._lifecycle.cancelled(mission_id, record.terminal_reason or "cancelled")
                self._count_usage(mission_id)
            elif record.status not in TERMINAL:
                # a succeeded execution's last stage records the end before the execution ends; a mission
                # still open after it (a bug on the way) would otherwise show as running for ever
                reason = "execution_ended_unrecorded" if status == "SUCCEEDED" else f"execution_{status.lower()}"
                record = self._lifecycle.move(
                    mission_id,
                    MissionStatus.FAILED,
                    completed_at=utcnow(),
                    terminal_reason=reason,
                    pending_interrupt=None,
                )
                self._count_usage(mission_id)
        except TransitionRefused:  # it ended (or was cancelled) in the meantime: that writer's status stands
            record = self._missions.get(mission_id)
        if record.status in TERMINAL and not record.completed_at:
            completed_at = utcnow()
            self._missions.update(mission_id, completed_at=completed_at)
            record = record.model_copy(update={"completed_at": completed_at})
        self._launcher.finished(mission_id, record.user_id, record.flow_key)
        if record.parent is not None and self._delegations is not None:
            self._delegations().ended(record)  # its parent resumes with its outcome
        return record

    def _count_usage(self, mission_id: str) -> None:
        """This call wrote the mission's end: its model calls go into the usage totals, once (as the final
        stage does for a mission that ends through it). A store that fails is logged: the calls stay in the
        mission's usage."""
        if self._usage is None:
            return
        try:
            count_ended_mission(self._usage(), mission_id)
        except Exception:
            log.exception("the model calls of mission %s were not added to the usage totals", mission_id)

    def _announce_event(self, mission_id: str, kind: EventType, stage: str | None = None, **payload: object) -> None:
        self._events.append(mission_id, f"{kind.value}-{new_id()}", [self._event(mission_id, kind, stage, **payload)])

    @staticmethod
    def _event(mission_id: str, kind: EventType, stage: str | None = None, **payload: object) -> Event:
        return Event(type=kind, mission_id=mission_id, stage=stage, payload=payload)

    def _announce(self, mission_id: str, reason: str) -> None:
        event = Event(type=EventType.MISSION_CANCELLED, mission_id=mission_id, payload={"reason": reason})
        self._events.append(mission_id, "cancelled", [event])


def _why_not(wanted: str, status: str) -> str:
    if status in TERMINAL or status == MissionStatus.CANCELLING:
        return f"the mission already {status}; it cannot be {wanted}"
    return f"the mission is {status}; only a {'running' if wanted == 'paused' else 'paused'} mission can be {wanted}"


__all__ = ["ExecutionStatus", "MissionControl"]
