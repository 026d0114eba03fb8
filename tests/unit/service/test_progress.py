"""Where a running mission is (missions.service.progress): its newest checkpoint's progress over its record,
read when someone looks; and folded into the record by the writes that take the mission out of its stages'
hands (the lifecycle)."""

from __future__ import annotations

from typing import Any

import pytest

from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.mission.status import MissionStatus
from missions.ports.checkpoints import Checkpoint
from missions.ports.missions import MissionRecord, MissionSummary, lifecycle_of, running_stage
from missions.service.lifecycle import Lifecycle
from missions.service.progress import MissionProgress


def _stage(checkpoints: MemoryCheckpointStore, hop: int, stage: str, next_stage: str | None, **more: Any) -> None:
    """A stage commits: its checkpoint holds where the mission stands after it."""
    progress = {
        "stage": stage,
        "next_stage": next_stage,
        "phase": "executing",
        "counters": {"agent_hops": hop, "cost_usd": 0.01 * hop},
        "asking": None,
        **more,
    }
    checkpoints.put(
        Checkpoint(
            thread_id="m",
            checkpoint_id=f"{hop:04d}-{stage}",
            parent_id=None,
            stage=stage,
            envelope={},
            progress=progress,
        )
    )


def _running(missions: MemoryMissionStore, status: str = MissionStatus.RUNNING) -> MissionRecord:
    record = MissionRecord(mission_id="m", user_id="u", capability="c", goal="g", status=status)
    missions.create(record)
    return missions.get("m")


class _Unread(MemoryCheckpointStore):
    def latest(self, thread_id: str) -> Checkpoint | None:
        raise AssertionError("an ended mission's record is all there is to it")


def test_a_running_missions_record_shows_where_its_last_stage_sent_it():
    # Given a running mission whose record was written when it started, and two stages since
    missions, checkpoints = MemoryMissionStore(), MemoryCheckpointStore()
    record = _running(missions)
    _stage(checkpoints, 1, "plan", "search")
    _stage(checkpoints, 2, "search", "write")
    # When it is read through its progress
    shown = MissionProgress(checkpoints).current(record)
    # Then it is at the second stage, the third running, with the cost so far, changed when that stage
    # committed, and its record is unchanged
    assert (shown.stage, shown.next_stage, shown.agent_hops, shown.cost_usd) == ("search", "write", 2, 0.02)
    assert shown.updated_at == checkpoints.latest("m").created_at >= record.updated_at
    assert running_stage(shown) == "write" and lifecycle_of(shown) == "executing"
    assert missions.get("m").stage is None


def test_before_any_stage_and_after_a_checkpoint_without_progress_the_record_stands():
    # Given a running mission with no checkpoint, then one written before checkpoints kept progress
    missions, checkpoints = MemoryMissionStore(), MemoryCheckpointStore()
    record = _running(missions)
    progress = MissionProgress(checkpoints)
    assert progress.current(record) == record and progress.latest("m") == {}
    checkpoints.put(Checkpoint(thread_id="m", checkpoint_id="0001-plan", parent_id=None, stage="plan", envelope={}))
    # Then the record is what there is
    assert progress.current(record) == record


def test_a_record_written_at_or_after_the_last_stage_is_not_overlaid():
    # Given a stage that asked, the wait that folded its progress in, and the answer that cleared the question
    missions, checkpoints = MemoryMissionStore(), MemoryCheckpointStore()
    _running(missions)
    _stage(checkpoints, 3, "ask", "await:clarification", asking="i_1")
    progress = MissionProgress(checkpoints)
    lifecycle = Lifecycle(missions, progress=progress.latest)
    lifecycle.waiting("m", "i_1")
    lifecycle.resumed("m")
    # When the running mission is read before its next stage commits
    shown = progress.current(missions.get("m"))
    # Then the answered question is not asked again: the record (as far as the checkpoint) stands
    assert shown.status == MissionStatus.RUNNING and shown.asking is None and shown.stage == "ask"


@pytest.mark.parametrize("status", [MissionStatus.COMPLETED, MissionStatus.INTERRUPTED, MissionStatus.PAUSED])
def test_a_mission_no_stage_can_move_is_read_from_its_record_alone(status):
    # Given a mission that ended, waits for an answer or is paused (the write that got it there says where
    # its stages got to, and no stage runs until the one that resumes it)
    missions = MemoryMissionStore()
    record = _running(missions, status=status)
    # When it is read through its progress, Then no checkpoint is read
    assert MissionProgress(_Unread()).current(record) == record


def test_a_listing_shows_a_running_missions_stage_and_cost_and_leaves_the_others():
    # Given a running mission two stages in, and an interrupted one
    missions, checkpoints = MemoryMissionStore(), MemoryCheckpointStore()
    running = MissionSummary.of(_running(missions))
    _stage(checkpoints, 2, "search", "write")
    waiting = running.model_copy(update={"status": MissionStatus.INTERRUPTED, "stage": "ask"})
    progress = MissionProgress(checkpoints)
    # When their summaries are shown
    shown = progress.summary(running)
    # Then the running one is where its stages got to, the other as its record left it
    assert (shown.stage, shown.next_stage, shown.phase, shown.cost_usd, shown.agent_hops) == (
        "search",
        "write",
        "executing",
        0.02,
        2,
    )
    assert progress.summary(waiting) == waiting


@pytest.mark.parametrize(
    ("leave", "status"),
    [
        (lambda life: life.waiting("m", "i_1"), MissionStatus.INTERRUPTED),
        (lambda life: life.cancelled("m"), MissionStatus.CANCELLED),
        (
            lambda life: life.move("m", MissionStatus.FAILED, terminal_reason="execution_timed_out"),
            MissionStatus.FAILED,
        ),
        (lambda life: (life.pause("m"), life.paused("m", "pause-0002", "token")), MissionStatus.PAUSED),
    ],
)
def test_a_mission_leaving_its_stages_hands_keeps_where_they_got_to(leave, status):
    # Given a running mission two stages in
    missions, checkpoints = MemoryMissionStore(), MemoryCheckpointStore()
    _running(missions)
    _stage(checkpoints, 2, "search", "write")
    # When it waits for an answer, is cancelled, fails from outside or is paused
    leave(Lifecycle(missions, progress=MissionProgress(checkpoints).latest))
    # Then its record, read alone, says where it got to and what it cost
    record = missions.get("m")
    assert record.status == status
    assert (record.stage, record.agent_hops, record.cost_usd) == ("search", 2, 0.02)


def test_the_final_stages_end_names_its_stage_and_reads_no_checkpoint():
    # Given a running mission whose final stage writes its end with where it stands
    missions = MemoryMissionStore()
    _running(missions)
    lifecycle = Lifecycle(missions, progress=_Unread().latest)
    # When it ends, Then its own fields are written and no checkpoint is read
    lifecycle.end("m", "completed", stage="write", counters={"agent_hops": 3})
    assert missions.get("m").stage == "write"
