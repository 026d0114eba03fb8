"""THE table of per-stage figures the cost model (missions.core.cost.prediction) prices a mission with.

Measured by `make bench` (bench/cost.py meters the code_analysis demo on the emulation and prints, under
"cost model", the metered figures next to these): re-tuning is copying the metered column here. The
integration test of the prediction (tests/integration/test_metering.py) fails when a change to the runner
or the stores moves the metered cost more than 10% away from what these predict.

Per stage kind (`stage_kind`): "llm" (a stage with a model call: it also writes usage records), "tools"
(a stage without one: tools or plain work) and "final" (the final stage: it writes the result and the
mission's end). Per mission, once: "start" (what the launcher does in the API Lambda: the mission record,
the dispatch slot) and "end" (the status function Step Functions' status-change event invokes).
DynamoDB units are per table (the tables' spec ids); Lambda ms are the emulation's, warm, with the offline
model: a real model's latency is billed Lambda time too (`PredictionInputs.llm_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StageFigures:
    """What one invocation of a stage of a kind (or the mission's start or end) uses, on average."""

    lambda_ms: float = 0.0
    lambda_requests: float = 1.0
    writes: dict[str, float] = field(default_factory=dict)  # write units per table
    reads: dict[str, float] = field(default_factory=dict)  # read units per table
    s3_puts: float = 0.0
    s3_gets: float = 0.0
    events: float = 0.0  # EventBridge events published

    @property
    def write_units(self) -> float:
        return sum(self.writes.values())

    @property
    def read_units(self) -> float:
        return sum(self.reads.values())


@dataclass(frozen=True)
class Figures:
    measured: str  # where and when
    stages: dict[str, StageFigures]  # per stage kind: "llm", "tools", "final"
    start: StageFigures  # once per mission, in the API Lambda (its request is not the mission's)
    end: StageFigures  # once per mission: the status function
    end_memory_mb: int  # the status function's memory
    express_overhead_ms: float  # a segment's duration per stage it runs, beyond the stage's Lambda time


# fmt: off
FIGURES = Figures(
    measured="make bench (bench/cost.py), code_analysis demo on the emulation, 11 stages",
    stages={
        # a stage's progress is in its checkpoint (missions.service.progress): it reads the mission's record
        # (a cancel, a pause, the user's notes) and writes none of it
        "llm": StageFigures(
            lambda_ms=31.0,
            writes={"checkpoints": 1.29, "events": 1.0, "usage": 1.0},
            reads={"agents": 0.57, "checkpoints": 2.0, "missions": 1.0},
        ),
        "tools": StageFigures(
            lambda_ms=800.0,
            writes={"checkpoints": 4.67, "events": 1.0},
            reads={"agents": 1.0, "checkpoints": 1.33, "events": 0.33, "missions": 1.0},
        ),
        "final": StageFigures(
            lambda_ms=31.0,
            # the mission's usage totals: 2 per (agent, version, model) its calls used (4 in the demo)
            writes={"checkpoints": 4.0, "events": 1.0, "missions": 7.0, "usage": 8.0},
            reads={"agents": 1.0, "checkpoints": 3.0, "usage": 1.0},
        ),
    },
    start=StageFigures(
        lambda_requests=0.0,
        writes={"dispatch": 3.0, "missions": 7.0},  # the note, the slot, forgetting the note (nothing queued ahead)
        reads={"agents": 1.0, "dispatch": 1.0, "memory": 1.0, "usage": 1.0},
    ),
    end=StageFigures(lambda_ms=19.0, writes={"dispatch": 1.0}, reads={"dispatch": 1.0, "memory": 1.0, "missions": 1.0}),
    end_memory_mb=256,
    express_overhead_ms=34.0,  # with the segment's heartbeat and report on its token (issue 37)
)
# fmt: on
