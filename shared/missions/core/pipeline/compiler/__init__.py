"""PipelineConfig -> Amazon States Language. A pure function.

Two levels (`compile_mission`). A Standard execution is billed per state transition and keeps
every event in its history (25,000 at most); an Express execution is billed by duration, which
for a stage that spends milliseconds in the state machine is a small fraction of the transitions,
but lasts 5 minutes at most and cannot wait for a task token. So the mission is a Standard
execution (its name is the mission id: the dedupe key) that waits where a human is asked and runs
the stages in between as a chain of Express **segments**, each starting the next, on one task token
(`states:startExecution.waitForTaskToken`):

    mission (Standard):  segment (waits on its token) -> segment.exit
                           ^                              |  done -> mission.done
                           |                              |  await -> await.<kind> (task token, days) -> segment.begin
                           +------------------------------+  failed -> segment.retry (from the same hop) or finalize
    segment (Express):   segment.start -> the stages -> segment.<exit> -> segment.end
                           continue (not paused, not ended) -> segment.heartbeat -> segment.chain (starts the
                             next, hands on the token)
                           anything else -> segment.report (answers the token with the state)

A mission that asks nobody costs 3 Standard transitions (segment, segment.exit, mission.done) whatever
its length: the segments chain themselves in Express, and only the last answers the token. A segment
heartbeats on the token as it hands on to the next; a chain silent for longer than a segment can live
(`SEGMENT_HEARTBEAT_SECONDS`) lost its segment, and the mission's machine starts it again. The first
segment starts at once (its input carries the restart count: initial_state) and computes its own end
(`segment.start`, in Express); a continue exit resets the restart count. A segment that cannot start
the next reports instead, and the mission's machine starts it (two transitions more, nothing lost).

A stage that finds its user paused the mission says so (`envelope.pause`, with `segment_yield`): its
segment hands back ("continue") and the mission's machine, before starting the next segment, waits in
`await.pause` on a task token exactly as for a question (no compute, no running slot) until the
resume hands it back, with the notes the user sent meanwhile; the next segment starts where the
routing had sent the mission. (Single level: the stage's route goes to `await.pause`, whose resume
routes on `next_stage`.) A pause that outlives the capability's interrupt timeout ends the mission
through its final stage (`pause_expired`).

A segment continues ("continue") when it has run `segment_hops` stages (500) (the history stays small)
or when a stage reports that the segment is older than its time budget (`segment_seconds`: what is
left of Express's 5 minutes after the longest stage could start): the next starts at the stage the
routing chose. A stage that finds its mission ended meanwhile (cancelled) says so (`mission_ended`):
its segment reports instead of starting the next. A segment that fails anyway (the
5 minutes ran out in a retried stage, a throttle) fails the token, and the mission's machine starts the
chain again from the hop it began at: each
stage's write-once checkpoint makes the stages it already ran return what they returned, so a
restart costs lookups, not work; after `MAX_SEGMENT_RESTARTS` the mission ends through its final
stage. A pipeline with a stage that may run longer than a segment allows compiles to one Standard
machine with the awaits inline (the single-level layout below, unchanged).

The execution state is {"envelope": {...}, "asl": {"hops": n, "max_hops": m}}. Stages
return the envelope; `asl` belongs to the state machine alone, so a buggy stage cannot
reset the hop count that guarantees termination.

Per sequential stage S:
    S (Task: S's Lambda, Retry, Catch)  ->  S.count (Pass: hops + 1)  ->  S.route (Choice)
S.route goes, in order: to the final stage when the runner chose it; to a guard when a
bound is passed (the runner should have stopped; the guard is the backstop); to an await
state when the stage asked a human; to the chosen stage. Anything else is unroutable.
Every failure path ends through `finalize` (the final stage in finalize mode), so a
mission always ends through its final stage with a terminal reason.

Only JSONPath is used (no JSONata, no Assign), and no indexed paths.
Function ARNs are placeholders `${fn_<stage>}` and `${fn_interrupt}`, the segment machine's ARN
`${segment}`, filled by CDK's definition substitutions or by the local emulation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from missions.core.pipeline.compiler._layout import (
    AWAIT_BRANCHES,
    AWAIT_PAUSE,
    BRANCHES_ROUTE,
    COUNTER_GUARDS,
    DONE,
    EXPRESS_SECONDS,
    FAILED,
    FINALIZE,
    INTERRUPT_FUNCTION,
    MAX_SEGMENT_RESTARTS,
    MIN_SEGMENT_SECONDS,
    PAUSE_ROUTE,
    SEGMENT,
    SEGMENT_BEGIN,
    SEGMENT_CHAIN,
    SEGMENT_END,
    SEGMENT_EXIT,
    SEGMENT_FAIL,
    SEGMENT_HANDED,
    SEGMENT_HEARTBEAT,
    SEGMENT_HEARTBEAT_SECONDS,
    SEGMENT_MARGIN_SECONDS,
    SEGMENT_PLACEHOLDER,
    SEGMENT_REPORT,
    SEGMENT_START,
    START,
    TRANSIENT_LAMBDA_ERRORS,
    UNROUTABLE,
    function_placeholder,
    segment_seconds,
    segment_spent,
    two_level,
)
from missions.core.pipeline.compiler._mission import _MissionCompiler
from missions.core.pipeline.compiler._stages import _Compiler
from missions.core.pipeline.config import PipelineConfig

__all__ = [
    "AWAIT_BRANCHES",
    "AWAIT_PAUSE",
    "BRANCHES_ROUTE",
    "COUNTER_GUARDS",
    "DONE",
    "EXPRESS_SECONDS",
    "FAILED",
    "FINALIZE",
    "INTERRUPT_FUNCTION",
    "MAX_SEGMENT_RESTARTS",
    "MIN_SEGMENT_SECONDS",
    "PAUSE_ROUTE",
    "SEGMENT",
    "SEGMENT_BEGIN",
    "SEGMENT_CHAIN",
    "SEGMENT_END",
    "SEGMENT_FAIL",
    "SEGMENT_HANDED",
    "SEGMENT_HEARTBEAT",
    "SEGMENT_HEARTBEAT_SECONDS",
    "SEGMENT_REPORT",
    "SEGMENT_START",
    "SEGMENT_EXIT",
    "SEGMENT_MARGIN_SECONDS",
    "SEGMENT_PLACEHOLDER",
    "START",
    "TRANSIENT_LAMBDA_ERRORS",
    "UNROUTABLE",
    "MissionMachines",
    "compile_json",
    "compile_mission",
    "compile_pipeline",
    "compile_segment",
    "function_placeholder",
    "initial_state",
    "placeholders",
    "segment_seconds",
    "segment_spent",
    "two_level",
]


@dataclass(frozen=True)
class MissionMachines:
    """The mission's Standard machine and, when the pipeline runs in segments, the Express one."""

    mission: dict[str, Any]
    segment: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {"mission": self.mission, "segment": self.segment}

    @property
    def stages(self) -> dict[str, Any]:
        """The machine whose states run the stages (the segment when there is one)."""
        return self.segment or self.mission


