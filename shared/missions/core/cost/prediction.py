"""What one mission of a capability will cost in AWS infrastructure, predicted before it runs.

Pure (no I/O, no SDK). Two steps:

1. The path: which stages a mission runs, from the pipeline's routing graph. `min` is the shortest way from
   the first stage to the final one; `typical` follows each stage's `default_next`, except that a
   limited edge (`edge_limits`) is taken as often as its `typical_count` says (0 when it says nothing);
   `max` is the longest way the edge limits allow, cut at `max_agent_hops` (the machine's own guard ends
   the mission through its final stage there). A pipeline without branches or loops has one path.
2. The machine: each path is walked through the compiled state machines (both levels,
   missions.core.pipeline.compiler), as Step Functions would run them: Choice rules are evaluated on the
   mission's routing (`$.envelope.next_stage`), its hop count and the segment's end (no bound is reached
   and nobody is asked, unless the path is cut by the hop guard), Pass states update the `asl` counters.
   That counts the Standard transitions (billed), the Express segments and their transitions (not
   billed), and every Lambda invocation of a stage (a Parallel's branches and a Map's items too).

Each invocation is then priced with the per-stage figures (missions.core.cost.figures, measured by
`make bench`) of its stage's kind, plus the mission's start and end, into a `Usage` that
missions.core.cost.infrastructure.estimate prices at list prices.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from missions.core.cost.figures import FIGURES, Figures, StageFigures
from missions.core.cost.infrastructure import PRICES, CostEstimate, Prices, Usage, estimate, express_gb_seconds
from missions.core.cost.infrastructure import lambda_gb_seconds as _gb_seconds
from missions.core.pipeline.compiler import MissionMachines, compile_mission, segment_seconds, two_level
from missions.core.pipeline.config import PipelineConfig

PATHS = ("min", "typical", "max")
_MATH_ADD = re.compile(r"^States\.MathAdd\(\$\.asl\.(\w+),\s*(-?\d+)\)$")
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "StringEquals": operator.eq,
    "BooleanEquals": operator.eq,
    "NumericEquals": operator.eq,
    "NumericGreaterThan": operator.gt,
    "NumericGreaterThanEquals": operator.ge,
    "NumericLessThan": operator.lt,
    "NumericLessThanEquals": operator.le,
}
_WALK_LIMIT = 100_000  # states: a walk that does not end is a bug here, not a mission that costs more


@dataclass(frozen=True)
class PredictionInputs:
    """What the prediction assumes beyond the machine and the figures."""

    fan_out_items: int | None = None  # items of a fan-out (a Map); None: its max_concurrency
    llm_ms: float = 0.0  # a model call's latency, billed as the stage's Lambda time (0: the offline model)


@dataclass(frozen=True)
class Walk:
    """One path through the machines: what a mission taking it runs."""

    stages: list[str]  # the routing path (stage or group names)
    invocations: list[str]  # every stage Lambda invocation, in order (a finalize counts for the final stage)
    standard_transitions: int
    express_transitions: int
    segments: list[float]  # each segment's predicted duration in ms


@dataclass(frozen=True)
class Prediction:
    capability: str
    two_level: bool
    walks: dict[str, Walk]  # "min", "typical", "max"
    usages: dict[str, Usage]
    costs: dict[str, CostEstimate]
    assumptions: list[str] = field(default_factory=list)

    @property
    def typical(self) -> CostEstimate:
        return self.costs["typical"]

    def as_dict(self) -> dict[str, Any]:
        cost = self.typical
        return {
            "capability": self.capability,
            "layout": "two levels (Standard mission, Express segments)" if self.two_level else "one Standard machine",
            "prices_as_of": cost.prices_as_of,
            "lambda_architecture": cost.architecture,
            "lines": {
                line: {"quantity": round(cost.quantities[line], 6), "dollars": round(dollars, 9)}
                for line, dollars in cost.lines.items()
            },
            "dollars_per_mission": round(cost.total, 9),
            "dollars_per_1000_missions": round(cost.total * 1000, 6),
            "range": {
                name: {
                    "stages": len(self.walks[name].invocations),
                    "path": self.walks[name].stages,
                    "standard_transitions": self.walks[name].standard_transitions,
                    "segments": len(self.walks[name].segments),
                    "dollars_per_mission": round(self.costs[name].total, 9),
                }
                for name in PATHS
            },
            "assumptions": self.assumptions,
        }


def stage_kind(pipeline: PipelineConfig, stage: str) -> str:
    """The figures' kind of a stage: "final", "llm" (it calls a model), else "tools"."""
    if stage == pipeline.final:
        return "final"
    return "llm" if pipeline.agent(stage).has_llm else "tools"


