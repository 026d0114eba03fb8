"""How a capability is doing: rates and averages over its recent missions.

A pure function over mission records (no I/O), so the API, the CLI and tests compute exactly the
same numbers; fetching the records is the job of a MissionsByCapability (missions.ports.missions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from missions.core.mission.status import TERMINAL, MissionStatus
from missions.ports.learnings import Learnings
from missions.ports.missions import MissionRecord, MissionSummary

COMPLEXITY_LEVELS = (1, 2, 3)


def _parse(timestamp: str | None) -> datetime | None:
    if not timestamp:
        return None
    try:
        parsed = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def window_start(now: datetime, days: int) -> str:
    """The first instant of the window, formatted like `created_at` so it compares as a string too
    (the by_capability index sorts created_at as text)."""
    return (_aware(now) - timedelta(days=days)).astimezone(UTC).isoformat(timespec="milliseconds")


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _cost(mission: MissionRecord | MissionSummary) -> float:
    return mission.cost_usd


def _level(complexity: int) -> int:
    return min(max(int(complexity), COMPLEXITY_LEVELS[0]), COMPLEXITY_LEVELS[-1])


def mission_metrics(
    missions: Sequence[MissionRecord | MissionSummary],
    *,
    learnings: Learnings | None,
    complexity_of: Callable[[str], int],
    now: datetime,
    days: int,
) -> dict[str, Any]:
    """Metrics of the missions created in the last `days` days before `now`.

    Rates are over finished missions (completed, failed or cancelled): a running mission has no
    outcome yet. The average cost is over finished missions too, since a running one's cost is
    still growing. Completion times are grouped by the goal's complexity (1..3, `complexity_of`
    applied to the goal; out-of-range levels are clamped). Every average or rate is None when
    nothing was there to average. Keys of `time_to_completion` are strings, as in JSON.
    """
    if days < 1:
        raise ValueError("days must be at least 1")
    until = _aware(now)
    since = until - timedelta(days=days)
    window: list[MissionRecord | MissionSummary] = []
    for mission in missions:
        created = _parse(mission.created_at)
        if created is not None and since <= created <= until:
            window.append(mission)

    finished = [m for m in window if m.status in TERMINAL]
    by_status: dict[str, int] = {}
    for mission in window:
        by_status[mission.status] = by_status.get(mission.status, 0) + 1
    completed = by_status.get(MissionStatus.COMPLETED, 0)
    failed = by_status.get(MissionStatus.FAILED, 0)
    with_feedback = [m for m in finished if m.feedback is not None]
    ratings = [
        float(m.feedback["quality"])
        for m in window
        if m.feedback is not None
        and isinstance(m.feedback.get("quality"), int | float)
        and not isinstance(m.feedback.get("quality"), bool)
    ]

    durations: dict[int, list[float]] = {level: [] for level in COMPLEXITY_LEVELS}
    for mission in window:
        if mission.status != MissionStatus.COMPLETED:
            continue
        created, done = _parse(mission.created_at), _parse(mission.completed_at)
        if created is None or done is None:
            continue
        durations[_level(complexity_of(mission.goal))].append(max(0.0, (done - created).total_seconds()))

    return {
        "window": {"days": days, "since": window_start(until, days), "until": until.isoformat(timespec="milliseconds")},
        "count": len(window),
        "finished": len(finished),
        "by_status": dict(sorted(by_status.items())),
        "completion_rate": _ratio(completed, len(finished)),
        "error_rate": _ratio(failed, len(finished)),
        "feedback_rate": _ratio(len(with_feedback), len(finished)),
        "average_rating": _mean(ratings),
        "rating_count": len(ratings),
        "time_to_completion": {
            str(level): {"count": len(values), "average_seconds": _mean(values)} for level, values in durations.items()
        },
        "average_cost_usd": _mean([_cost(m) for m in finished]),
        "total_cost_usd": sum(_cost(m) for m in window),
        "learnings": learnings.summary() if learnings is not None else None,
    }
