"""PipelineConfig -> Amazon States Language. A pure function.

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
Function ARNs are placeholders `${fn_<stage>}` and `${fn_interrupt}`, filled by CDK's
definition substitutions or by the local emulation.
"""

from __future__ import annotations

import json
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


def placeholders(pipeline: PipelineConfig) -> list[str]:
    """Substitution keys the definition needs (without `${}`)."""
    return [f"fn_{name}" for name in pipeline.stage_names()] + ["fn_interrupt"]


def initial_state(envelope: dict[str, Any], max_agent_hops: int) -> dict[str, Any]:
    """The execution input for a mission (a new one, or one forked from a checkpoint).

    `max_hops` leaves one hop for the final stage, as the runner's own bound check does.
    """
    hops = int((envelope.get("counters") or {}).get("agent_hops", 0))
    return {"envelope": envelope, "asl": {"hops": hops, "max_hops": max_agent_hops - 1}}


def compile_pipeline(pipeline: PipelineConfig, *, comment: str | None = None) -> dict[str, Any]:
    return _Compiler(pipeline).build(comment)


def compile_json(pipeline: PipelineConfig) -> str:
    return json.dumps(compile_pipeline(pipeline), indent=2, sort_keys=False)


class _Compiler:
    def __init__(self, pipeline: PipelineConfig):
        self.p = pipeline
        self.states: dict[str, Any] = {}
        self.groups = pipeline.parallel_groups()

    # -- naming -------------------------------------------------------------------

    def entry(self, stage: str) -> str:
        """The state a transition to `stage` (or to a parallel group) enters."""
        group = self.p.group_of(stage)
        if group:
            return "parallel." + "+".join(group)
        if self.p.agent(stage).fan_out:
            return f"{stage}.map"
        return stage

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
        for kind in InterruptKind:
            self._await(kind)
        self._guards()
        self._finalize()
        start = self._start()
        return {
            "Comment": comment or f"Mission pipeline '{self.p.name}' (compiled by missions)",
            "StartAt": start,
            "TimeoutSeconds": self._machine_timeout(),
            "States": _reachable(self.states, start),
        }

    def _start(self) -> str:
        """A new mission begins at the first stage; a forked one where its checkpoint left off."""
        stages = [a.name for a in self.p.agents if not self.p.group_of(a.name)] + self.p.group_names()
        self.states[START] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.envelope.next_stage", "StringEquals": stage, "Next": self.entry(stage)}
                for stage in stages
            ],
            "Default": self.entry(self.p.start),
        }
        return START

    def _machine_timeout(self) -> int:
        """The last-resort guard: every stage at its timeout with retries, plus waiting humans."""
        b = self.p.bounds
        per_stage = max(a.timeout_seconds * (a.max_retries + 1) + 60 for a in self.p.agents)
        waits = self.p.interrupt_timeout_seconds * min(b.max_agent_hops, 10)
        return min(per_stage * (b.max_agent_hops + 2) + waits, 365 * 24 * 3600)

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
        state: dict[str, Any] = {
            "Type": "Task",
            "Resource": function_placeholder(agent.name),
            "Parameters": parameters
            or {"stage": agent.name, "mode": mode, "hop.$": "$.asl.hops", "envelope.$": "$.envelope"},
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
        interval = self.p.retry_interval_seconds
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

    def _failed_pass(self, state: str, reason: str, next_state: str = FINALIZE) -> None:
        self.states[f"{state}.failed"] = {
            "Type": "Pass",
            "Result": {"state": state, "reason": reason},
            "ResultPath": "$.envelope.failure.at",
            "Next": next_state,
        }

    def _stage(self, agent: AgentConfig) -> None:
        name = agent.name
        if agent.fan_out:
            self.states[f"{name}.map"] = self._map(agent)
            self.states[name] = self._task(agent, "join", f"{name}.count")
        else:
            self.states[name] = self._task(agent, "run", f"{name}.count")
        error_target = self.entry(agent.error_next) if agent.error_next else FINALIZE
        self._failed_pass(name, "stage_failed", error_target)
        self.states[f"{name}.count"] = {
            "Type": "Pass",
            "Parameters": {"hops.$": "States.MathAdd($.asl.hops, 1)", "max_hops.$": "$.asl.max_hops"},
            "ResultPath": "$.asl",
            "Next": f"{name}.route",
        }
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
                    "Next": f"await.{kind.value}",
                }
            )
        for target in targets:
            if target != final:
                choices.append(
                    {"Variable": "$.envelope.next_stage", "StringEquals": target, "Next": self.entry(target)}
                )
        return choices

    def _final_stage(self, agent: AgentConfig) -> None:
        """The final stage ends the mission, unless it asks a human first. Asking counts a hop (on that
        path only: a mission that just ends pays no extra transition), so the run that resumes with
        the answer has a hop, and a checkpoint, of its own; without it the resumed run found the
        asking run's checkpoint, replayed the question, and the mission never ended."""
        self.states[agent.name] = self._task(agent, "run", f"{agent.name}.route")
        self._failed_pass(agent.name, "stage_failed")
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
            "Default": DONE,
        }
        for kind in InterruptKind:
            self.states[f"{agent.name}.asks.{kind.value}"] = {
                "Type": "Pass",
                "Parameters": {"hops.$": "States.MathAdd($.asl.hops, 1)", "max_hops.$": "$.asl.max_hops"},
                "ResultPath": "$.asl",
                "Next": f"await.{kind.value}",
            }
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
        self.states[f"{name}.count"] = {  # each branch is a hop, as the runner counts it
            "Type": "Pass",
            "Parameters": {"hops.$": f"States.MathAdd($.asl.hops, {len(group)})", "max_hops.$": "$.asl.max_hops"},
            "ResultPath": "$.asl",
            "Next": self.entry(join),
        }

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

    def _await(self, kind: InterruptKind) -> None:
        name = f"await.{kind.value}"
        self.states[name] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {
                "FunctionName": INTERRUPT_FUNCTION,
                "Payload": {"mode": "interrupt", "envelope.$": "$.envelope", "task_token.$": "$$.Task.Token"},
            },
            "TimeoutSeconds": self.p.interrupt_timeout_seconds,
            "ResultPath": "$.envelope.resume",
            "Retry": [
                {
                    "ErrorEquals": TRANSIENT_LAMBDA_ERRORS,
                    "IntervalSeconds": self.p.retry_interval_seconds,
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
        self.states[f"{name}.timeout"] = {
            "Type": "Pass",
            "Result": {"state": name, "reason": "interrupt_timeout"},
            "ResultPath": "$.envelope.failure.at",
            "Next": FINALIZE,
        }
        self._failed_pass(name, "interrupt_failed")
        configured = self.p.resume_stage(kind)
        if configured:
            self.states[f"{name}.resume"] = {"Type": "Pass", "Next": self.entry(configured)}
            return
        # resume where the human was asked
        self.states[f"{name}.resume"] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.envelope.interrupt.stage", "StringEquals": stage, "Next": self.entry(stage)}
                for stage in self.p.stage_names()
                if not self.p.group_of(stage)
            ],
            "Default": UNROUTABLE,
        }

    def _guards(self) -> None:
        for bound in ["max_agent_hops"] + [b for b, _ in COUNTER_GUARDS]:
            self.states[f"guard.{bound}"] = {
                "Type": "Pass",
                "Result": {
                    "Error": "BoundReached",
                    "Cause": f"the state machine stopped the mission at {bound}",
                    "at": {"state": f"guard.{bound}", "reason": bound},
                },
                "ResultPath": "$.envelope.failure",
                "Next": FINALIZE,
            }
        self.states[UNROUTABLE] = {
            "Type": "Pass",
            "Result": {
                "Error": "Unroutable",
                "Cause": "the stage chose a next stage it has no route to",
                "at": {"state": UNROUTABLE, "reason": "unroutable"},
            },
            "ResultPath": "$.envelope.failure",
            "Next": FINALIZE,
        }

    def _finalize(self) -> None:
        final = self.p.agent(self.p.final)
        self.states[FINALIZE] = self._task(final, "finalize", DONE)
        self.states[FAILED] = {
            "Type": "Fail",
            "Error": "MissionFailed",
            "Cause": "the final stage failed on the failure path",
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