def predict(
    pipeline: PipelineConfig,
    figures: Figures = FIGURES,
    inputs: PredictionInputs = PredictionInputs(),
    prices: Prices = PRICES,
    architecture: str = "arm64",
) -> Prediction:
    machines = compile_mission(pipeline)
    walks = {name: walk(machines, pipeline, path, inputs, figures) for name, path in paths(pipeline).items()}
    usages = {name: usage(pipeline, w, figures, inputs) for name, w in walks.items()}
    return Prediction(
        capability=pipeline.name,
        two_level=machines.segment is not None,
        walks=walks,
        usages=usages,
        costs={name: estimate(u, prices, architecture) for name, u in usages.items()},
        assumptions=_assumptions(pipeline, walks, figures, inputs),
    )


# --------------------------------------------------------------------------- paths


def _successors(pipeline: PipelineConfig, node: str) -> list[str]:
    """Where the routing may send a mission after `node` (a stage, or a parallel group: its join)."""
    if node in pipeline.group_names():
        first = pipeline.group_of(node) or []
        join = pipeline.agent(first[0]).default_next
        return [join] if join else [pipeline.final]
    return [target for target in pipeline.targets_of(node)]


def _limited(pipeline: PipelineConfig, source: str, target: str, counts: dict[tuple[str, str], int], cap: str) -> bool:
    """Whether the edge may still be taken: its limit (`cap` "max_count" or "typical_count") not reached."""
    limit = pipeline.edge_limit(source, target)
    if limit is None:
        return True
    allowed = limit.max_count if cap == "max_count" else (limit.typical_count or 0)
    return counts.get((source, target), 0) < allowed


def paths(pipeline: PipelineConfig) -> dict[str, list[str]]:
    """The min, typical and max routing paths (stage or group names), each ending at the final stage."""
    return {"min": _shortest(pipeline), "typical": _typical(pipeline), "max": _longest(pipeline)}


def _shortest(pipeline: PipelineConfig) -> list[str]:
    frontier, seen = [[pipeline.start]], {pipeline.start}
    while frontier:
        path = frontier.pop(0)
        if path[-1] == pipeline.final:
            return path
        for target in _successors(pipeline, path[-1]):
            limit = pipeline.edge_limit(path[-1], target)
            if target not in seen and not (limit is not None and limit.max_count == 0):
                seen.add(target)
                frontier.append([*path, target])
    return [pipeline.start, pipeline.final]


def _typical(pipeline: PipelineConfig) -> list[str]:
    path, counts = [pipeline.start], {}  # type: ignore[var-annotated]
    while path[-1] != pipeline.final and len(path) < pipeline.bounds.max_agent_hops:
        here = path[-1]
        targets = _successors(pipeline, here)
        looped = [t for t in targets if pipeline.edge_limit(here, t) and _limited(pipeline, here, t, counts, "typical")]
        default = here not in pipeline.group_names() and pipeline.agent(here).default_next
        free = [t for t in targets if pipeline.edge_limit(here, t) is None]
        target = looped[0] if looped else (default if default in free else (free or [pipeline.final])[0])
        counts[(here, target)] = counts.get((here, target), 0) + 1
        path.append(target)
    return path if path[-1] == pipeline.final else [*path, pipeline.final]


def _longest(pipeline: PipelineConfig) -> list[str]:
    """The longest walk the edge limits allow (every cycle has a limited edge, so it ends)."""
    hops = pipeline.bounds.max_agent_hops
    best: dict[tuple[str, tuple[tuple[tuple[str, str], int], ...]], list[str]] = {}

    def longest(node: str, counts: dict[tuple[str, str], int], depth: int) -> list[str]:
        if node == pipeline.final or depth >= hops:
            return [node]
        key = (node, tuple(sorted(counts.items())))
        if key in best:
            return best[key]
        found: list[str] = [node, pipeline.final]
        for target in _successors(pipeline, node):
            if not _limited(pipeline, node, target, counts, "max_count"):
                continue
            after = dict(counts)
            if pipeline.edge_limit(node, target) is not None:
                after[(node, target)] = after.get((node, target), 0) + 1
            tail = longest(target, after, depth + 1)
            if len(tail) + 1 > len(found):
                found = [node, *tail]
        best[key] = found
        return found

    return longest(pipeline.start, {}, 1)


# --------------------------------------------------------------------------- the machine


