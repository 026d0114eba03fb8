"""Benchmarks (`make bench`): measured figures, reported as ratios to baselines taken in the same run."""

import statistics
import time
from collections.abc import Callable
from typing import Any


def ratio_rows(results: dict[str, Any], base: str, labels: dict[str, str], digits: int = 3) -> list[tuple[str, str]]:
    """Table rows "<label>: <name>_ms = <name>_ratio x <base>" for each figure `labels` names."""
    return [
        (label, f"{results[f'{name}_ms']:.{digits + 1}f} ms = {results[f'{name}_ratio']:.3f}{base}")
        for name, label in labels.items()
    ]


def median_ms(action: Callable[[], Any], samples: int, after: Callable[[Any], None] | None = None) -> float:
    """The median of `action`'s times in milliseconds; `after` (untimed) lets what it started settle before the
    next sample, so no sample shares the machine with what the ones before it started."""
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        made = action()
        times.append((time.perf_counter() - started) * 1000)
        if after is not None:
            after(made)
    return statistics.median(times)
