"""A mission of 5,000 stages completing on the full emulation (moto runs both levels of state machines).

One stage loops on itself until the mission's hop count reaches its goal; no model, no tool, so what
is measured is the runtime: the Express segments that carry it (a Standard execution alone stops at
25,000 history events, about 2,770 stages of the single-level layout), the state it carries and the
time per stage as the mission grows. The figure is the full emulation on this machine (moto's ASL
interpreter, in-process Lambda handlers, moto's DynamoDB and S3), not the runner alone and not AWS.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from pydantic import BaseModel

from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.mission.envelope import Bounds
from missions.core.pipeline.config import AgentConfig, EdgeLimit, PipelineConfig, RoutingRule

STAGES = 5_000
MAX_STANDARD_TRANSITIONS = 3  # segment, segment.exit, mission.done: as for a mission of one segment


class Stepped(BaseModel):
    done: bool
    answer: str = ""


@stage
def step(ctx: Ctx) -> Stepped:
    return Stepped(done=ctx.counters.agent_hops >= STAGES - 1)


@stage
def finish(ctx: Ctx) -> Stepped:
    return Stepped(done=True, answer=f"{ctx.counters.agent_hops} stages")


CAPABILITY = Capability(
    name="bench_long",
    description="benchmark: a mission of 5,000 stages",
    pipeline=PipelineConfig(
        name="bench_long",
        agents=[
            AgentConfig(
                name="step",
                routing_rules=[RoutingRule(field="done", value=False, target="step")],
                default_next="finish",
                max_retries=0,
            ),
            AgentConfig(name="finish"),
        ],
        edge_limits=[EdgeLimit(from_stage="step", to_stage="step", max_count=STAGES)],
        bounds=Bounds(max_agent_hops=STAGES + 10, max_iterations=1, max_llm_calls=1, max_tool_calls=1),
    ),
    stages={"step": step, "finish": finish},
    offline_policy=lambda request: {},
)


def run() -> dict[str, Any]:
    from missions.core.capability import registry as registry
    from missions.local.emulation import LocalCloud

    known = registry.Registry().including(CAPABILITY)
    totals: list[float] = []
    with LocalCloud(["bench_long"], registry=known, on_timings=lambda stage, t: totals.append(t.total_ms)) as cloud:
        started = time.perf_counter()
        outcome = cloud.run("bench_long", "count to 5,000", timeout=3600)
        wall = time.perf_counter() - started
        segments = cloud.segments(outcome.mission_id)
        # billed: the mission's own (Standard) execution's states; the segments chain themselves in Express
        standard = cloud.history(outcome.mission_id, segments=False)
        envelope = outcome.envelope
        first, last = totals[:100], totals[-100:]
        return {
            "stages": envelope.counters.agent_hops if envelope else 0,
            "status": outcome.status,
            "terminal_reason": envelope.terminal_reason if envelope else None,
            "segments": len(segments),
            "standard_transitions": sum(1 for event in standard if event["type"].endswith("StateEntered")),
            "wall_s": round(wall, 1),
            "stage_ms_first_100": round(statistics.median(first), 2) if first else None,
            "stage_ms_last_100": round(statistics.median(last), 2) if last else None,
            "largest_state_bytes": cloud.largest_state_bytes(outcome.mission_id),
        }


def rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (
            "5,000-stage mission (full emulation)",
            f"{result['status']} ({result['terminal_reason']}), {result['stages']} stages in {result['segments']} "
            f"segments, {result['standard_transitions']} Standard transitions, {result['wall_s']} s; "
            f"runner per stage {result['stage_ms_first_100']} ms (first 100) -> "
            f"{result['stage_ms_last_100']} ms (last 100); largest state {result['largest_state_bytes']} bytes",
        )
    ]


def checks(result: dict[str, Any]) -> dict[str, bool]:
    return {
        "a 5,000-stage mission completes on the emulation": result["status"] == "SUCCEEDED"
        and result["terminal_reason"] == "completed"
        and result["stages"] >= STAGES,
        # issue 37: the segments chain themselves, so a mission's Standard transitions do not grow with its length
        "a 5,000-stage mission pays 3 Standard transitions": result["standard_transitions"] == MAX_STANDARD_TRANSITIONS,
    }