@dataclass
class _State:
    """What the walk tracks of the execution state: the routing and the `asl` counters."""

    path: list[str]
    at: int = 0  # the next routing target in `path`
    asl: dict[str, Any] = field(default_factory=dict)
    invocations: list[tuple[str, int]] = field(default_factory=list)  # (stage, segment index or -1)
    segment: int = -1

    @property
    def next_stage(self) -> str | None:
        return self.path[self.at] if self.at < len(self.path) else None

    def value(self, variable: str) -> Any:
        if variable == "$.envelope.next_stage":
            return self.next_stage
        if variable.startswith("$.asl."):
            return self.asl.get(variable.removeprefix("$.asl."))
        return None  # counters, pause, yield: no bound reached, nobody asked


def _holds(rule: dict[str, Any], state: _State) -> bool:
    """A Choice rule, evaluated on what the walk tracks (anything else is absent)."""
    if "And" in rule:
        return all(_holds(r, state) for r in rule["And"])
    if "Or" in rule:
        return any(_holds(r, state) for r in rule["Or"])
    if "Not" in rule:
        return not _holds(rule["Not"], state)
    value = state.value(rule["Variable"])
    for test, operand in rule.items():
        if test in ("Variable", "Next"):
            continue
        if test == "IsPresent":
            return bool((value is not None) == operand)
        if value is None:
            return False
        expected = state.value(operand) if test.endswith("Path") else operand
        if expected is None:
            return False
        compare = _COMPARE.get(test.removesuffix("Path"))
        return compare is not None and bool(compare(value, expected))
    return False


def _asl_parameters(parameters: dict[str, Any], state: _State) -> dict[str, Any]:
    """A Pass's Parameters written to `$.asl`: paths into it, States.MathAdd on it, literals."""
    values: dict[str, Any] = {}
    for key, value in parameters.items():
        if not key.endswith(".$"):
            values[key] = value
            continue
        added = _MATH_ADD.match(str(value))
        if added:
            values[key[:-2]] = int(state.asl.get(added.group(1)) or 0) + int(added.group(2))
        elif str(value).startswith("$.asl."):
            values[key[:-2]] = state.asl.get(str(value).removeprefix("$.asl."))
    return values


def _stage_of(state: dict[str, Any]) -> str | None:
    parameters = state.get("Parameters") or state.get("ItemSelector") or {}
    stage = parameters.get("stage") if isinstance(parameters, dict) else None
    return stage if isinstance(stage, str) else None


def _run(
    definition: dict[str, Any],
    state: _State,
    machines: MissionMachines,
    inputs: PredictionInputs,
    counted: list[int],
) -> Iterator[str]:
    """Walk one machine from its start to its end, counting each state entered in `counted[0]`;
    yields the names of the segments started (a Task that starts the segment machine)."""
    name: str | None = definition["StartAt"]
    for _ in range(_WALK_LIMIT):
        if name is None:
            return
        node = definition["States"][name]
        counted[0] += 1
        kind = node["Type"]
        if kind == "Choice":
            chosen = next((c["Next"] for c in node.get("Choices", []) if _holds(c, state)), node.get("Default"))
            if state.next_stage is not None and any(
                c.get("Variable") == "$.envelope.next_stage"
                and c.get("StringEquals") == state.next_stage
                and c["Next"] == chosen
                for c in node.get("Choices", [])
            ):
                state.at += 1  # the routing went where the path says
            name = chosen
            continue
        if kind == "Pass":
            if node.get("ResultPath") == "$.asl" and "Parameters" in node:
                state.asl = _asl_parameters(node["Parameters"], state)
            elif node.get("ResultPath") == "$.asl.exit":
                state.asl["exit"] = node.get("Result")
        elif kind == "Task" and str(node.get("Resource", "")).startswith("arn:aws:states:::states:startExecution"):
            yield name
        elif kind == "Task":
            stage = _stage_of(node)
            if stage is not None:
                state.invocations.append((stage, state.segment))
                if state.next_stage == stage and (node.get("Parameters") or {}).get("mode") == "run":
                    state.at += 1  # a join stage entered straight from its group
        elif kind == "Parallel":
            for branch in node["Branches"]:
                yield from _run(branch, state, machines, inputs, counted)
        elif kind == "Map":
            stage = _stage_of(node)
            fan_out = machines_fan_out(machines, stage)
            items = inputs.fan_out_items or fan_out
            for _item in range(items):
                yield from _run(node["ItemProcessor"], state, machines, inputs, counted)
        if node.get("End") or kind in ("Succeed", "Fail"):
            return
        name = node.get("Next")
    raise RuntimeError(f"the walk through {definition.get('Comment', 'a machine')} did not end")


def machines_fan_out(machines: MissionMachines, stage: str | None) -> int:
    """A Map's MaxConcurrency, as the stage's fan-out declares it (the default items of a fan-out)."""
    for node in machines.stages["States"].values():
        if node["Type"] == "Map" and _stage_of(node) == stage:
            return int(node.get("MaxConcurrency") or 1)
    return 1


