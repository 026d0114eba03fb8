"""Retention: missions that ended long ago become a summary in long-term memory.

Completed missions are archived after 30 days and failed (or cancelled) ones after 7, both
configurable: the summary (goal, outcome, result, feedback, errors) goes to the user's
("archived_missions",) namespace, the mission's checkpoints are removed, and the record
stays, marked archived, so the API still answers for it. Run daily (the `retention`
function); the clock is injected so tests can move it.

Pruning (the dev server's short policy, `missions dev --retain-minutes`): an archived mission's bulky
items go too, each store deleting its share of the mission (its events, questions, tool journal and
offloaded blobs, artifacts, model calls): what grows with every mission in an emulation whose tables
live in memory and never expire an item. In AWS the tables' TTLs expire them instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from missions.core.mission.status import MissionStatus
from missions.ports.accounts import PersonalStore
from missions.ports.checkpoints import TOOL_JOURNAL_SUFFIX, CheckpointStore
from missions.ports.memory import LongTermMemory
from missions.ports.missions import MissionRecord, MissionStore
from missions.service.lifecycle import Lifecycle

log = logging.getLogger(__name__)

ARCHIVE_NAMESPACE = ("archived_missions",)


@dataclass(frozen=True)
class RetentionPolicy:
    completed_days: float = 30
    failed_days: float = 7  # failed and cancelled: kept long enough to investigate, then summarized

    @classmethod
    def minutes(cls, minutes: float) -> RetentionPolicy:
        """The dev server's short policy: every ended mission archived this many minutes after it ended."""
        return cls(completed_days=minutes / 1440, failed_days=minutes / 1440)

    def ages(self) -> dict[str, float]:
        return {
            MissionStatus.COMPLETED: self.completed_days,
            MissionStatus.FAILED: self.failed_days,
            MissionStatus.CANCELLED: self.failed_days,
        }


@dataclass
class RetentionReport:
    archived: list[str] = field(default_factory=list)
    checkpoints_removed: int = 0
    items_pruned: int = 0  # the archived missions' bulky items deleted (pruning only)
    failures: dict[str, str] = field(default_factory=dict)  # mission id -> why it could not be archived


def archive_ended_missions(
    *,
    missions: MissionStore,
    checkpoints: CheckpointStore,
    memory: LongTermMemory,
    policy: RetentionPolicy = RetentionPolicy(),
    now: Callable[[], datetime] | None = None,  # the wall clock (UTC) when None
    batch: int = 100,
    prune: Sequence[PersonalStore] = (),
) -> RetentionReport:
    """Archive every mission past its retention age (at most `batch` per status per run); `prune`: the
    stores that also delete their share of each mission archived (each user's missions of the run at
    once, so their deletes share batches)."""
    report = RetentionReport()
    moment = now() if now else datetime.now(UTC)
    for status, days in policy.ages().items():
        cutoff = (moment - timedelta(days=days)).isoformat(timespec="milliseconds")
        summarized = [
            record
            for record in missions.ended_before(status, cutoff, limit=batch)
            if _summarize(record, checkpoints, memory, report)
        ]
        for record in _pruned(summarized, prune, report):
            try:  # last: a run that failed before this point finds the mission again tomorrow
                Lifecycle(missions).move(
                    record.mission_id, MissionStatus.ARCHIVED, archived_at=moment.isoformat(timespec="milliseconds")
                )
                report.archived.append(record.mission_id)
            except Exception as exc:
                _failed(report, [record], exc)
    return report


def _summarize(
    record: MissionRecord, checkpoints: CheckpointStore, memory: LongTermMemory, report: RetentionReport
) -> bool:
    """The mission's summary kept and its step-by-step state removed; False (reported) if it could not be."""
    try:
        memory.put(record.user_id, ARCHIVE_NAMESPACE, record.mission_id, summary(record))
        report.checkpoints_removed += checkpoints.delete_thread(record.mission_id)
        checkpoints.delete_thread(record.mission_id + TOOL_JOURNAL_SUFFIX)  # its stages' tool calls
        return True
    except Exception as exc:  # one bad mission must not stop the others; it is reported
        _failed(report, [record], exc)
        return False


def _pruned(
    records: list[MissionRecord], prune: Sequence[PersonalStore], report: RetentionReport
) -> list[MissionRecord]:
    """The records whose items every pruning store deleted, by user (deleting what is already gone is no
    error: a rerun finishes what a failed one left)."""
    if not prune:
        return records
    by_user: dict[str, list[MissionRecord]] = {}
    for record in records:
        by_user.setdefault(record.user_id, []).append(record)
    done: list[MissionRecord] = []
    for user_id, theirs in by_user.items():
        try:
            for store in prune:
                report.items_pruned += store.erase(user_id, [r.mission_id for r in theirs])
            done.extend(theirs)
        except Exception as exc:
            _failed(report, theirs, exc)
    return done


def _failed(report: RetentionReport, records: list[MissionRecord], exc: Exception) -> None:
    for record in records:
        report.failures[record.mission_id] = f"{type(exc).__name__}: {exc}"[:300]


class Retention:
    """The retention function: archive what its policy says is old enough, and log what could not be."""

    def __init__(
        self,
        *,
        missions: MissionStore,
        checkpoints: CheckpointStore,
        memory: LongTermMemory,
        policy: RetentionPolicy,
        prune: Sequence[PersonalStore] = (),
    ):
        self._missions, self._checkpoints, self._memory, self._policy = missions, checkpoints, memory, policy
        self._prune = tuple(prune)

    def run(self, now: Callable[[], datetime] | None = None) -> dict[str, Any]:
        report = archive_ended_missions(
            missions=self._missions,
            checkpoints=self._checkpoints,
            memory=self._memory,
            policy=self._policy,
            now=now,
            prune=self._prune,
        )
        for mission_id, why in report.failures.items():
            log.error("mission not archived", extra={"mission_id": mission_id, "reason": why})
        return {
            "archived": report.archived,
            "checkpoints_removed": report.checkpoints_removed,
            "items_pruned": report.items_pruned,
            "failures": report.failures,
        }


def summary(record: MissionRecord) -> dict[str, Any]:
    """What is worth keeping once the step-by-step state is gone."""
    return {
        "mission_id": record.mission_id,
        "capability": record.capability,
        "goal": record.goal[:2000],
        "outcome": record.status,
        "terminal_reason": record.terminal_reason,
        "result": _trimmed(record.result),
        "feedback": record.feedback,
        "created_at": record.created_at,
        "completed_at": record.completed_at,
        "counters": record.counters,
    }


def _trimmed(result: dict[str, Any] | None, limit: int = 20_000) -> Any:
    import json

    if result is None:
        return None
    text = json.dumps(result, default=str)
    return result if len(text) <= limit else {"truncated": text[:limit]}
