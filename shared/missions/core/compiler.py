"""PipelineConfig -> Amazon States Language. A pure function.

Two levels (`compile_mission`). A Standard execution is billed per state transition and keeps
every event in its history (25,000 at most); an Express execution is billed by duration, which
for a stage that spends milliseconds in the state machine is a small fraction of the transitions,
but lasts 5 minutes at most and cannot wait for a task token. So the mission is a Standard
execution (its name is the mission id: the dedupe key) that waits where a human is asked and runs
the stages in between as Express **segments** (`states:startExecution.sync:2`):

    mission (Standard):  segment.begin -> segment (Express child) -> segment.exit
                           ^ continue      |  done -> mission.done
                           |               |  await -> await.<kind> (task token, days) -> resume
                           +---------------+  failed -> segment.retry (from the same hop) or finalize

A stage that finds its user paused the mission says so (`envelope.pause`, with `segment_yield`): its
segment hands back ("continue") and the mission's machine, before starting the next segment, waits in
`await.pause` on a task token exactly as for a question (no compute, no running slot) until the
resume hands it back, with the notes the user sent meanwhile; the next segment starts where the
routing had sent the mission. (Single level: the stage's route goes to `await.pause`, whose resume
routes on `next_stage`.) A pause that outlives the capability's interrupt timeout ends the mission
through its final stage (`pause_expired`).

A segment hands back control ("continue") when it has run `segment_hops` stages (500) (the history
stays small) or when a stage reports that the segment is older than its time budget
(`segment_seconds`: what is left of Express's 5 minutes after the longest stage could start), and
the parent starts the next one at the stage the routing chose. A segment that fails anyway (the
5 minutes ran out in a retried stage, a throttle) is started again from the hop it began at: each
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
from datetime import UTC, datetime
from typing import Any

from missions.core.envelope import InterruptKind
from missions.core.errors import NON_RETRYABLE_ERRORS
from missions.core.pipeline import AgentConfig, PipelineConfig

# dotted: stage names cannot contain a dot, so these never collide with a stage
START = "mission.start"
FINALIZE = "mission.finalize"
DONE = "mission.done"
FAILED = "mission.failed"
UNROUTABLE = "guard.unroutable"
SEGMENT = "segment"
SEGMENT_BEGIN = "segment.begin"
SEGMENT_EXIT = "segment.exit"
SEGMENT_END = "segment.end"
SEGMENT_PLACEHOLDER = "${segment}"
AWAIT_PAUSE = "await.pause"
PAUSE_ROUTE = "pause.route"
# Express runs 5 minutes at most; a segment hands back this long before, whatever a stage may take
EXPRESS_SECONDS = 300
SEGMENT_MARGIN_SECONDS = 30
MIN_SEGMENT_SECONDS = 60  # below this a segment would run a stage or two: one Standard machine instead
MAX_SEGMENT_RESTARTS = 2
TRANSIENT_LAMBDA_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]
# guards on counters the stages report; hops are counted by the state machine itself
COUNTER_GUARDS = (
    ("max_llm_calls", "llm_calls"),
    ("max_tool_calls", "tool_calls"),
    ("max_iterations", "iterations"),
    ("max_cost_usd", "cost_usd"),
)


def function_placeholder(stage: str) -> str:
    return f"${{fn_{stage}}}"


INTERRUPT_FUNCTION = "${fn_interrupt}"


def segment_seconds(pipeline: PipelineConfig) -> int:
    """How long a segment runs stages before it hands back: a stage that starts before this ends
    (at its timeout) before Express's limit, with a margin for the state machine's own work."""
    longest = max(agent.timeout_seconds for agent in pipeline.agents)
    return EXPRESS_SECONDS - SEGMENT_MARGIN_SECONDS - longest


def segment_spent(request: dict[str, Any], now: datetime) -> bool:
    """Whether the segment a stage ran in has used its time (the stage's request carries when the
    segment started and its budget). An unreadable start counts as spent: handing back early costs
    a few transitions, running past Express's limit costs a restart."""
    try:
        started = datetime.fromisoformat(str(request["segment_started"]).replace("Z", "+00:00"))
        budget = float(request["segment_seconds"])
    except (KeyError, TypeError, ValueError):
        return True
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return (now - started).total_seconds() >= budget


