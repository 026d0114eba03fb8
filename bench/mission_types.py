"""Every installed mission type on the emulation: state transitions, LLM calls, wall time and the
estimated infrastructure cost per mission, with the LLM-call budget of its complexity level.

Each runs twice in the same run: on the two levels the stack deploys (a Standard machine waiting for
people, the stages in Express segments) and on the single-level layout (every stage on the Standard
machine, as before issue 14), so the ratio of the two is the saving of the layout alone. Both are the
full emulation (moto), with the meter's usage priced at list prices (missions.core.cost.infrastructure).

Each runs its capability's example goal with the offline model; a question is answered the
way a satisfied user would (the first option, approval), so interactive types complete.
"""

from __future__ import annotations

import time
from typing import Any

from missions.core.capability import registry as registry
from missions.core.cost.infrastructure import estimate
from missions.core.mission.envelope import InterruptKind, InterruptResponse

LLM_BUDGET = {1: 2, 2: 5, 3: 20}  # issue 5: at most this many LLM calls per mission of a level
# home_assistant's flows (seed 002), each measured on its own: the sample home, the local sandbox
HOME_ASSISTANT_FLOWS = {
    "energy analysis": "Analyze my energy usage this week",
    "diagnosis": "My car charger energy data disappeared",
    "automation review": "Review my automations",
    "device control": "Turn on the living room lights",
    "new automation": "Turn off the office lights every night at 23:00",
}
CONTEXTS: dict[str, dict[str, Any]] = {}  # per capability, e.g. code_analysis needs the repository


def _answer(record: Any) -> InterruptResponse:
    if record.kind == InterruptKind.CHOICE and record.options:
        return InterruptResponse(decision=record.options[0])
    if record.kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW):
        approve = next((o for o in record.options if o.lower() in {"approve", "accept", "yes"}), None)
        return InterruptResponse(decision=approve) if approve else InterruptResponse(approved=True)
    return InterruptResponse(text="whatever you think is best")


def run_one(
    cloud: Any, meter: Any, name: str, root: str, max_answers: int = 6, goal: str | None = None
) -> dict[str, Any]:
    capability = registry.load(name)
    context = {"repo": root} if name == "code_analysis" else {}
    meter.reset()
    started = time.perf_counter()
    with meter.billed():
        mission_id = cloud.start(name, goal or capability.example_goal or capability.description, context=context)
    answers = 0
    while cloud.wait(mission_id, timeout=120, until_interrupt=True) == "INTERRUPTED":
        if answers >= max_answers:
            raise RuntimeError(f"{name}: still asking after {answers} answers")
        for record in cloud.runtime.interrupts.pending(mission_id):
            with meter.billed():
                cloud.answer(mission_id, record.interrupt_id, _answer(record))
            answers += 1
        time.sleep(0.05)
    wall = time.perf_counter() - started
    outcome = cloud.outcome(mission_id)
    usage = meter.usage_for(mission_id)
    llm_calls = outcome.envelope.counters.llm_calls if outcome.envelope else None
    budget = LLM_BUDGET.get(capability.complexity)
    events, _ = cloud.runtime.events.read(mission_id, limit=1000)
    sandbox_ms = sum(e.payload.get("duration_ms", 0) for e in events if e.type.value == "analysis.completed")
    return {
        "sandbox_ms": round(sandbox_ms, 1),
        "complexity": capability.complexity,
        "status": outcome.status,
        "answers": answers,
        "state_transitions": usage.state_transitions,
        "llm_calls": llm_calls,
        "llm_budget": budget,
        "within_budget": llm_calls is not None and budget is not None and llm_calls <= budget,
        "wall_s": round(wall, 2),
        "infra_dollars": round(estimate(usage).total, 7),
        "usage": {k: round(v, 6) for k, v in usage.as_dict().items()},
    }


def _run_all(single_level: bool) -> dict[str, Any]:
    from bench.run import ROOT
    from missions.local.emulation import LocalCloud
    from missions.local.metering import Meter

    names = registry.installed()
    with LocalCloud(names, single_level=single_level) as cloud, Meter(cloud) as meter:
        results = {name: run_one(cloud, meter, name, str(ROOT)) for name in names}
        if "home_assistant" in names:
            results |= {
                f"home_assistant: {flow}": run_one(cloud, meter, "home_assistant", str(ROOT), goal=goal)
                for flow, goal in HOME_ASSISTANT_FLOWS.items()
            }
        return results


def run() -> dict[str, Any]:
    results = _run_all(single_level=False)
    before = _run_all(single_level=True)
    for name, r in results.items():
        single = before[name]
        r["single_level"] = {
            "status": single["status"],
            "state_transitions": single["state_transitions"],
            "infra_dollars": single["infra_dollars"],
        }
        r["cost_ratio_to_single_level"] = round(r["infra_dollars"] / single["infra_dollars"], 3)
    return results


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for name, r in results.items():
        budget = f"{r['llm_calls']}/{r['llm_budget']} LLM calls" + ("" if r["within_budget"] else " [red]OVER[/]")
        out.append(
            (
                f"{name} (level {r['complexity']})",
                f"{r['status']}, {r['state_transitions']} Standard + {r['usage']['express_transitions']:g} Express "
                f"transitions in {r['usage']['express_requests']:g} segments, {budget}, {r['answers']} answers, "
                f"{r['wall_s']} s, ${r['infra_dollars']:.6f} infra "
                f"({r['cost_ratio_to_single_level']}x single-level ${r['single_level']['infra_dollars']:.6f}, "
                f"{r['single_level']['state_transitions']} transitions); "
                f"{r['usage']['lambda_gb_seconds']:.3f} Lambda GB-s, "
                f"{r['usage']['express_gb_seconds']:.3f} Express GB-s, {r['usage']['dynamodb_write_units']:g} WRU, "
                f"{r['usage']['dynamodb_read_units']:g} RRU"
                + (f", {r['sandbox_ms']:.0f} ms in the sandbox" if r["sandbox_ms"] else ""),
            )
        )
    return out
