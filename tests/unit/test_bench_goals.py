"""The cost goals `make bench` reports (bench/goals.py): each met or missed by its figure, a missed one
with its measured floor."""

from __future__ import annotations

import copy
from typing import Any

from bench.goals import goals

RESULTS: dict[str, Any] = {
    "infra_cost": {
        "usage": {"state_transitions": 3, "dynamodb_write_units": 44},
        "lines": {"step_functions": {"dollars": 0.000075}},
        "total_dollars_per_mission": 0.0001,
        "floor_dollars_per_mission": 0.000095,
        "resume_floor_dollars_per_mission": 0.000091,
        "dynamodb_writes_per_stage": 4.0,
        "dynamodb_write_floor": {"items": 40, "units": 42.0, "units_per_stage": 3.82},
        "dynamodb_writes_by_table": {
            "checkpoints": {"total": 22, "per_stage": 2.0},
            "events": {"total": 11, "per_stage": 1.0},
            "missions": {"total": 11, "per_stage": 1.0},
        },
        "stages": 11,
        "prediction_ratio": 1.09,
    },
    "long_mission": {"standard_transitions": 3},
    "runner_scaling": {"loop": {"time_ratio_last_first": 0.8}, "chain": {"time_ratio_last_first": 1.5}},
    "runner_vs_langgraph": {
        size: {
            "ratio": 0.25,
            "unwatched_ratio": 0.2,
            "boundary_ms_per_stage": 0.02,
            "in_process_ratio": 0.15,
        }
        for size in ("10", "100")
    },
    "imports": {"llm_import_ratio": 2.0},
}
CHECKS = {"loop: per-stage time": True, "chain: per-stage time": True, "chain: checkpoint bytes": True}


def test_figures_on_their_targets_meet_every_goal():
    # Given figures on each target (the prediction just inside it), When the goals are read, Then every
    # one is met
    found = goals(RESULTS, CHECKS)
    assert [goal.number for goal in found] == [1, 1, 1, 2, 3, 4, 5]
    assert all(goal.met for goal in found)


def test_a_figure_past_its_target_misses_its_goal_and_says_its_floor():
    # Given the demo's writes and dollars past their targets, the runner past 0.25x at 100 stages, a
    # shape's cost growing, and the prediction off by more than 10%
    results = copy.deepcopy(RESULTS)
    results["infra_cost"] |= {"total_dollars_per_mission": 0.00014, "dynamodb_writes_per_stage": 7.45}
    results["infra_cost"]["prediction_ratio"] = 0.88
    results["runner_vs_langgraph"]["100"]["ratio"] = 0.4
    results["long_mission"]["standard_transitions"] = 4
    # When the goals are read
    found = {goal.goal: goal for goal in goals(results, {**CHECKS, "chain: per-stage time": False})}
    # Then each of those is missed, and the cost goals name their floors
    missed = [goal for goal in found.values() if not goal.met]
    assert len(missed) == 6 and [goal.number for goal in found.values() if goal.met] == [4]
    dollars, writes, runner = (next(g for g in missed if text in g.goal) for text in ("$", "write units", "runner"))
    assert (
        dollars.floor.startswith("$0.000091 keeping nothing but what a resume needs") and "$0.000075" in dollars.floor
    )
    assert "$0.000095 with all its writes" in dollars.floor
    assert writes.floor.startswith("3.82 a stage") and "40 item writes" in writes.floor
    assert "checkpoints 2.0 (a resume" in writes.floor and "events 1.0 (the event stream" in writes.floor
    assert "0.2x at 10, 0.2x at 100" in runner.floor and "0.15x, 0.15x" in runner.floor