def two_level(pipeline: PipelineConfig) -> bool:
    return segment_seconds(pipeline) >= MIN_SEGMENT_SECONDS


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
    return {"envelope": envelope, "asl": {"hops": hops, "max_hops": max_agent_hops - 1}}


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


def _asl(hops: str, **extra: Any) -> dict[str, Any]:
    """The `asl` block a Pass writes: the hop count, its bound, and what the level needs carried."""
    return {"hops.$": hops, "max_hops.$": "$.asl.max_hops", **extra}


class _Compiler:
    """The stages' machine: an Express segment (`segmented`), or the whole mission on one Standard machine."""

    def __init__(self, pipeline: PipelineConfig, *, segmented: bool):
        self.p = pipeline
        self.segmented = segmented
        self.states: dict[str, Any] = {}
        self.groups = pipeline.parallel_groups()

    def _count(self, increment: int, next_state: str) -> dict[str, Any]:
        """A Pass that adds hops (the state machine's own count), carrying the segment's end."""
        carried = {"segment_end.$": "$.asl.segment_end"} if self.segmented else {}
        return {
            "Type": "Pass",
            "Parameters": _asl(f"States.MathAdd($.asl.hops, {increment})", **carried),
            "ResultPath": "$.asl",
            "Next": next_state,
        }

    def _exit(self, how: str) -> str:
        """A segment's way back to the mission's machine, saying why in `asl.exit`."""
        name = f"segment.{how}"
        self.states[name] = {"Type": "Pass", "Result": how, "ResultPath": "$.asl.exit", "Next": SEGMENT_END}
        self.states[SEGMENT_END] = {"Type": "Succeed"}
        return name

    # -- naming -------------------------------------------------------------------

    def entry(self, stage: str) -> str:
        return _entry(self.p, stage)

    # -- building -----------------------------------------------------------------

    def build(self, comment: str | None) -> dict[str, Any]:
        grouped = {name for group in self.groups for name in group}
        for agent in self.p.agents:
            if agent.name == self.p.final:
                self._final_stage(agent)
            elif agent.name not in grouped:
                self._stage(agent)
        for group in self.groups:
            self._parallel(group)
        if not self.segmented:
            for kind in InterruptKind:
                _await(self.states, self.p, kind)
            _await_pause(self.states, self.p, next_state=PAUSE_ROUTE)
            stages = [a.name for a in self.p.agents if not self.p.group_of(a.name)] + self.p.group_names()
            self.states[PAUSE_ROUTE] = {
                "Type": "Choice",
                "Choices": [
                    {"Variable": "$.envelope.next_stage", "StringEquals": stage, "Next": self.entry(stage)}
                    for stage in stages
                ],
                "Default": UNROUTABLE,
            }
        _guards(self.states)
        self._finalize()
        start = self._start()
        if self.segmented:
            return {
                "Comment": comment or f"Mission pipeline '{self.p.name}': a segment of stages (compiled by missions)",
                "StartAt": start,
                "TimeoutSeconds": EXPRESS_SECONDS,
                "States": _reachable(self.states, start),
            }
        return {
            "Comment": comment or f"Mission pipeline '{self.p.name}' (compiled by missions)",
            "StartAt": start,
            "TimeoutSeconds": _machine_timeout(self.p),
            "States": _reachable(self.states, start),
        }

    def _start(self) -> str:
        """A new mission begins at the first stage; a forked one where its checkpoint left off."""
        # a segment after the first starts where the last one's routing (or the human's answer) sent it
        stages = [a.name for a in self.p.agents] + self.p.group_names()
        self.states[START] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.envelope.next_stage", "StringEquals": stage, "Next": self.entry(stage)}
                for stage in stages
            ],
            "Default": self.entry(self.p.start),
        }
        return START

    def _task(
        self,
        agent: AgentConfig,
        mode: str,
        next_state: str | None,
        *,
        result_path: str = "$.envelope",
        parameters: dict[str, Any] | None = None,
        catch: bool = True,
    ) -> dict[str, Any]:
        if parameters is None:
            parameters = {"stage": agent.name, "mode": mode, "hop.$": "$.asl.hops", "envelope.$": "$.envelope"}
            if self.segmented and mode in ("run", "join"):  # a whole stage says when the segment should hand back
                parameters |= {
                    "segment_started.$": "$$.Execution.StartTime",
                    "segment_seconds": segment_seconds(self.p),
                }
        state: dict[str, Any] = {
            "Type": "Task",
            "Resource": function_placeholder(agent.name),
            "Parameters": parameters,
            "ResultPath": result_path,
            "TimeoutSeconds": agent.timeout_seconds,
            "Retry": self._retry(agent),
        }
        if catch:
            state["Catch"] = [
                {
                    "ErrorEquals": ["States.ALL"],
                    "ResultPath": "$.envelope.failure",
                    "Next": f"{agent.name}.failed" if mode != "finalize" else FAILED,
                }
            ]
        if next_state:
            state["Next"] = next_state
        else:
            state["End"] = True
        return state

    def _retry(self, agent: AgentConfig) -> list[dict[str, Any]]:
        return _retry(self.p, agent)

    def _failed_pass(self, state: str, reason: str, next_state: str = FINALIZE) -> None:
        _failed_pass(self.states, state, reason, next_state)

    def _stage(self, agent: AgentConfig) -> None:
        name = agent.name
        if agent.fan_out:
            self.states[f"{name}.map"] = self._map(agent)
            self.states[name] = self._task(agent, "join", f"{name}.count")
        else:
            self.states[name] = self._task(agent, "run", f"{name}.count")
        error_target = self.entry(agent.error_next) if agent.error_next else FINALIZE
        self._failed_pass(name, "stage_failed", error_target)
        self.states[f"{name}.count"] = self._count(1, f"{name}.route")
        self.states[f"{name}.route"] = {
            "Type": "Choice",
            "Choices": self._choices(self.p.targets_of(agent.name)),
            "Default": UNROUTABLE,
        }

    def _choices(self, targets: list[str]) -> list[dict[str, Any]]:
        final = self.p.final
        choices: list[dict[str, Any]] = [
            {"Variable": "$.envelope.next_stage", "StringEquals": final, "Next": final},
            {
                "Variable": "$.asl.hops",
                "NumericGreaterThanEqualsPath": "$.asl.max_hops",
                "Next": "guard.max_agent_hops",
            },
        ]
        for bound, counter in COUNTER_GUARDS:
            choices.append(
                {
                    "Variable": f"$.envelope.counters.{counter}",
                    "NumericGreaterThanPath": f"$.envelope.bounds.{bound}",
                    "Next": f"guard.{bound}",
                }
            )
        for kind in InterruptKind:
            choices.append(
                {
                    "Variable": "$.envelope.next_stage",
                    "StringEquals": f"await:{kind.value}",
                    "Next": self._exit("await") if self.segmented else f"await.{kind.value}",
                }
            )
        routable = [target for target in targets if target != final]
        if not self.segmented and routable:  # the user paused it: wait before the stage the routing chose
            chosen = [{"Variable": "$.envelope.next_stage", "StringEquals": target} for target in routable]
            choices.append(
                {
                    "And": [*_PAUSED, chosen[0] if len(chosen) == 1 else {"Or": chosen}],
                    "Next": AWAIT_PAUSE,
                }
            )
        if self.segmented and routable:
            # only a route the stage may take hands back; anything else still meets guard.unroutable
            chosen = [{"Variable": "$.envelope.next_stage", "StringEquals": target} for target in routable]
            spent = [
                {"Variable": "$.asl.hops", "NumericGreaterThanEqualsPath": "$.asl.segment_end"},
                {
                    "And": [
                        {"Variable": "$.envelope.segment_yield", "IsPresent": True},
                        {"Variable": "$.envelope.segment_yield", "BooleanEquals": True},
                    ]
                },
            ]
            choices.append(
                {
                    "And": [{"Or": spent}, chosen[0] if len(chosen) == 1 else {"Or": chosen}],
                    "Next": self._exit("continue"),
                }
            )
        for target in routable:
            choices.append({"Variable": "$.envelope.next_stage", "StringEquals": target, "Next": self.entry(target)})
        return choices

    def _final_stage(self, agent: AgentConfig) -> None:
        """The final stage ends the mission, unless it asks a human first. Asking counts a hop (on that
        path only: a mission that just ends pays no extra transition), so the run that resumes with
        the answer has a hop, and a checkpoint, of its own; without it the resumed run found the
        asking run's checkpoint, replayed the question, and the mission never ended."""
        self.states[agent.name] = self._task(agent, "run", f"{agent.name}.route")
        self._failed_pass(agent.name, "stage_failed")
        done = self._exit("done") if self.segmented else DONE
        self.states[f"{agent.name}.route"] = {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.envelope.next_stage",
                    "StringEquals": f"await:{kind.value}",
                    "Next": f"{agent.name}.asks.{kind.value}",
                }
                for kind in InterruptKind
            ],
            "Default": done,
        }
        for kind in InterruptKind:
            self.states[f"{agent.name}.asks.{kind.value}"] = self._count(
                1, self._exit("await") if self.segmented else f"await.{kind.value}"
            )
        if not self.segmented:
            self.states[DONE] = {"Type": "Succeed"}

    def _parallel(self, group: list[str]) -> None:
        join = self.p.agent(group[0]).default_next
        assert join is not None
        name = "parallel." + "+".join(group)
        branches = []
        for member in group:
            agent = self.p.agent(member)
            branches.append(
                {
                    "StartAt": f"{member}.branch",
                    "States": {f"{member}.branch": self._task(agent, "branch", None, result_path="$", catch=False)},
                }
            )
        self.states[name] = {
            "Type": "Parallel",
            "Branches": branches,
            "ResultPath": "$.envelope.branch_results",
            "Retry": [
                {
                    "ErrorEquals": TRANSIENT_LAMBDA_ERRORS,
                    "IntervalSeconds": self.p.retry_interval_seconds,
                    "MaxAttempts": 2,
                    "BackoffRate": 2.0,
                }
            ],
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.envelope.failure", "Next": f"{name}.failed"}],
            "Next": f"{name}.count",
        }
        self._failed_pass(name, "stage_failed")
        self.states[f"{name}.count"] = self._count(
            len(group), self.entry(join)
        )  # each branch is a hop, as the runner counts it

    def _map(self, agent: AgentConfig) -> dict[str, Any]:
        assert agent.fan_out is not None
        item = f"{agent.name}.item"
        return {
            "Type": "Map",
            "ItemsPath": "$.envelope.work_items",
            "MaxConcurrency": agent.fan_out.max_concurrency,
            "ItemSelector": {
                "stage": agent.name,
                "mode": "item",
                "envelope.$": "$.envelope",
                "item.$": "$$.Map.Item.Value",
                "index.$": "$$.Map.Item.Index",
            },
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": item,
                "States": {
                    item: self._task(
                        agent,
                        "item",
                        None,
                        result_path="$",
                        catch=False,
                        parameters={
                            "stage.$": "$.stage",
                            "mode.$": "$.mode",
                            "envelope.$": "$.envelope",
                            "item.$": "$.item",
                            "index.$": "$.index",
                        },
                    )
                },
            },
            "ResultPath": "$.envelope.branch_results",
            "Catch": [
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.envelope.failure", "Next": f"{agent.name}.failed"}
            ],
            "Next": agent.name,
        }

    def _finalize(self) -> None:
        final = self.p.agent(self.p.final)
        self.states[FINALIZE] = self._task(final, "finalize", self._exit("done") if self.segmented else DONE)
        self.states[FAILED] = _mission_failed()


