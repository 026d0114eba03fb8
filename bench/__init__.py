"""Benchmarks (`make bench`): measured figures, reported as ratios to baselines taken in the same run."""
