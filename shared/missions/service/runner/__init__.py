"""The stage runner: runs one stage of one mission on the envelope the state machine carries.

The state machine invokes the stage Lambda with a request:
    {"stage": NAME, "mode": MODE, "envelope": {...}, "item": ..., "index": N}
Modes:
    run       pre-hook -> LLM -> tools -> post-hook -> routing; returns the envelope
    join      a fan-out stage after its Map: fold the per-item results, then route
    branch    one stage of a Parallel group: returns a delta the join stage folds in
    item      one item of a fan-out stage's Map: returns a delta
    finalize  the failure path: record why, run the final stage without an LLM, end
Bounds are never exceptions: a reached bound routes to the final stage with a reason.

A whole stage (run, join, finalize) writes one checkpoint: what it changed in the envelope it was
given, and its record for the mission's history (missions.core.mission.checkpoints). Nothing it does reads
or writes more as the mission grows, so a stage costs the same at hop 1,000 as at hop 10.

Its parts, each a private module with one job: `_runner` (the request, and what an invocation measured),
`_modes` (the ways a stage runs: whole, partial, the failure path; routing and asking), `_absorb` (what
the state machine brought back), `_function` (the stage's typed function and its view), `_model` (model
calls and their streamed output), `_usage` (the record of each model call), `_tools` (the tool executor
and its journal), `_memory` (the user's long-term memory as a stage sees it), `_agents` (the
configuration version a stage runs), `_commit` (events, checkpoint and the mission's progress), `_base`
(what they share). A mission that is a turn of a conversation is folded into it by the conversations
service (missions.service.conversations).
"""

from missions.service.runner._base import AWAIT_PREFIX, StageReport, StageServices, StageTimings
from missions.service.runner._model import ModelOutput
from missions.service.runner._runner import StageRunner

__all__ = ["AWAIT_PREFIX", "ModelOutput", "StageReport", "StageRunner", "StageServices", "StageTimings"]