class _MissionCompiler:
    """The mission's Standard machine over Express segments (see the module's docstring)."""

    def __init__(self, pipeline: PipelineConfig):
        self.p = pipeline
        self.states: dict[str, Any] = {}

    def build(self) -> dict[str, Any]:
        self._segment()
        for kind in InterruptKind:
            _await(self.states, self.p, kind, next_state=SEGMENT_BEGIN)
        _await_pause(self.states, self.p, next_state=SEGMENT_BEGIN)
        _guards(self.states)
        final = self.p.agent(self.p.final)
        self.states[FINALIZE] = {
            "Type": "Task",
            "Resource": function_placeholder(final.name),
            "Parameters": {"stage": final.name, "mode": "finalize", "hop.$": "$.asl.hops", "envelope.$": "$.envelope"},
            "ResultPath": "$.envelope",
            "TimeoutSeconds": final.timeout_seconds,
            "Retry": _retry(self.p, final),
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.envelope.failure", "Next": FAILED}],
            "Next": DONE,
        }
        self.states[DONE] = {"Type": "Succeed"}
        self.states[FAILED] = _mission_failed()
        return {
            "Comment": f"Mission '{self.p.name}': waits for people, runs its stages in Express segments "
            "(compiled by missions)",
            "StartAt": SEGMENT_BEGIN,
            "TimeoutSeconds": _machine_timeout(self.p),
            "States": _reachable(self.states, SEGMENT_BEGIN),
        }

    def _segment(self) -> None:
        self.states[SEGMENT_BEGIN] = {
            "Type": "Pass",
            "Parameters": _asl(
                "$.asl.hops", restarts=0, **{"segment_end.$": f"States.MathAdd($.asl.hops, {self.p.segment_hops})"}
            ),
            "ResultPath": "$.asl",
            "Next": SEGMENT,
        }
        self.states[SEGMENT] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::states:startExecution.sync:2",
            "Parameters": {
                "StateMachineArn": SEGMENT_PLACEHOLDER,
                # unique per segment and per restart (a name and input seen before would return the old run)
                "Name.$": "States.Format('{}-{}-{}', $$.Execution.Name, $.asl.hops, $.asl.restarts)",
                "Input": {
                    "envelope.$": "$.envelope",
                    "asl.$": "$.asl",
                    "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$": "$$.Execution.Id",
                },
            },
            "ResultSelector": {"envelope.$": "$.Output.envelope", "asl.$": "$.Output.asl"},
            "ResultPath": "$",
            "Retry": [
                {
                    "ErrorEquals": [
                        "StepFunctions.ExecutionLimitExceededException",
                        "StepFunctions.SdkClientException",
                        "StepFunctions.AWSStepFunctionsException",
                    ],
                    "IntervalSeconds": self.p.retry_interval_seconds,
                    "MaxAttempts": 3,
                    "BackoffRate": 2.0,
                }
            ],
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.segment_failure", "Next": "segment.failed"}],
            "Next": SEGMENT_EXIT,
        }
        self.states[SEGMENT_EXIT] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.asl.exit", "StringEquals": "done", "Next": DONE},
                {
                    "And": [{"Variable": "$.asl.exit", "StringEquals": "continue"}, *_PAUSED],
                    "Next": AWAIT_PAUSE,
                },
                {"Variable": "$.asl.exit", "StringEquals": "continue", "Next": SEGMENT_BEGIN},
                *(
                    {
                        "And": [
                            {"Variable": "$.asl.exit", "StringEquals": "await"},
                            {"Variable": "$.envelope.next_stage", "StringEquals": f"await:{kind.value}"},
                        ],
                        "Next": f"await.{kind.value}",
                    }
                    for kind in InterruptKind
                ),
            ],
            "Default": UNROUTABLE,
        }
        self.states["segment.failed"] = {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.asl.restarts",
                    "NumericGreaterThanEquals": MAX_SEGMENT_RESTARTS,
                    "Next": "segment.lost",
                }
            ],
            "Default": "segment.retry",
        }
        self.states["segment.retry"] = {  # the same hop again: committed stages return what they returned
            "Type": "Pass",
            "Parameters": _asl(
                "$.asl.hops",
                **{"restarts.$": "States.MathAdd($.asl.restarts, 1)", "segment_end.$": "$.asl.segment_end"},
            ),
            "ResultPath": "$.asl",
            "Next": SEGMENT,
        }
        self.states["segment.lost"] = {
            "Type": "Pass",
            "Parameters": {
                "Error": "SegmentFailed",
                "Cause.$": "$.segment_failure.Cause",
                "at": {"state": SEGMENT, "reason": "segment_failed"},
            },
            "ResultPath": "$.envelope.failure",
            "Next": FINALIZE,
        }


