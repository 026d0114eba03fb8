"""Infrastructure cost of the demo mission: metered on the emulation, priced at AWS list prices.

Measured on the two levels the stack deploys and, in the same run, on the single-level layout (every
stage on the Standard machine), so the ratio is the two levels' saving on the same code. The target
(issue 14) is $0.0003 per demo mission; LangSmith Deployment charges $0.005 per run.

The mission really runs (moto executes the compiled state machine, the handlers run in-process)
under missions.local.metering.Meter; missions.core.cost.infrastructure prices what it counted. The LLM is the
offline scripted model, so tokens cost nothing here: this is the AWS bill alone. Lambda
durations are this machine's (warm, in-process), so that line is the least exact. DynamoDB write
units are also split per table and index, and per stage (the stage tasks the execution ran).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from missions.core.cost.figures import FIGURES
from missions.core.cost.infrastructure import estimate

PREDICTION_TOLERANCE = 0.10  # issue 37: the cost model predicts the metered dollars within 10%

TARGET_DOLLARS = 0.0003
LANGSMITH_DOLLARS_PER_RUN = 0.005
UNITS = {
    "step_functions": "Standard transitions",
    "express_requests": "Express executions",
    "express_duration": "Express GB-s",
    "lambda_requests": "requests",
    "lambda_compute": "GB-s",
    "dynamodb_reads": "read units",
    "dynamodb_writes": "write units",
    "s3_puts": "PUT requests",
    "s3_gets": "GET requests",
    "eventbridge": "events",
}
# who reads each table's writes: why each is kept (bench/goals.py prints them beside goal 1)
READERS = {
    "checkpoints": "a resume, a retry, time travel and the export; a running mission's progress",
    "missions": "the mission's page and its cancel, pause and answer; the listings by user and by capability "
    "(index copies), retention (by_status)",
    "usage": "each paid call, durable before anything after it can fail (the mission's cost, its bounds, the "
    "daily budget); the totals per agent version the metrics and the learning compare",
    "events": "the event stream the page and the CLI watch, and the export",
    "dispatch": "the per-user limit on running missions, and its queue",
}


def _metered(
    single_level: bool,
) -> tuple[Any, dict[str, dict[str, int]], int, dict[str, Any], dict[str, dict[str, float]]]:
    from bench.run import DEMO, ROOT
    from missions.local.emulation import LocalCloud
    from missions.local.metering import Meter

    with LocalCloud(["code_analysis"], single_level=single_level) as cloud, Meter(cloud) as meter:
        outcome = meter.run("code_analysis", DEMO, context={"repo": str(ROOT)})
        assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
        usage = meter.usage_for(outcome.mission_id)
        writes = meter.write_units_by_table()
        # the stages run (Lambda tasks; a segment's calls to Step Functions are not)
        stages = sum(
            e["type"] == "TaskStateEntered" and not e["stateEnteredEventDetails"]["name"].startswith("segment")
            for e in cloud.history(outcome.mission_id)
        )
        segments = cloud.segments(outcome.mission_id)
        segment_ms = sum((s["stopDate"] - s["startDate"]).total_seconds() * 1000 for s in segments if s.get("stopDate"))
        return usage, writes, stages, stage_figures(meter.by_source(), segment_ms), meter.write_floor_by_table()


def stage_figures(sources: dict[str, Any], segment_ms: float) -> dict[str, Any]:
    """The cost model's figures (missions.core.cost.figures) as this run measured them: per stage kind, the
    average invocation's; the start (the harness's calls) and the end (the status function)."""
    from missions.core.capability import registry
    from missions.core.cost.prediction import stage_kind

    pipeline = registry.load("code_analysis").pipeline
    by_function = {f"code-analysis-{name.replace('_', '-')}": name for name in pipeline.stage_names()}
    kinds: dict[str, list[Any]] = {}
    stage_ms = 0.0
    runs = 0
    for source, found in sources.items():
        stage = next((name for suffix, name in by_function.items() if source.endswith(suffix)), None)
        if stage is not None:
            kinds.setdefault(stage_kind(pipeline, stage), []).append(found)
            stage_ms += found.lambda_ms
            runs += found.usage.lambda_requests

    def average(found: list[Any], requests: float) -> dict[str, Any]:
        per = requests or 1

        def tables(attr: str) -> dict[str, float]:
            names = sorted({t for f in found for t in getattr(f, attr)})
            return {t: round(sum(getattr(f, attr).get(t, 0) for f in found) / per, 2) for t in names}

        return {
            "lambda_ms": round(sum(f.lambda_ms for f in found) / per, 1),
            "writes": tables("writes"),
            "reads": tables("reads"),
        }

    measured: dict[str, Any] = {
        kind: average(found, sum(f.usage.lambda_requests for f in found)) for kind, found in sorted(kinds.items())
    }
    measured["start"] = average([sources["harness"]], 1) if "harness" in sources else {}
    status = [found for source, found in sources.items() if source.endswith("-status")]
    measured["end"] = average(status, 1) if status else {}
    measured["express_overhead_ms"] = round((segment_ms - stage_ms) / runs, 1) if runs else 0.0
    return measured


def _table_figures() -> dict[str, Any]:
    """The figures the cost model uses now, shaped as `stage_figures`' (to print side by side)."""

    def shown(f: Any) -> dict[str, Any]:
        return {"lambda_ms": f.lambda_ms, "writes": f.writes, "reads": f.reads}

    return {
        **{kind: shown(f) for kind, f in FIGURES.stages.items()},
        "start": shown(FIGURES.start),
        "end": shown(FIGURES.end),
        "express_overhead_ms": FIGURES.express_overhead_ms,
    }