def walk(
    machines: MissionMachines,
    pipeline: PipelineConfig,
    path: list[str],
    inputs: PredictionInputs = PredictionInputs(),
    figures: Figures = FIGURES,
) -> Walk:
    """Run `path` through the machines (see the module's docstring)."""
    state = _State(path=path, asl={"hops": 0, "max_hops": pipeline.bounds.max_agent_hops - 1, "restarts": 0})
    standard, express = [0], [0]
    for _segment in _run(machines.mission, state, machines, inputs, standard):
        assert machines.segment is not None
        chained = True
        while chained:  # a segment that continues starts the next itself: the mission's machine waits on
            state.segment += 1
            chained = sum(1 for _next in _run(machines.segment, state, machines, inputs, express)) > 0
    durations = [0.0] * (state.segment + 1)
    for stage, segment in state.invocations:
        if segment >= 0:
            durations[segment] += _lambda_ms(pipeline, stage, figures, inputs) + figures.express_overhead_ms
    return Walk(
        stages=path,
        invocations=[stage for stage, _ in state.invocations],
        standard_transitions=standard[0],
        express_transitions=express[0],
        segments=durations if machines.segment is not None else [],
    )


# --------------------------------------------------------------------------- pricing


def _figures(pipeline: PipelineConfig, stage: str, figures: Figures) -> StageFigures:
    return figures.stages[stage_kind(pipeline, stage)]


def _lambda_ms(pipeline: PipelineConfig, stage: str, figures: Figures, inputs: PredictionInputs) -> float:
    llm = inputs.llm_ms if pipeline.agent(stage).has_llm else 0.0
    return _figures(pipeline, stage, figures).lambda_ms + llm


def _counted(figures: StageFigures) -> Usage:
    return Usage(
        lambda_requests=math.ceil(figures.lambda_requests),
        dynamodb_write_units=figures.write_units,
        dynamodb_read_units=figures.read_units,
        s3_puts=round(figures.s3_puts),
        s3_gets=round(figures.s3_gets),
        events_published=round(figures.events),
    )


def usage(
    pipeline: PipelineConfig, w: Walk, figures: Figures = FIGURES, inputs: PredictionInputs = PredictionInputs()
) -> Usage:
    """The usage of a mission taking the walk `w`."""
    total = _counted(figures.start) + _counted(figures.end)
    total = total + Usage(lambda_gb_seconds=_gb_seconds(figures.end.lambda_ms, figures.end_memory_mb))
    for stage in w.invocations:
        total = total + _counted(_figures(pipeline, stage, figures))
        total = total + Usage(
            lambda_gb_seconds=_gb_seconds(_lambda_ms(pipeline, stage, figures, inputs), pipeline.agent(stage).memory_mb)
        )
    return total + Usage(
        state_transitions=w.standard_transitions,
        express_requests=len(w.segments),
        express_gb_seconds=sum(express_gb_seconds(ms) for ms in w.segments),
        express_transitions=w.express_transitions,
    )


def _assumptions(
    pipeline: PipelineConfig, walks: dict[str, Walk], figures: Figures, inputs: PredictionInputs
) -> list[str]:
    typical = walks["typical"]
    said = [
        f"typical path ({len(typical.invocations)} stage runs): {' -> '.join(typical.stages)}",
        "range: "
        + ", ".join(f"{name} {len(walks[name].invocations)} stage runs" for name in PATHS)
        + f" (max: the edge limits, cut at max_agent_hops {pipeline.bounds.max_agent_hops})",
    ]
    for limit in pipeline.edge_limits:
        said.append(
            f"loop {limit.from_stage} -> {limit.to_stage}: typically {limit.typical_count or 0} times, "
            f"at most {limit.max_count} (edge_limits typical_count, max_count)"
        )
    if two_level(pipeline):
        budget = segment_seconds(pipeline)
        said.append(
            f"stages run in Express segments of at most {pipeline.segment_hops} stages or {budget} s; "
            "each segment starts the next, so the Standard transitions are those of one whatever the length; "
            "nobody is asked and the mission is not paused (each question or pause adds a segment and "
            "a few Standard transitions)"
        )
    else:
        said.append("one Standard machine (a stage may run longer than a segment allows): every state is billed")
    if any(agent.fan_out for agent in pipeline.agents):
        said.append(f"a fan-out runs {inputs.fan_out_items or 'its max_concurrency'} items")
    said += [
        "no bound is reached, no stage fails or is retried",
        f"per-stage figures: {figures.measured} (missions.core.cost.figures)",
        f"Lambda time per stage is the emulation's with the offline model, plus {inputs.llm_ms:g} ms per model "
        "call; LLM tokens are not included (priced per call elsewhere)",
    ]
    return said
