"""The stages' machine: an Express segment, or the whole mission on one Standard machine."""

from __future__ import annotations

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
    PAUSE_ROUTE,
    SEGMENT_CHAIN,
    SEGMENT_END,
    SEGMENT_FAIL,
    SEGMENT_HANDED,
    SEGMENT_HEARTBEAT,
    SEGMENT_REPORT,
    SEGMENT_START,
    SFN_SDK_TRANSIENT_ERRORS,
    SFN_TRANSIENT_ERRORS,
    START,
    TRANSIENT_LAMBDA_ERRORS,
    UNROUTABLE,
    function_placeholder,
    segment_seconds,
)
from missions.core.pipeline.compiler._states import (
    _ENDED,
    _PAUSED,
    _asl,
    _await,
    _await_branches,
    _await_pause,
    _entry,
    _failed_pass,
    _guards,
    _machine_timeout,
    _mission_failed,
    _reachable,
    _retry,
)
from missions.core.pipeline.config import AgentConfig, PipelineConfig


def _sfn_retry(errors: list[str]) -> list[dict[str, Any]]:
    """A call to Step Functions made again when it may work then (a throttle, a fault of the service)."""
    return [{"ErrorEquals": errors, "IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 2.0}]


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
        if how == "continue":  # the next segment starts straight away: with a fresh restart count
            self.states[name] = {
                "Type": "Pass",
                "Parameters": _asl("$.asl.hops", restarts=0, exit=how),
                "ResultPath": "$.asl",
                "Next": SEGMENT_END,
            }
        self._segment_end()
        return name

    def _segment_end(self) -> None:
        """A segment that continues starts the next one itself (the mission's machine still waits on its
        token); any other end (done, a question, a pause, a mission that ended meanwhile, a next segment
        that could not start) reports to the token, and the mission's machine goes on from there."""
        self.states[SEGMENT_END] = {
            "Type": "Choice",
            "Choices": [
                {
                    "And": [
                        {"Variable": "$.asl.exit", "StringEquals": "continue"},
                        {"Not": {"And": list(_PAUSED)}},
                        {"Not": {"And": list(_ENDED)}},
                    ],
                    "Next": SEGMENT_HEARTBEAT,
                }
            ],
            "Default": SEGMENT_REPORT,
        }
        # the mission's machine hears that its chain goes on (a segment lives EXPRESS_SECONDS at most, so
        # it hears at least that often; the first segment needs none: the machine's wait has just begun)
        self.states[SEGMENT_HEARTBEAT] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskHeartbeat",
            "Parameters": {"TaskToken.$": "$.token"},
            "ResultPath": None,
            "Retry": _sfn_retry(SFN_SDK_TRANSIENT_ERRORS),
            # no Catch: a token refused is a mission whose machine gave up on this chain (it timed out, or
            # ended): the chain ends here
            "Next": SEGMENT_CHAIN,
        }
        self.states[SEGMENT_CHAIN] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::states:startExecution",
            "Parameters": {
                "StateMachineArn.$": "$$.StateMachine.Id",
                # unique: the chain's (where it began, how often it was started there), then the hop
                "Name.$": "States.Format('{}-{}-{}', $.envelope.mission_id, $.chain, $.asl.hops)",
                "Input": {"envelope.$": "$.envelope", "asl.$": "$.asl", "token.$": "$.token", "chain.$": "$.chain"},
            },
            "ResultPath": None,
            "Retry": _sfn_retry(SFN_TRANSIENT_ERRORS),
            # the mission's machine starts the next segment instead (two transitions more, nothing lost)
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": SEGMENT_REPORT}],
            "Next": SEGMENT_HANDED,
        }
        self.states[SEGMENT_REPORT] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskSuccess",
            # the mission's machine keeps the envelope and the asl block of it
            "Parameters": {"TaskToken.$": "$.token", "Output.$": "States.JsonToString($)"},
            "ResultPath": None,
            "Retry": _sfn_retry(SFN_SDK_TRANSIENT_ERRORS),
            "Next": SEGMENT_HANDED,
        }
        self.states[SEGMENT_HANDED] = {"Type": "Succeed"}

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
            for kind in self.p.awaited():
                _await(self.states, self.p, kind)
            if self.p.asks_in_branches():
                _await_branches(self.states, self.p)
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
        if not self.segmented:
            return START
        # a segment ends after `segment_hops` stages from the hop it starts at (a restart: the same end)
        self.states[SEGMENT_START] = {
            "Type": "Pass",
            "Parameters": _asl("$.asl.hops", **{"segment_end.$": f"States.MathAdd($.asl.hops, {self.p.segment_hops})"}),
            "ResultPath": "$.asl",
            "Next": START,
        }
        return SEGMENT_START

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
            "Choices": self._choices(self.p.targets_of(agent.name), joins=name in self._joins()),
            "Default": UNROUTABLE,
        }

    def _joins(self) -> set[str]:
        """The stages that join branches (a group's next stage, a fan-out stage): they wait when branches asked."""
        return {self.p.agent(group[0]).default_next or "" for group in self.groups} | {
            a.name for a in self.p.agents if a.fan_out
        }

    def _choices(self, targets: list[str], joins: bool = False) -> list[dict[str, Any]]:
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
        for kind in self.p.awaited():
            choices.append(
                {
                    "Variable": "$.envelope.next_stage",
                    "StringEquals": f"await:{kind.value}",
                    "Next": self._exit("await") if self.segmented else f"await.{kind.value}",
                }
            )
        if joins:
            choices.append(
                {
                    "Variable": "$.envelope.next_stage",
                    "StringEquals": BRANCHES_ROUTE,
                    "Next": self._exit("await") if self.segmented else AWAIT_BRANCHES,
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
        waits = {f"await:{kind.value}": (kind.value, f"await.{kind.value}") for kind in self.p.awaited()}
        if agent.name in self._joins():  # it joins a group whose branches may ask
            waits[BRANCHES_ROUTE] = ("branches", AWAIT_BRANCHES)
        self.states[f"{agent.name}.route"] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.envelope.next_stage", "StringEquals": route, "Next": f"{agent.name}.asks.{label}"}
                for route, (label, _) in waits.items()
            ],
            "Default": done,
        }
        for label, wait in waits.values():
            self.states[f"{agent.name}.asks.{label}"] = self._count(1, self._exit("await") if self.segmented else wait)
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
        if not self.segmented:
            self.states[FAILED] = _mission_failed()
            return
        # the final stage failed on the failure path: the mission's machine hears it (and starts the segment
        # again, or ends the mission itself), rather than waiting out the heartbeat
        failed = _mission_failed()
        self.states[FAILED] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskFailure",
            "Parameters": {"TaskToken.$": "$.token", "Error": failed["Error"], "Cause": failed["Cause"]},
            "ResultPath": None,
            "Retry": _sfn_retry(SFN_SDK_TRANSIENT_ERRORS),
            "Next": SEGMENT_FAIL,
        }
        self.states[SEGMENT_FAIL] = failed