def placeholders(pipeline: PipelineConfig, machine: str = "all") -> list[str]:
    """Substitution keys a definition needs (without `${}`): `machine` is "mission", "segment" or "all"."""
    stages = [f"fn_{name}" for name in pipeline.stage_names()]
    if not two_level(pipeline):
        return [] if machine == "segment" else stages + ["fn_interrupt"]
    mission = ["segment", "fn_interrupt", f"fn_{pipeline.final}"]
    if machine == "mission":
        return mission
    if machine == "segment":
        return stages
    return stages + ["fn_interrupt", "segment"]


def initial_state(envelope: dict[str, Any], max_agent_hops: int) -> dict[str, Any]:
    """The execution input for a mission (a new one, or one forked from a checkpoint).

    `max_hops` leaves one hop for the final stage, as the runner's own bound check does.
    """
    hops = int((envelope.get("counters") or {}).get("agent_hops", 0))
    return {"envelope": envelope, "asl": {"hops": hops, "max_hops": max_agent_hops - 1, "restarts": 0}}


def compile_mission(pipeline: PipelineConfig) -> MissionMachines:
    if not two_level(pipeline):
        return MissionMachines(mission=_Compiler(pipeline, segmented=False).build(None), segment=None)
    return MissionMachines(mission=_MissionCompiler(pipeline).build(), segment=compile_segment(pipeline))


def compile_pipeline(pipeline: PipelineConfig, *, comment: str | None = None) -> dict[str, Any]:
    """The single-level layout: the whole mission on one Standard machine, awaits inline. What a
    pipeline that cannot run in segments deploys, and the reference the segment is built from."""
    return _Compiler(pipeline, segmented=False).build(comment)


def compile_segment(pipeline: PipelineConfig) -> dict[str, Any]:
    """The Express machine a two-level mission runs its stages in."""
    return _Compiler(pipeline, segmented=True).build(None)


def compile_json(pipeline: PipelineConfig) -> str:
    return json.dumps(compile_mission(pipeline).as_dict(), indent=2, sort_keys=False)
