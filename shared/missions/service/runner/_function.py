"""Running a stage's typed function (missions.core.capability.stages): its view of the mission, its reads, its state,
and the replay of what the attempt that asked did before asking, when it resumes here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from missions.core.capability.registry import Capability, InterruptRequested, StageContext, StageDefinitionError
from missions.core.capability.stages import Check, Ctx, Replay, StageFunction
from missions.core.capability.tools import ConfirmationRequired
from missions.core.mission.envelope import Envelope, InterruptResponse
from missions.core.mission.events import EventType
from missions.core.sandbox import SandboxRequest, SandboxResult
from missions.service.runner._base import Emit, Invocation, StageServices
from missions.service.runner._memory import UserMemory
from missions.service.runner._model import ModelCalls, as_json, messages
from missions.service.runner._repair import Repairs
from missions.service.runner._tools import StageTools


@dataclass(eq=False)
class StageFunctions:
    _capability: Capability
    _services: StageServices
    _model: ModelCalls
    _tools: StageTools
    _invocation: Invocation

    def work(self, ctx: StageContext, emit: Emit, partial: bool = False) -> dict[str, Any]:
        """The stage's function; a stage without one outputs nothing, and a fan-out stage's join without
        one hands its items' outputs to the next stage."""
        function = self._capability.function_for(ctx.agent.name)
        if function is not None:
            return self._run(ctx, function, emit, partial=partial)
        if ctx.item_results is not None:
            return {"items": list(ctx.item_results)}
        return {}

    def finalize_output(self, ctx: StageContext, failure: dict[str, Any]) -> dict[str, Any]:
        """The final stage on the failure path: its function without the model, and never a crash."""
        function = self._capability.function_for(ctx.agent.name)
        ctx.scratch["failure"] = failure
        if function is not None:
            try:
                return self._run(ctx, function, lambda *args, **kwargs: None, failure=failure)
            except Exception as exc:  # recorded: the mission must still end with what it has
                ctx.envelope.record_error(ctx.agent.name, type(exc).__name__, str(exc))
        return {"answer": None, "failure": failure}

    def _run(
        self,
        ctx: StageContext,
        function: StageFunction,
        emit: Emit,
        failure: dict[str, Any] | None = None,
        partial: bool = False,
    ) -> dict[str, Any]:
        """The function with its arguments. On the failure path (`failure`) it runs without the model, and
        learns why from `ctx.failure`."""
        envelope, agent, pipeline = ctx.envelope, ctx.agent, self._capability.pipeline
        if ctx.item_results is not None:  # the fan-out stage's join: its items' outputs, for the next stage
            return {"items": list(ctx.item_results)}
        kept = envelope.replay or {}
        envelope.replay = None
        replay = Replay.from_json(kept if ctx.resume is not None and kept.get("stage") == agent.name else None)
        made = Replay()
        tools = self._tools.executor(ctx, emit, replay=replay.tools) if agent.has_tools else None
        ctx.tools = tools

        def think(model: type[BaseModel], facts: Mapping[str, Any], check: Check | None) -> BaseModel:
            if failure is not None:
                raise StageDefinitionError(f"stage '{agent.name}' asked its model on the failure path")
            if replay.thoughts:  # the attempt that asked had this answer: the model is not asked again
                answer = model.model_validate(replay.thoughts.pop(0))
            else:
                rendered = {name: as_json(value) for name, value in facts.items()}  # once, for the prompt and facts
                answer = Repairs(self._model, self._services.repairs).think(
                    ctx,
                    messages(ctx, rendered),
                    model,
                    facts={name: json.loads(text) for name, text in rendered.items()},
                    check=check,
                )
            made.thoughts.append(answer.model_dump(mode="json"))  # the valid answer (repaired, if it was)
            return answer

        def fan_out(items: list[Any]) -> None:
            envelope.work_items = items

        sequential = ctx.item is None and not partial
        new_state: list[BaseModel] = []

        def update_state(value: BaseModel) -> None:
            if function.state_model is not None and not isinstance(value, function.state_model):
                raise StageDefinitionError(
                    f"stage '{agent.name}' updated the state with {type(value).__name__}, "
                    f"not {function.state_model.__name__}"
                )
            new_state[:] = [value]

        def end_reason(reason: str, failed: bool) -> None:
            if envelope.terminal_reason is None:
                envelope.terminal_reason = reason
                envelope.failed = failed

        if sequential:
            envelope.work_items = None  # only the stage right before a fan-out stage gives it items
        arguments: dict[str, Any] = {  # an optional read of a stage that has not run (the failure path) is None
            name: None
            if name in function.optional and name not in envelope.outputs
            else model.model_validate(envelope.output(name))
            for name, model in function.reads.items()
        }
        if "ctx" in function.wants:
            arguments["ctx"] = Ctx(
                stage=agent.name,
                goal=envelope.raw_input,
                context=envelope.context,
                answers=envelope.answers,
                counters=envelope.counters,
                bounds=envelope.bounds,
                answer=ctx.resume,
                asked=[
                    *(InterruptResponse.model_validate(a) for a in replay.answers),
                    *([ctx.resume] if ctx.resume is not None and not ctx.approved_call else []),
                ],
                think=think,
                tools=tools,
                fan_out=fan_out,
                save_artifact=ctx.save_artifact,
                repository_root=ctx.repository_root,
                failure=failure,
                report=lambda kind, message: envelope.record_error(agent.name, kind, message),
                terminal_reason=envelope.terminal_reason,
                citations=envelope.citations,
                update_state=update_state if sequential else None,
                read_artifact=ctx.read_artifact,
                end_reason=end_reason if agent.name == pipeline.final else None,
                memory=UserMemory(self._services.memory, envelope.user_id, self._capability.name, agent)
                if self._services.memory is not None
                else None,
                analyze=(lambda request: self._analyze(request, agent.name, emit))
                if self._services.sandbox is not None
                else None,
                delegates_to=pipeline.delegates_to,
            )
        if "state" in function.wants:
            arguments["state"] = _state(envelope, function)
        if "item" in function.wants:
            arguments["item"] = ctx.item
        if "items" in function.wants and function.items_model is not None:
            source = next(a.name for a in pipeline.agents if a.fan_out and a.default_next == agent.name)
            arguments["items"] = [
                function.items_model.model_validate(item) for item in envelope.output(source).get("items", [])
            ]
        t0 = self._services.clock()
        try:
            output = function.func(**arguments)
        except (InterruptRequested, ConfirmationRequired):  # an approval too: the call the user sees is the one run
            made.tools = dict(tools.kept) if tools is not None else {}
            view = arguments.get("ctx")
            made.answers = [a.model_dump(mode="json") for a in view.answered] if isinstance(view, Ctx) else []
            envelope.replay = {"stage": agent.name, **made.to_json()}
            raise
        finally:
            if tools is not None:
                self._invocation.timings.tools_ms += (self._services.clock() - t0) * 1000
                envelope.counters.tool_calls += tools.executed
        if not isinstance(output, function.output):
            raise StageDefinitionError(
                f"stage '{agent.name}' returned {type(output).__name__}, "
                f"not {function.output.__name__} ({function.where})"
            )
        if new_state:
            envelope.state = new_state[0].model_dump(mode="json")
        return output.model_dump(mode="json")

    def _analyze(self, request: SandboxRequest, stage: str, emit: Emit) -> SandboxResult:
        """One script in the sandbox; its time counts as the stage's tool time, and it leaves an event.
        Only a stage declared `sandbox = true` may (in AWS only its role may invoke the sandbox)."""
        assert self._services.sandbox is not None
        if not self._capability.pipeline.agent(stage).sandbox:
            raise StageDefinitionError(f"stage '{stage}' runs an analysis script but does not declare sandbox = true")
        t0 = self._services.clock()
        try:
            result = self._services.sandbox().run(request)
        finally:
            self._invocation.timings.tools_ms += (self._services.clock() - t0) * 1000
        emit(
            EventType.ANALYSIS_COMPLETED,
            tier=request.tier,
            status=result.status,
            error_kind=result.error_kind,
            error=result.error,
            duration_ms=round(result.duration_ms, 3),
            chart=result.chart_png is not None,
        )
        return result


def _state(envelope: Envelope, function: StageFunction) -> BaseModel | None:
    """The mission state as the function's model: None before any stage wrote it, if it allows."""
    assert function.state_model is not None
    if envelope.state is None and function.state_optional:
        return None
    try:
        return function.state_model.model_validate(envelope.state or {})
    except ValidationError as exc:
        why = "no stage wrote yet" if envelope.state is None else f"does not match {function.state_model.__name__}"
        raise StageDefinitionError(
            f"stage '{function.name}' reads the mission state, which {why}: {exc.errors()[0]['msg']}"
        ) from None