def run() -> dict[str, Any]:
    from missions.core.capability import registry
    from missions.core.cost.prediction import predict

    usage, writes, stages, measured, floor = _metered(single_level=False)
    single = estimate(_metered(single_level=True)[0])
    cost = estimate(usage)
    floor_units = sum(f["units"] for f in floor.values())
    # the same mission with every write at its unrounded units: the floor of what it writes
    floor_dollars = cost.total - cost.lines["dynamodb_writes"] * (1 - floor_units / usage.dynamodb_write_units)
    # the same mission keeping only what a resume needs: its checkpoints and its record (no index copy of
    # it), no other write and no read at all
    kept_units = sum(writes["checkpoints"].values()) + writes["missions"]["table"]
    resume_floor = (
        cost.total
        - cost.lines["dynamodb_reads"]
        - cost.lines["dynamodb_writes"] * (1 - kept_units / usage.dynamodb_write_units)
    )
    predicted = predict(registry.load("code_analysis").pipeline)
    return {
        "mission": "code_analysis demo (offline model: no LLM cost)",
        "region": "us-east-1",
        "prices_as_of": cost.prices_as_of,
        "lambda_architecture": cost.architecture,
        "usage": {name: round(value, 6) for name, value in usage.as_dict().items()},
        "lines": {
            line: {"quantity": cost.quantities[line], "unit": UNITS[line], "dollars": round(dollars, 9)}
            for line, dollars in cost.lines.items()
        },
        "stages": stages,
        "dynamodb_writes_by_table": {
            table: {"total": sum(parts.values()), "per_stage": round(sum(parts.values()) / stages, 2), **parts}
            for table, parts in writes.items()
        },
        "dynamodb_writes_per_stage": round(usage.dynamodb_write_units / stages, 2),
        "dynamodb_write_floor": {
            "items": int(sum(f["items"] for f in floor.values())),
            "units": round(floor_units, 1),
            "units_per_stage": round(floor_units / stages, 2),
            "by_table": {
                table: {"items": int(f["items"]), "units": round(f["units"], 1)} for table, f in floor.items()
            },
        },
        "floor_dollars_per_mission": round(floor_dollars, 9),
        "resume_floor_dollars_per_mission": round(resume_floor, 9),
        "total_dollars_per_mission": round(cost.total, 9),
        "total_dollars_per_1000_missions": round(cost.total * 1000, 6),
        "single_level_dollars_per_mission": round(single.total, 9),
        "single_level_transitions": single.quantities["step_functions"],
        "ratio_to_single_level": round(cost.total / single.total, 3),
        "ratio_to_langsmith_run": round(cost.total / LANGSMITH_DOLLARS_PER_RUN, 4),
        "target_dollars": TARGET_DOLLARS,
        "predicted_dollars_per_mission": round(predicted.typical.total, 9),
        "predicted_stages": len(predicted.walks["typical"].invocations),
        "prediction_ratio": round(predicted.typical.total / cost.total, 3),
        "predicted_lines": {line: round(dollars, 9) for line, dollars in predicted.typical.lines.items()},
        "figures_measured": measured,
        "figures_in_table": _table_figures(),
    }