def _entry(p: PipelineConfig, stage: str) -> str:
    """The state a transition to `stage` (or to a parallel group) enters."""
    group = p.group_of(stage)
    if group:
        return "parallel." + "+".join(group)
    if p.agent(stage).fan_out:
        return f"{stage}.map"
    return stage


def _mission_failed() -> dict[str, Any]:
    return {"Type": "Fail", "Error": "MissionFailed", "Cause": "the final stage failed on the failure path"}


def _machine_timeout(pipeline: PipelineConfig) -> int:
    """The last-resort guard: every stage at its timeout with retries, plus waiting humans."""
    b = pipeline.bounds
    per_stage = max(a.timeout_seconds * (a.max_retries + 1) + 60 for a in pipeline.agents)
    waits = pipeline.interrupt_timeout_seconds * min(b.max_agent_hops, 10)
    return min(per_stage * (b.max_agent_hops + 2) + waits, 365 * 24 * 3600)


def _retry(pipeline: PipelineConfig, agent: AgentConfig) -> list[dict[str, Any]]:
    interval = pipeline.retry_interval_seconds
    retry = [
        {"ErrorEquals": TRANSIENT_LAMBDA_ERRORS, "IntervalSeconds": interval, "MaxAttempts": 3, "BackoffRate": 2.0},
        {"ErrorEquals": NON_RETRYABLE_ERRORS, "MaxAttempts": 0},
    ]
    if agent.max_retries:
        retry.append(
            {
                "ErrorEquals": ["States.TaskFailed", "States.Timeout"],
                "IntervalSeconds": interval,
                "MaxAttempts": agent.max_retries,
                "BackoffRate": 2.0,
            }
        )
    return retry


