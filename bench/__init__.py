"""Benchmarks (`make bench`): measured figures, reported as ratios to baselines taken in the same run."""

from typing import Any


def ratio_rows(results: dict[str, Any], base: str, labels: dict[str, str], digits: int = 3) -> list[tuple[str, str]]:
    """Table rows "<label>: <name>_ms = <name>_ratio x <base>" for each figure `labels` names."""
    return [
        (label, f"{results[f'{name}_ms']:.{digits + 1}f} ms = {results[f'{name}_ratio']:.3f}{base}")
        for name, label in labels.items()
    ]
