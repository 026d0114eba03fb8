"""Where a running mission is: its last stage's progress, kept in that stage's checkpoint.

A stage writes its checkpoint anyway; writing its progress (its stage, the next one, the phase, the
counters, the question it asked) on the mission's record too cost a write unit a stage, for readers
that may never come. So the record is written when the mission's status changes (every such write
folds in the newest progress: `latest`), and whoever shows a mission that may be running reads its
newest checkpoint's progress over the record (`current`, `summary`): one read, paid when someone
looks. A record whose own counters are as far as the checkpoint's (it was written at or after that
stage: a question's wait, an answer, a pause, its end) is not overlaid: what it says is newer.
"""

from __future__ import annotations

from typing import Any

from missions.core.mission.status import MissionStatus
from missions.ports.checkpoints import CheckpointStore
from missions.ports.missions import MissionRecord, MissionSummary, cost_of

PROGRESS_FIELDS = ("stage", "next_stage", "phase", "counters", "asking")
# the statuses whose record may be behind its checkpoints: a stage may have run since it was written (a
# mission waiting for an answer or paused runs none until the write that resumes it)
MAY_HAVE_MOVED = frozenset({MissionStatus.RUNNING, MissionStatus.PAUSING})


def _hops(counters: dict[str, Any] | None) -> int:
    try:
        return int((counters or {}).get("agent_hops") or 0)
    except (TypeError, ValueError):
        return 0


class MissionProgress:
    def __init__(self, checkpoints: CheckpointStore):
        self._checkpoints = checkpoints

    def latest(self, mission_id: str) -> dict[str, Any]:
        """The newest stage's progress ({} when no stage has committed yet)."""
        found = self._newest(mission_id)
        return found[0] if found else {}

    def _newest(self, mission_id: str) -> tuple[dict[str, Any], str] | None:
        """The newest stage's progress, and when its checkpoint was written."""
        checkpoint = self._checkpoints.latest(mission_id)
        if checkpoint is None or not checkpoint.progress:
            return None
        return {name: checkpoint.progress.get(name) for name in PROGRESS_FIELDS}, checkpoint.created_at

    def _newer(self, mission_id: str, status: str, hops: int) -> dict[str, Any]:
        """The newest stage's progress (and `updated_at`, its time) when a stage ran since the record was
        written; {} when none did."""
        if status not in MAY_HAVE_MOVED:
            return {}
        found = self._newest(mission_id)
        if found is None or _hops(found[0].get("counters")) <= hops:
            return {}
        return {**found[0], "updated_at": found[1]}

    def current(self, record: MissionRecord) -> MissionRecord:
        """The record, with the progress of any stage that ran since it was written (and that stage's time
        as its `updated_at`)."""
        newer = self._newer(record.mission_id, record.status, record.agent_hops)
        return record.model_copy(update=newer) if newer else record

    def summary(self, summary: MissionSummary) -> MissionSummary:
        """A running mission's summary in a listing, likewise (its stage, next stage, phase and cost; any
        other's is what its record said when it stopped running)."""
        if summary.status != MissionStatus.RUNNING:
            return summary
        newer = self._newer(summary.mission_id, summary.status, summary.agent_hops)
        if not newer:
            return summary
        return summary.model_copy(
            update={
                "stage": newer["stage"],
                "next_stage": newer["next_stage"],
                "phase": newer["phase"],
                "cost_usd": cost_of(newer["counters"]),
                "agent_hops": _hops(newer["counters"]),
            }
        )


__all__ = ["PROGRESS_FIELDS", "MissionProgress"]