def _failed_pass(states: dict[str, Any], state: str, reason: str, next_state: str = FINALIZE) -> None:
    states[f"{state}.failed"] = {
        "Type": "Pass",
        "Result": {"state": state, "reason": reason},
        "ResultPath": "$.envelope.failure.at",
        "Next": next_state,
    }


def _wait_for_token(
    states: dict[str, Any], p: PipelineConfig, name: str, *, mode: str, result_path: str, reason: str
) -> None:
    """A task that waits for a task token the interrupt function keeps (`mode`), as long as a question may
    wait; what the token is handed back with goes to `result_path`, then `<name>.resume`. A wait that
    times out, or fails, ends the mission through its final stage (`<reason>_timeout`, `<reason>_failed`;
    a pause's timeout is `pause_expired`)."""
    states[name] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {
            "FunctionName": INTERRUPT_FUNCTION,
            "Payload": {"mode": mode, "envelope.$": "$.envelope", "task_token.$": "$$.Task.Token"},
        },
        "TimeoutSeconds": p.interrupt_timeout_seconds,
        "ResultPath": result_path,
        "Retry": [
            {
                "ErrorEquals": TRANSIENT_LAMBDA_ERRORS,
                "IntervalSeconds": p.retry_interval_seconds,
                "MaxAttempts": 3,
                "BackoffRate": 2.0,
            }
        ],
        "Catch": [
            {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.envelope.failure", "Next": f"{name}.timeout"},
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.envelope.failure", "Next": f"{name}.failed"},
        ],
        "Next": f"{name}.resume",
    }
    states[f"{name}.timeout"] = {
        "Type": "Pass",
        "Result": {"state": name, "reason": "pause_expired" if reason == "pause" else f"{reason}_timeout"},
        "ResultPath": "$.envelope.failure.at",
        "Next": FINALIZE,
    }
    _failed_pass(states, name, f"{reason}_failed")


