"""The cost goals (issue 37), read from the figures the other benchmarks measured in the same run.

Each goal is met or missed; a missed one shows its measured floor next to it, and why the runtime keeps
what stands between the two (docs/architecture.md, "How a mission runs", has the full account).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rich.table import Table

from bench.cost import PREDICTION_TOLERANCE, READERS

DOLLARS = 0.0001  # the demo mission's infrastructure
STANDARD_TRANSITIONS = 3  # per mission, whatever its length
WRITE_UNITS_PER_STAGE = 4.0
LANGGRAPH_RATIO = 0.25  # the runner's stage over LangGraph's step with its InMemorySaver
LLM_IMPORT_RATIO = 2.0  # an LLM stage's cold import over `import boto3`


@dataclass(frozen=True)
class Goal:
    number: int
    goal: str
    measured: str
    met: bool
    floor: str = ""  # for a missed goal: the measured floor, and what keeps the runtime above the goal


def goals(results: dict[str, Any], checks: dict[str, bool]) -> list[Goal]:
    cost, runner, imports = results["infra_cost"], results["runner_vs_langgraph"], results["imports"]
    transitions = cost["usage"]["state_transitions"]
    long_transitions = results["long_mission"]["standard_transitions"]
    floor = cost["dynamodb_write_floor"]
    writes_per_stage = cost["dynamodb_writes_per_stage"]
    by_table = cost["dynamodb_writes_by_table"]
    standard_dollars = cost["lines"]["step_functions"]["dollars"]
    scaling = {name: ok for name, ok in checks.items() if name.startswith(("loop:", "chain:", "moto:", "moto_chain:"))}
    shapes = results["runner_scaling"]
    ratios = {size: r["ratio"] for size, r in runner.items()}
    return [
        Goal(
            1,
            f"the demo mission at most ${DOLLARS} of infrastructure",
            f"${cost['total_dollars_per_mission']:.6f}",
            cost["total_dollars_per_mission"] <= DOLLARS,
            f"${cost['resume_floor_dollars_per_mission']:.6f} keeping nothing but what a resume needs (its "
            f"{transitions} Standard transitions, ${standard_dollars:.6f}: the start, the one wait on its chain of "
            "Express segments, the end; its Lambda and Express charges; its checkpoints and its record, no index "
            f"copy, no other write and no read); ${cost['floor_dollars_per_mission']:.6f} with all its writes, "
            "none rounded up to a whole KB",
        ),
        Goal(
            1,
            f"at most {STANDARD_TRANSITIONS} Standard transitions a mission, whatever its length",
            f"{transitions} (the demo), {long_transitions} (5,000 stages)",
            max(transitions, long_transitions) <= STANDARD_TRANSITIONS,
        ),
        Goal(
            1,
            f"at most {WRITE_UNITS_PER_STAGE:g} DynamoDB write units a stage",
            f"{writes_per_stage} ({cost['usage']['dynamodb_write_units']:g} for {cost['stages']} stages)",
            writes_per_stage <= WRITE_UNITS_PER_STAGE,
            f"{floor['units_per_stage']} a stage: the same {floor['items']} item writes, none rounded up to a "
            "whole KB. Each table's writes have a reader: "
            + "; ".join(f"{table} {split['per_stage']} ({READERS[table]})" for table, split in by_table.items()),
        ),
        Goal(
            2,
            "constant cost per stage in every shape: hop 1,000 within 1.5x of hop 10, checkpoint bytes flat",
            ", ".join(
                f"{kind} {figures['time_ratio_last_first']}x"
                for kind, figures in shapes.items()
                if "time_ratio_last_first" in figures
            ),
            bool(scaling) and all(scaling.values()),
        ),
        Goal(
            3,
            f"the runner at most {LANGGRAPH_RATIO}x LangGraph's InMemorySaver per stage at 10 and 100 stages",
            ", ".join(f"{ratio}x at {size}" for size, ratio in ratios.items()),
            all(ratio <= LANGGRAPH_RATIO for ratio in ratios.values()),
            "doing only a LangGraph step's work (no mission record, no event stream): "
            + ", ".join(f"{r['unwatched_ratio']}x at {size}" for size, r in runner.items())
            + "; of it, carrying the envelope across the stage's Lambda boundary, which an in-process step never "
            "does, "
            + ", ".join(f"{r['boundary_ms_per_stage']} ms" for r in runner.values())
            + " (the rest "
            + ", ".join(f"{r['in_process_ratio']}x" for r in runner.values())
            + "); the rest is the stage's read of the mission's record (a cancel, a pause, the user's notes) and "
            "its events, which LangGraph does not keep",
        ),
        Goal(
            4,
            f"an LLM stage's cold import at most {LLM_IMPORT_RATIO:g}x `import boto3`",
            f"{imports['llm_import_ratio']}x",
            imports["llm_import_ratio"] <= LLM_IMPORT_RATIO,
        ),
        Goal(
            5,
            f"the cost model's prediction within {PREDICTION_TOLERANCE:.0%} of the metered mission",
            f"{cost['prediction_ratio']}x",
            abs(cost["prediction_ratio"] - 1) <= PREDICTION_TOLERANCE,
        ),
    ]


def as_json(found: list[Goal]) -> list[dict[str, Any]]:
    return [asdict(goal) for goal in found]


def table(found: list[Goal]) -> Table:
    rows = Table("goal (issue 37)", "measured", "met", "floor, when missed", title="the cost goals")
    for goal in found:
        rows.add_row(
            f"{goal.number}. {goal.goal}", goal.measured, "[green]yes[/]" if goal.met else "[red]no[/]", goal.floor
        )
    return rows