def checks(result: dict[str, Any]) -> dict[str, bool]:
    return {
        f"demo mission <= ${TARGET_DOLLARS} infra": result["total_dollars_per_mission"] <= TARGET_DOLLARS,
        f"cost prediction within {PREDICTION_TOLERANCE:.0%} of metered": abs(result["prediction_ratio"] - 1)
        <= PREDICTION_TOLERANCE,
    }


def table(result: dict[str, Any]) -> Table:
    """The breakdown `make bench` prints."""
    rows = Table(
        "infra cost per demo mission",
        "quantity",
        "dollars",
        title=f"us-east-1 list prices as of {result['prices_as_of']}, Lambda {result['lambda_architecture']}",
    )
    for line, figures in result["lines"].items():
        quantity = figures["quantity"]
        shown = f"{quantity:.3f}" if isinstance(quantity, float) and not quantity.is_integer() else f"{quantity:g}"
        rows.add_row(line, f"{shown} {figures['unit']}", f"${figures['dollars']:.7f}")
    for name, split in result["dynamodb_writes_by_table"].items():
        indexes = ", ".join(f"{part} {units}" for part, units in split.items() if part not in ("total", "per_stage"))
        rows.add_row(f"  {name}", f"{split['total']} ({split['per_stage']}/stage): {indexes}", "")
    rows.add_row(
        f"  dynamodb writes per stage ({result['stages']} stages)", f"{result['dynamodb_writes_per_stage']}", ""
    )
    floor = result["dynamodb_write_floor"]
    rows.add_row(
        "  the same writes, none rounded up to a whole KB",
        f"{floor['units']} ({floor['units_per_stage']}/stage) in {floor['items']} item writes",
        "",
    )
    rows.add_row("total per mission", "", f"${result['total_dollars_per_mission']:.6f}")
    rows.add_row("  ... with those writes unrounded", "", f"${result['floor_dollars_per_mission']:.6f}")
    rows.add_row(
        "  ... keeping only its record and checkpoints (no other write, no read)",
        "",
        f"${result['resume_floor_dollars_per_mission']:.6f}",
    )
    rows.add_row(
        "single-level layout, same run",
        f"{result['single_level_transitions']:g} Standard transitions",
        f"${result['single_level_dollars_per_mission']:.6f} ({result['ratio_to_single_level']}x)",
    )
    rows.add_row("total per 1,000 missions", "", f"${result['total_dollars_per_1000_missions']:.2f}")
    rows.add_row(
        f"cost model's prediction ({result['predicted_stages']} stages)",
        f"{result['prediction_ratio']}x metered",
        f"${result['predicted_dollars_per_mission']:.6f}",
    )
    for kind, metered in result["figures_measured"].items():
        rows.add_row(f"  figures {kind}: metered", str(metered), "")
        rows.add_row("           in missions.core.cost.figures", str(result["figures_in_table"].get(kind)), "")
    return rows
