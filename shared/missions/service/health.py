"""Is the service up, and can it do its work? Liveness, readiness and the health of each tool.

- Liveness (`GET /health`) answers from the function alone: if it answers, the process is alive.
- Readiness (`GET /ready`) asks every dependency a request may need (each table, the bus, the model
  provider) with its cheapest call. Load balancers and uptime checks poll it, so the answer is kept for
  `ttl_seconds` (a burst of probes makes one round of calls) and every check runs even when one fails,
  so the body names every broken dependency, never only the first. No check's error leaks a credential:
  its message is redacted and cut short.
- Tool health is read from what the tool executor already records: each call's `executor.tool_completed`
  event (tool, status, duration). `tool_health` is a pure function over those events, so the API and
  tests compute the same numbers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from missions.core.mission.events import Event, EventType
from missions.core.redaction import redact

# a readiness check: returns when its dependency answered, raises (anything) when it did not
Check = Callable[[], None]

FAILED_STATUSES = frozenset({"error", "timeout"})  # a tool that broke; not_found and denied are answers


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    latency_ms: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "latency_ms": round(self.latency_ms, 3), "error": self.error}


class Readiness:
    """Runs the checks at most once per `ttl_seconds`; concurrent callers share one round."""

    def __init__(
        self,
        checks: Mapping[str, Check],
        *,
        ttl_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._checks = dict(checks)
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._checked_at: float | None = None
        self._results: dict[str, CheckResult] = {}

    def report(self) -> dict[str, Any]:
        """{"ready": bool, "checks": {name: {ok, latency_ms, error}}, "age_seconds": how old the answer is}."""
        with self._lock:
            now = self._clock()
            if self._checked_at is None or now - self._checked_at >= self._ttl:
                self._results = {name: _run(check) for name, check in sorted(self._checks.items())}
                self._checked_at = now
            results, age = self._results, now - self._checked_at
        return {
            "ready": all(result.ok for result in results.values()),
            "checks": {name: result.to_json() for name, result in results.items()},
            "age_seconds": round(age, 3),
        }


def _run(check: Check) -> CheckResult:
    started = time.perf_counter()
    try:
        check()
    except Exception as exc:  # any failure means "not ready"; the body says which and why
        message = redact(f"{type(exc).__name__}: {exc}")
        return CheckResult(False, (time.perf_counter() - started) * 1000, message[:300])
    return CheckResult(True, (time.perf_counter() - started) * 1000)


def tool_health(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Per tool: calls, failures (status error or timeout), error rate and latency (mean, p50, p95, max in
    milliseconds) over the `executor.tool_completed` events given. A call replayed from a stage's journal
    was not made again, so it is not counted twice. Sorted by tool id."""
    calls: dict[str, list[tuple[bool, float]]] = {}
    for event in events:
        if event.type is not EventType.TOOL_COMPLETED or event.payload.get("replayed"):
            continue
        tool = event.payload.get("tool")
        duration = event.payload.get("duration_ms")
        if not isinstance(tool, str) or isinstance(duration, bool) or not isinstance(duration, int | float):
            continue
        failed = event.payload.get("status") in FAILED_STATUSES
        calls.setdefault(tool, []).append((failed, float(duration)))
    report = []
    for tool, made in sorted(calls.items()):
        latencies = sorted(duration for _, duration in made)
        failures = sum(1 for failed, _ in made if failed)
        report.append(
            {
                "tool": tool,
                "calls": len(made),
                "errors": failures,
                "error_rate": round(failures / len(made), 4),
                "latency_ms": {
                    "mean": round(sum(latencies) / len(latencies), 3),
                    "p50": round(_percentile(latencies, 0.50), 3),
                    "p95": round(_percentile(latencies, 0.95), 3),
                    "max": round(latencies[-1], 3),
                },
            }
        )
    return report


def _percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil(n * fraction), at least the first
    return ordered[int(rank) - 1]


__all__ = ["Check", "CheckResult", "FAILED_STATUSES", "Readiness", "tool_health"]