def _await(states: dict[str, Any], p: PipelineConfig, kind: InterruptKind, *, next_state: str | None = None) -> None:
    """A question to a human: the execution waits for its task token (for days, at no compute cost).

    `next_state` set (two levels): the answer names where the next segment starts (the segment's
    first state routes on `next_stage`); otherwise the answer enters the resume stage directly."""
    name = f"await.{kind.value}"
    _wait_for_token(states, p, name, mode="interrupt", result_path="$.envelope.resume", reason="interrupt")
    configured = p.resume_stage(kind)
    if next_state is not None:
        states[f"{name}.resume"] = {"Type": "Pass", "ResultPath": "$.envelope.next_stage", "Next": next_state}
        if configured:
            states[f"{name}.resume"]["Result"] = configured
        else:  # resume where the human was asked
            states[f"{name}.resume"]["InputPath"] = "$.envelope.interrupt.stage"
        return
    if configured:
        states[f"{name}.resume"] = {"Type": "Pass", "Next": _entry(p, configured)}
        return
    # resume where the human was asked
    states[f"{name}.resume"] = {
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.envelope.interrupt.stage", "StringEquals": stage, "Next": _entry(p, stage)}
            for stage in p.stage_names()
            if not p.group_of(stage)
        ],
        "Default": UNROUTABLE,
    }


# the last stage found its user paused the mission
_PAUSED = (
    {"Variable": "$.envelope.pause", "IsPresent": True},
    {"Variable": "$.envelope.pause", "BooleanEquals": True},
)


def _await_pause(states: dict[str, Any], p: PipelineConfig, *, next_state: str) -> None:
    """The user paused the mission: wait for their resume on a task token (the interrupt function keeps
    it on the mission's record), at no compute cost, as long as a question may wait. The resume hands
    back the notes the user sent (into `notes`, which the next stage reads); then on where the routing
    had sent the mission."""
    _wait_for_token(states, p, AWAIT_PAUSE, mode="pause", result_path="$.envelope.notes", reason="pause")
    states[f"{AWAIT_PAUSE}.resume"] = {
        "Type": "Pass",
        "Result": False,
        "ResultPath": "$.envelope.pause",
        "Next": next_state,
    }


def _guards(states: dict[str, Any]) -> None:
    for bound in ["max_agent_hops"] + [b for b, _ in COUNTER_GUARDS]:
        states[f"guard.{bound}"] = {
            "Type": "Pass",
            "Result": {
                "Error": "BoundReached",
                "Cause": f"the state machine stopped the mission at {bound}",
                "at": {"state": f"guard.{bound}", "reason": bound},
            },
            "ResultPath": "$.envelope.failure",
            "Next": FINALIZE,
        }
    states[UNROUTABLE] = {
        "Type": "Pass",
        "Result": {
            "Error": "Unroutable",
            "Cause": "the stage chose a next stage it has no route to",
            "at": {"state": UNROUTABLE, "reason": "unroutable"},
        },
        "ResultPath": "$.envelope.failure",
        "Next": FINALIZE,
    }


def _reachable(states: dict[str, Any], start: str) -> dict[str, Any]:
    """Only the states a transition can reach (Step Functions rejects unreachable ones)."""
    seen, frontier = {start}, [start]
    while frontier:
        state = states[frontier.pop()]
        targets = [state.get("Next"), state.get("Default")]
        targets += [c.get("Next") for c in state.get("Choices", [])]
        targets += [c.get("Next") for c in state.get("Catch", [])]
        for target in targets:
            if target and target not in seen:
                seen.add(target)
                frontier.append(target)
    return {name: state for name, state in states.items() if name in seen}
