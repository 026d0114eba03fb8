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
given, and its record for the mission's history (missions.core.checkpoints). Nothing it does reads
or writes more as the mission grows, so a stage costs the same at hop 1,000 as at hop 10.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from missions.core import agents as agents_rules
from missions.core.agents import AgentVersion
from missions.core.capability import (
    Capability,
    InterruptRequested,
    StageContext,
    StageDefinitionError,
)
from missions.core.checkpoints import detached, diff, snapshot_due
from missions.core.conversation import CONTEXT_KEY as CONVERSATION_KEY
from missions.core.conversation import MAX_EVIDENCE, MAX_FOCUS, Turn, WorkingMemory, fold
from missions.core.envelope import (
    Citation,
    Counters,
    Envelope,
    Interrupt,
    InterruptKind,
    InterruptResponse,
    StageRecord,
    utcnow,
)
from missions.core.errors import NON_RETRYABLE, NotFound, StageRequestError, TransitionRefused
from missions.core.events import Event, EventType
from missions.core.llm import LLMBudgetExhausted, LLMError, LLMProvider, LLMRequest, LLMResult, TransientLLMError
from missions.core.notes import deliver as deliver_notes
from missions.core.notes import texts as note_texts
from missions.core.offload import EnvelopeCodec
from missions.core.pipeline import AgentConfig, PipelineConfig
from missions.core.redaction import redact
from missions.core.refs import Workspaces
from missions.core.roots import AllowedRoots
from missions.core.routing import Decision, apply, decide
from missions.core.sandbox import SandboxRequest, SandboxResult
from missions.core.stages import Ctx, Replay, StageFunction
from missions.core.tools import ConfirmationRequired, ToolCallRecord, ToolEnv, ToolExecutor, call_id
from missions.core.usage import Outcome, UsageRecord
from missions.ports.agents import UsageStore
from missions.ports.artifacts import ArtifactStore
from missions.ports.checkpoints import TOOL_JOURNAL_SUFFIX, Checkpoint, CheckpointStore
from missions.ports.conversations import ConversationStore, VersionConflict
from missions.ports.events import EventStore
from missions.ports.interrupts import InterruptStore
from missions.ports.memory import LongTermMemory
from missions.ports.missions import MissionStatus, MissionStore
from missions.ports.sandbox import Sandbox
from missions.service.checkpoints import state_at
from missions.service.lifecycle import Lifecycle

MODES = ("run", "join", "branch", "item", "finalize")
log = logging.getLogger(__name__)
AWAIT_PREFIX = "await:"


class StageOutputError(Exception):
    """A stage produced output missing required fields (often a model's fault): retried."""


class Clock(Protocol):
    def __call__(self) -> float: ...


@dataclass
class StageTimings:
    """Where a stage's time went; the overhead is what the runtime itself costs."""

    total_ms: float = 0.0
    llm_ms: float = 0.0
    tools_ms: float = 0.0

    @property
    def overhead_ms(self) -> float:
        return self.total_ms - self.llm_ms - self.tools_ms


@dataclass(frozen=True)
class StageReport:
    """What one invocation did, for metrics: counters before and after, and how the mission ended
    when this stage was its last (None otherwise)."""

    capability: str
    stage: str
    before: Counters
    after: Counters
    ended: str | None = None


@dataclass
class StageServices:
    """Everything a stage touches outside itself; injected so tests can use fakes."""

    checkpoints: CheckpointStore
    events: EventStore
    codec: EnvelopeCodec
    llm: Callable[[Capability], LLMProvider]
    missions: MissionStore | None = None
    interrupts: InterruptStore | None = None  # to expire interrupts that ended unanswered
    artifacts: ArtifactStore | None = None  # versioned documents stages write for the user
    workspaces: Workspaces | None = None  # repositories stages read (capabilities with `repository`)
    secrets: Callable[[str], str] | None = None  # secrets by name, for tools that connect to a service
    memory: Callable[[], LongTermMemory] | None = None  # the users' long-term memory, made when a stage remembers
    sandbox: Callable[[], Sandbox] | None = None  # where analysis scripts run, made when a stage runs one
    conversations: Callable[[], ConversationStore] | None = None  # working memories of conversations
    # the configuration version a mission pinned for an agent: (capability, agent, version) -> it
    agents: Callable[[str, str, int], AgentVersion] | None = None
    usage: Callable[[], UsageStore] | None = None  # where every model call is recorded
    clock: Callable[[], float] = time.perf_counter
    on_timings: Callable[[str, StageTimings], None] | None = None  # benchmarks, metrics


@dataclass(frozen=True)
class StageToolJournal:
    """A stage's tool calls, kept beside the mission's checkpoints as a thread of their own
    ("<mission>#tools", one item per call, named "<stage>@<hop>#<call key>"): the checkpoint store's
    write-once put is what a journal needs, and the stage already may read and write it."""

    checkpoints: CheckpointStore
    mission_id: str
    stage_token: str  # "<stage>@<hop>": the same for every attempt of this stage, unique in the mission

    def recorded(self, key: str) -> ToolCallRecord | None:
        try:
            kept = self.checkpoints.get(self.mission_id + TOOL_JOURNAL_SUFFIX, f"{self.stage_token}#{key}")
        except NotFound:
            return None
        assert kept.envelope is not None  # a journal entry keeps its call whole
        return ToolCallRecord.from_json(kept.envelope["call"])

    def record(self, key: str, call: ToolCallRecord) -> None:
        self.checkpoints.put(
            Checkpoint(
                thread_id=self.mission_id + TOOL_JOURNAL_SUFFIX,
                checkpoint_id=f"{self.stage_token}#{key}",
                parent_id=None,
                stage=self.stage_token.split("@", 1)[0],
                envelope={"call": call.to_json()},
            )
        )


@dataclass
class StageRunner:
    capability: Capability
    services: StageServices
    last_timings: StageTimings = field(default_factory=StageTimings)
    last_report: StageReport | None = None
    # the last stage found its mission ended (cancelled) when it went to record its progress
    mission_ended_meanwhile: bool = False
    last_usage: list[UsageRecord] = field(default_factory=list)  # the model calls of the last invocation
    # the last stage found its user paused the mission: the mission's machine waits after it
    pausing: bool = False
    _deadline: float | None = None

    @property
    def pipeline(self) -> PipelineConfig:
        return self.capability.pipeline

    # -- entry point ----------------------------------------------------------------

    def handle(self, request: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """Run the stage the request names. `deadline` (time.monotonic()) is when its Lambda runs out:
        model calls never run past it, so the stage can still commit what it has."""
        self._deadline = deadline
        self.mission_ended_meanwhile = False
        self.pausing = False
        started = self.services.clock()
        self.last_timings = StageTimings()
        self.last_report = None
        self.last_usage = []
        stage, mode = request.get("stage"), request.get("mode", "run")
        if mode not in MODES:
            raise StageRequestError(f"unknown mode '{mode}'")
        if not isinstance(stage, str) or stage not in self.pipeline.stage_names():
            raise StageRequestError(f"capability '{self.capability.name}' has no stage '{stage}'")
        if not isinstance(request.get("envelope"), dict):
            raise StageRequestError("request has no envelope")
        given: dict[str, Any] = request["envelope"]
        if mode in ("run", "join", "finalize"):
            # the stage gets a copy: values it changes in place must not change `given`, which its
            # checkpoint's delta is taken against
            envelope = self.services.codec.decode(detached(given))
        else:
            envelope = self.services.codec.decode(given)
        if envelope.capability != self.capability.name:
            raise StageRequestError(f"envelope belongs to '{envelope.capability}', not '{self.capability.name}'")
        envelope.segment_yield = False  # said afresh by each stage (the app's segment clock)
        envelope.pause = False  # likewise: only the stage that finds its mission pausing says it
        before = envelope.counters.model_copy()
        try:
            if mode == "branch" or mode == "item":
                return self._run_partial(envelope, stage, mode, request)
            hop = request.get("hop")
            if mode == "join":
                return self._join(envelope, given, stage, hop)
            if mode == "finalize":
                return self._finalize(envelope, given, stage, hop)
            return self._run(envelope, given, stage, hop)
        finally:
            self.last_timings.total_ms = (self.services.clock() - started) * 1000
            if self.last_report is None:
                self.last_report = StageReport(self.capability.name, stage, before, envelope.counters.model_copy())
            if self.services.on_timings is not None:
                self.services.on_timings(stage, self.last_timings)

    # -- the three ways a whole stage runs ------------------------------------------------------

    def _run(self, envelope: Envelope, given: dict[str, Any], stage: str, asl_hops: Any) -> dict[str, Any]:
        """A stage on its own: pre-hook, the model, tools, post-hook, then routing."""
        return self._whole_stage(envelope, given, stage, asl_hops, work=lambda ctx, emit: self._work(ctx, emit))

    def _join(self, envelope: Envelope, given: dict[str, Any], stage: str, asl_hops: Any) -> dict[str, Any]:
        """A fan-out stage after its Map: fold its items' outputs (no model call: the items made
        theirs), then route."""
        return self._whole_stage(
            envelope, given, stage, asl_hops, work=lambda ctx, emit: self._work(ctx, emit), fan_out=True
        )

    def _finalize(self, envelope: Envelope, given: dict[str, Any], stage: str, asl_hops: Any) -> dict[str, Any]:
        """The failure path: record why the mission could not go on, run the final stage's hooks without
        the model, and end the mission failed with whatever it has."""
        failure = self._absorb_failure(envelope) or {
            "reason": "stage_failed",
            "state": None,
            "error": "unknown",
            "cause": "",
        }
        if envelope.interrupt is not None and envelope.resume is None:  # a question that timed out
            envelope.record_error(
                envelope.interrupt.stage, "interrupt", f"interrupt {envelope.interrupt.id} ended unanswered"
            )
            self._expire(envelope.mission_id, envelope.interrupt.id)
            envelope.interrupt = None
        return self._whole_stage(
            envelope,
            given,
            stage,
            asl_hops,
            work=lambda ctx, emit: self._finalize_output(ctx, failure),
            failure=failure,
        )

    def _whole_stage(
        self,
        envelope: Envelope,
        given: dict[str, Any],
        stage: str,
        asl_hops: Any,
        *,
        work: Callable[[StageContext, Callable[..., None]], dict[str, Any]],
        failure: dict[str, Any] | None = None,
        fan_out: bool = False,
    ) -> dict[str, Any]:
        agent, prompt, version = self._configured(envelope, stage)
        final = stage == self.pipeline.final
        events: list[Event] = []
        # the state machine's own count names the checkpoint: a stage cannot corrupt it
        hop = (asl_hops if isinstance(asl_hops, int) else envelope.counters.agent_hops) + 1
        checkpoint_id = f"{hop:04d}-{stage}"
        before_stage = envelope.counters.model_copy()

        def emit(event_type: EventType, /, _stage: str | None = None, **payload: Any) -> None:
            """An event of this stage (or, replayed from a parallel branch, of that branch's stage)."""
            event = Event(type=event_type, mission_id=envelope.mission_id, stage=_stage or stage, payload=payload)
            events.append(event)

        if envelope.counters.agent_hops == 0:
            emit(EventType.FLOW_STARTED, capability=envelope.capability, goal=envelope.raw_input[:500])
        if failure is None:
            self._absorb_failure(envelope)  # a failure is only carried to the failure path
        records: list[StageRecord] = []  # this checkpoint's: the branches it joins, then itself
        item_results = self._absorb_branches(envelope, emit, fan_out, records)
        resume, approved_call = self._absorb_resume(envelope, emit)
        received = deliver_notes(envelope.context, envelope.notes)  # what the user said since the last stage
        envelope.notes = None
        if received:
            emit(EventType.NOTE_DELIVERED, note_ids=[n.note_id for n in received], texts=[n.text for n in received])

        envelope.current_stage = stage
        envelope.counters.agent_hops += 1
        if agent.counts_iteration:
            envelope.counters.iterations += 1
        emit(EventType.AGENT_STARTED, hop=hop, iteration=envelope.counters.iterations, **_pinned(version, envelope))
        before = envelope.counters.model_copy()
        started_at = utcnow()
        t0 = self.services.clock()
        status = "ok"
        ctx = StageContext(
            envelope,
            agent,
            self.pipeline,
            resume=resume,
            approved_call=approved_call,
            item_results=item_results,
            system_prompt=prompt,
            artifacts=self.services.artifacts,
            write_token=f"{stage}@{hop}",
            workspaces=self.services.workspaces,
        )
        try:
            output = work(ctx, emit)
            envelope.outputs[agent.key] = output
            if final:
                self._finish(envelope, output, failure, emit)
            else:
                decision = decide(self.pipeline, envelope, stage, output)
                self._route(envelope, stage, decision, output, emit)
        except (InterruptRequested, ConfirmationRequired) as asked:
            status = "interrupted"
            interrupt = self._interrupt_from(asked, stage)
            envelope.interrupt = interrupt
            envelope.next_stage = f"{AWAIT_PREFIX}{interrupt.kind.value}"
            emit(
                EventType.INTERRUPT_RAISED,
                interrupt_id=interrupt.id,
                kind=interrupt.kind.value,
                question=interrupt.question,
                **({"call_id": interrupt.data["call_id"]} if "call_id" in interrupt.data else {}),
            )
        except Exception as exc:
            self._fail(envelope, stage, checkpoint_id, exc, events)
            raise

        delta = envelope.counters.model_copy()
        elapsed = (self.services.clock() - t0) * 1000
        records.append(
            StageRecord(
                stage=stage,
                started_at=started_at,
                duration_ms=round(elapsed, 3),
                status=status,
                next_stage=envelope.next_stage,
                llm_calls=delta.llm_calls - before.llm_calls,
                tool_calls=delta.tool_calls - before.tool_calls,
            )
        )
        emit(EventType.AGENT_COMPLETED, status=status, duration_ms=round(elapsed, 3), next_stage=envelope.next_stage)
        if final and status != "interrupted":
            emit(
                EventType.FLOW_COMPLETED,
                terminal_reason=envelope.terminal_reason,
                counters=envelope.counters.model_dump(),
            )
        if failure is not None:
            status = "failed"
        ended = ("failed" if status == "failed" else "completed") if envelope.next_stage is None else None
        if ended is not None:  # before the end is recorded: a failing write retries this stage, losing nothing
            self._fold_into_conversation(envelope, ended)
        self.last_report = StageReport(self.capability.name, stage, before_stage, envelope.counters.model_copy(), ended)
        return self._commit(envelope, given, stage, checkpoint_id, events, status, records, before_stage.agent_hops)

    def _fold_into_conversation(self, envelope: Envelope, ended: str) -> None:
        """A mission that is a turn of a conversation folds what it found into its working memory (once,
        whoever retries; a mission of the same conversation ending at the same time is read again)."""
        remembered = envelope.context.get(CONVERSATION_KEY)
        if not isinstance(remembered, dict) or self.services.conversations is None:
            return
        store, conversation_id = self.services.conversations(), str(remembered.get("id"))
        result = self._result(envelope)
        answer = result.get("answer") if isinstance(result.get("answer"), str) else ""
        turn = Turn(
            mission_id=envelope.mission_id,
            capability=envelope.capability,
            goal=envelope.raw_input,
            answer=answer or "",
            status=ended,
            notes=note_texts(envelope.context),
        )
        cited = [str(ref) for ref in result.get("citations") or []][:MAX_EVIDENCE]
        # a capability shapes what the conversation keeps in focus: its final output's `focus` (entities, files)
        kept = envelope.output(self.pipeline.final).get("focus")
        focus = [str(name) for name in kept][:MAX_FOCUS] if isinstance(kept, list) else []
        for _ in range(5):
            found = store.get(envelope.user_id, conversation_id)
            memory, version = found or (WorkingMemory(conversation_id=conversation_id, user_id=envelope.user_id), 0)
            if any(t.mission_id == envelope.mission_id for t in memory.turns):
                return  # an earlier attempt of this stage folded it
            try:
                store.put(fold(memory, turn, citations=cited, focus=focus), version)
                return
            except VersionConflict:
                continue
        raise VersionConflict(f"conversation {conversation_id} kept changing: the turn was not folded")

    def _work(self, ctx: StageContext, emit: Callable[..., None], partial: bool = False) -> dict[str, Any]:
        """The stage's function (missions.core.stages); a stage without one outputs nothing, and a
        fan-out stage's join without one hands its items' outputs to the next stage."""
        function = self.capability.function_for(ctx.agent.name)
        if function is not None:
            return self._run_function(ctx, function, emit, partial=partial)
        if ctx.item_results is not None:
            return {"items": list(ctx.item_results)}
        return {}

    def _run_function(
        self,
        ctx: StageContext,
        function: StageFunction,
        emit: Callable[..., None],
        failure: dict[str, Any] | None = None,
        partial: bool = False,
    ) -> dict[str, Any]:
        """A typed stage function (missions.core.stages): its view, its reads, and the replay of what
        the attempt that asked did before asking, when it resumes here. On the failure path (`failure`)
        it runs without the model, and learns why from `ctx.failure`."""
        envelope, agent = ctx.envelope, ctx.agent
        if ctx.item_results is not None:  # the fan-out stage's join: its items' outputs, for the next stage
            return {"items": list(ctx.item_results)}
        kept = envelope.replay or {}
        envelope.replay = None
        replay = Replay.from_json(kept if ctx.resume is not None and kept.get("stage") == agent.name else None)
        made = Replay()
        tools = self._executor(ctx, emit, replay=replay.tools) if agent.has_tools else None
        ctx.tools = tools

        def think(model: type[BaseModel], facts: Mapping[str, Any]) -> BaseModel:
            if failure is not None:
                raise StageDefinitionError(f"stage '{agent.name}' asked its model on the failure path")
            if replay.thoughts:  # the attempt that asked had this answer: the model is not asked again
                answer = model.model_validate(replay.thoughts.pop(0))
            else:
                rendered = {name: _as_json(value) for name, value in facts.items()}  # once, for the prompt and facts
                answer = self._complete(
                    ctx,
                    _messages(ctx, rendered),
                    model,
                    facts={name: json.loads(text) for name, text in rendered.items()},
                )
            made.thoughts.append(answer.model_dump(mode="json"))
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

        def end_reason(reason: str) -> None:
            if envelope.terminal_reason is None:
                envelope.terminal_reason = reason

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
                end_reason=end_reason if agent.name == self.pipeline.final else None,
                memory=_UserMemory(self.services.memory, envelope.user_id, self.capability.name, agent)
                if self.services.memory is not None
                else None,
                analyze=(lambda request: self._analyze(request, agent.name, emit))
                if self.services.sandbox is not None
                else None,
            )
        if "state" in function.wants:
            arguments["state"] = self._state(envelope, function)
        if "item" in function.wants:
            arguments["item"] = ctx.item
        if "items" in function.wants and function.items_model is not None:
            source = next(a.name for a in self.pipeline.agents if a.fan_out and a.default_next == agent.name)
            arguments["items"] = [
                function.items_model.model_validate(item) for item in envelope.output(source).get("items", [])
            ]
        t0 = self.services.clock()
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
                self.last_timings.tools_ms += (self.services.clock() - t0) * 1000
                envelope.counters.tool_calls += tools.executed
        if not isinstance(output, function.output):
            raise StageDefinitionError(
                f"stage '{agent.name}' returned {type(output).__name__}, "
                f"not {function.output.__name__} ({function.where})"
            )
        if new_state:
            envelope.state = new_state[0].model_dump(mode="json")
        return output.model_dump(mode="json")

    def _state(self, envelope: Envelope, function: StageFunction) -> BaseModel | None:
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

    def _analyze(self, request: SandboxRequest, stage: str, emit: Callable[..., None]) -> SandboxResult:
        """One script in the sandbox; its time counts as the stage's tool time, and it leaves an event.
        Only a stage declared `sandbox = true` may (in AWS only its role may invoke the sandbox)."""
        assert self.services.sandbox is not None
        if not self.pipeline.agent(stage).sandbox:
            raise StageDefinitionError(f"stage '{stage}' runs an analysis script but does not declare sandbox = true")
        t0 = self.services.clock()
        try:
            result = self.services.sandbox().run(request)
        finally:
            self.last_timings.tools_ms += (self.services.clock() - t0) * 1000
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

    def _complete(
        self,
        ctx: StageContext,
        messages: list[dict[str, str]],
        output_model: type[BaseModel],
        facts: dict[str, Any] | None = None,
    ) -> BaseModel:
        """One model call for the stage, counted against the mission's bounds and cost."""
        envelope, agent = ctx.envelope, ctx.agent
        if envelope.counters.llm_calls >= envelope.bounds.max_llm_calls:
            raise LLMBudgetExhausted(f"stage '{agent.name}': max_llm_calls ({envelope.bounds.max_llm_calls}) reached")
        version = self._version(envelope, agent.name)
        request = LLMRequest(
            stage=agent.name,
            role=agent.model_role or agent.name,
            messages=messages,
            output_model=output_model,
            temperature=agent.temperature,
            max_tokens=agent.max_tokens,
            envelope=envelope,
            deadline=self._deadline,
            facts=facts or {},
            # the mission's model (its request's), else the version's; None: the environment's for the role
            model=envelope.model or (version.model if version is not None else None),
            fallback_model=version.fallback_model if version is not None else None,
        )
        provider = self.services.llm(self.capability)
        output = ModelOutput(self.services.events, envelope.mission_id, agent.name, ctx.write_token)
        request.on_text, request.on_retry = output.write, output.restart
        t0 = self.services.clock()
        try:
            try:
                result = provider.complete(request)
            finally:
                output.close()
        except LLMError as exc:
            elapsed = (self.services.clock() - t0) * 1000
            self.last_timings.llm_ms += elapsed
            outcome: Outcome = "transient_error" if isinstance(exc, TransientLLMError) else "error"
            self._record_usage(envelope, agent.name, provider, request, None, elapsed, outcome, str(exc))
            raise
        except BaseException:
            self.last_timings.llm_ms += (self.services.clock() - t0) * 1000
            raise
        elapsed = (self.services.clock() - t0) * 1000
        self.last_timings.llm_ms += elapsed
        self._record_usage(envelope, agent.name, provider, request, result, result.latency_ms or elapsed, "ok")
        counters = envelope.counters
        counters.llm_calls += 1
        counters.tokens_in += result.tokens_in
        counters.tokens_out += result.tokens_out
        counters.cost_usd = round(counters.cost_usd + result.cost_usd, 8)
        ctx.scratch["llm_model"] = result.model
        return result.output

    def _record_usage(
        self,
        envelope: Envelope,
        stage: str,
        provider: LLMProvider,
        request: LLMRequest,
        result: LLMResult | None,
        latency_ms: float,
        outcome: Outcome,
        error: str | None = None,
    ) -> None:
        """Keep one model call (missions.core.usage). A store that fails is logged, not raised: the call was
        made and paid for, and a retried stage would only make it again."""
        asked = request.model or _model_for(provider, request.role)
        record = UsageRecord(
            mission_id=envelope.mission_id,
            user_id=envelope.user_id,
            capability=self.capability.name,
            stage=request.stage,
            agent=stage,
            version=envelope.agents.get(stage),
            provider=provider.name,
            model=result.model if result is not None else asked,
            tokens_in=result.tokens_in if result is not None else 0,
            tokens_out=result.tokens_out if result is not None else 0,
            cost_usd=result.cost_usd if result is not None else 0.0,
            latency_ms=round(max(0.0, latency_ms), 3),
            outcome=outcome,
            error=redact(error)[:500] if error else None,
        )
        self.last_usage.append(record)
        if self.services.usage is None:
            return
        try:
            self.services.usage().record(record)
        except Exception:
            log.exception("usage of a model call of mission %s (stage %s) not recorded", envelope.mission_id, stage)

    def _configured(self, envelope: Envelope, stage: str) -> tuple[AgentConfig, str | None, AgentVersion | None]:
        """The stage's agent config, its rendered prompt and the version they come from: the version the
        mission pinned (missions.core.agents), else the capability as shipped."""
        agent = self.pipeline.agent(stage)
        version = self._version(envelope, stage)
        if version is None:
            return agent, self.capability.prompts.get(agent.name), None
        configured = agents_rules.applied(agent, version)
        template = version.prompt if version.prompt is not None else self.capability.prompts.get(agent.name)
        prompt = (
            agents_rules.render(template, agents_rules.variables_for(self.capability, configured)) if template else None
        )
        return configured, prompt, version

    def _version(self, envelope: Envelope, stage: str) -> AgentVersion | None:
        number = envelope.agents.get(stage)
        if number is None or self.services.agents is None:
            return None
        return self.services.agents(self.capability.name, stage, number)

    def _executor(
        self, ctx: StageContext, emit: Callable[..., None], replay: dict[str, Any] | None = None
    ) -> ToolExecutor:
        envelope = ctx.envelope

        def started(tool_id: str, params: dict[str, Any]) -> None:
            preview = {k: v for k, v in params.items() if k != "repo"}
            spec = self.capability.catalog.get(tool_id)
            risk = spec.risk.value if spec is not None else None
            emit(
                EventType.TOOL_STARTED,
                tool=tool_id,
                params=_preview(preview),
                risk=risk,
                call_id=call_id(tool_id, params),  # what an approval names (missions.core.evaluation)
            )

        def completed(record: ToolCallRecord) -> None:
            result = record.result
            envelope.add_citations(result.citations)
            emit(
                EventType.TOOL_COMPLETED,
                tool=record.tool_id,
                status=result.status,
                error=result.error,
                citations=len(result.citations),
                attempts=record.attempts,
                duration_ms=round(record.duration_ms, 3),
                **({"replayed": True} if record.replayed else {}),
            )

        return ToolExecutor(
            catalog=self.capability.catalog,
            agent=ctx.agent,
            approvals=envelope.approvals,
            auto_approve=self.capability.auto_approve_tools,
            on_start=started,
            on_complete=completed,
            budget=max(0, envelope.bounds.max_tool_calls - envelope.counters.tool_calls),
            roots=self.services.workspaces.roots if self.services.workspaces is not None else AllowedRoots(),
            journal=StageToolJournal(self.services.checkpoints, envelope.mission_id, ctx.write_token),
            replay=dict(replay or {}),
            env=ToolEnv(envelope.mission_id, envelope.user_id, self.services.secrets or _no_secret_store),
        )

    def _expire(self, mission_id: str, interrupt_id: str) -> None:
        if self.services.interrupts is not None:
            try:
                self.services.interrupts.expire(mission_id, interrupt_id)
            except NotFound:
                pass  # it timed out before its token was even stored

    # -- absorbing what the state machine brought back --------------------------------

    def _absorb_failure(self, envelope: Envelope) -> dict[str, Any] | None:
        failure = envelope.failure
        if not failure:
            return None
        envelope.failure = None
        at = failure.get("at") or {}
        record = {
            "reason": at.get("reason", "stage_failed"),
            "state": at.get("state"),
            "error": redact(str(failure.get("Error", "Unknown"))),
            "cause": _cause(failure.get("Cause")),
        }
        envelope.record_error(record["state"] or "?", record["error"], record["cause"] or record["reason"])
        return record

    def _absorb_branches(
        self, envelope: Envelope, emit: Callable[..., None], fan_out: bool, records: list[StageRecord]
    ) -> list[Any] | None:
        """Fold what a Parallel group's branches or a Map's items returned; for a fan-out, the items'
        outputs (in order) are this stage's to join. Each branch's record goes into `records` (the
        joining stage's checkpoint keeps them)."""
        results = envelope.branch_results
        if results is None:
            return None
        envelope.branch_results = None
        deltas = [self.services.codec.unpack(r) for r in results]
        for delta in deltas:
            envelope.counters.add(Counters.model_validate(delta["counters"]))
            envelope.add_citations([Citation.model_validate(c) for c in delta.get("citations", [])])
            for error in delta.get("errors", []):
                envelope.record_error(delta["stage"], error["kind"], error["message"])
            for event in delta.get("events", []):
                emit(EventType(event["type"]), _stage=delta["stage"], **event["payload"])
            if delta.get("history"):
                records.append(StageRecord.model_validate(delta["history"]))
        if fan_out:  # the items belong to this stage
            envelope.work_items = None
            return [d["output"] for d in sorted(deltas, key=lambda d: d.get("index", 0))]
        for delta in deltas:  # parallel group: each branch is a stage of its own
            envelope.outputs[self.pipeline.agent(delta["stage"]).key] = delta["output"]
        return None

    def _absorb_resume(self, envelope: Envelope, emit: Callable[..., None]) -> tuple[InterruptResponse | None, bool]:
        """The answer the mission resumes with, and whether it answered a tool call's approval (which
        the tool executor reads from the approvals, not a question of the stage)."""
        resume, interrupt = envelope.resume, envelope.interrupt
        envelope.resume = None
        if resume is None:
            return None, False
        if interrupt is None or resume.interrupt_id != interrupt.id:
            envelope.record_error(
                envelope.current_stage or "?", "resume", f"answer for unknown interrupt {resume.interrupt_id}"
            )
            return None, False
        envelope.interrupt = None
        response = resume.response
        if interrupt.kind is InterruptKind.CONFIRMATION and "call_id" in interrupt.data:
            envelope.approvals[interrupt.data["call_id"]] = bool(response.approved)
        envelope.answers.append(
            {
                "interrupt_id": interrupt.id,
                "kind": interrupt.kind.value,
                "stage": interrupt.stage,
                "question": interrupt.question,
                "response": response.model_dump(exclude_none=True),
            }
        )
        return response, interrupt.kind is InterruptKind.CONFIRMATION and "call_id" in interrupt.data

    # -- routing, finishing, committing ---------------------------------------------

    def _route(
        self, envelope: Envelope, stage: str, decision: Decision, output: dict[str, Any], emit: Callable[..., None]
    ) -> None:
        apply(envelope, decision)
        if "decision" in output:
            emit(
                EventType.CRITIC_DECISION,
                decision=output.get("decision"),
                reason=str(output.get("reason") or output.get("verdict") or "")[:500],
            )
        if decision.terminal_reason:
            emit(EventType.BOUND_REACHED, reason=decision.terminal_reason)
        emit(
            EventType.STAGE_TRANSITION,
            from_stage=stage,
            to_stage=decision.next_stage,
            rule=decision.rule,
            edge_count=envelope.edge_counts.get(decision.edge or "", 0),
        )

    def _finish(
        self, envelope: Envelope, output: dict[str, Any], failure: dict[str, Any] | None, emit: Callable[..., None]
    ) -> None:
        envelope.next_stage = None
        if failure is not None:
            state = failure.get("state")
            reason = failure["reason"]
            envelope.terminal_reason = f"{reason}:{state}" if reason == "stage_failed" and state else reason
            emit(
                EventType.FLOW_ERROR,
                reason=envelope.terminal_reason,
                error=failure.get("error"),
                cause=(failure.get("cause") or "")[:1000],
            )
        envelope.terminal_reason = envelope.terminal_reason or "completed"

    def _finalize_output(self, ctx: StageContext, failure: dict[str, Any]) -> dict[str, Any]:
        """The final stage on the failure path: its function without the model, and never a crash."""
        function = self.capability.function_for(ctx.agent.name)
        ctx.scratch["failure"] = failure
        if function is not None:
            try:
                return self._run_function(ctx, function, lambda *args, **kwargs: None, failure=failure)
            except Exception as exc:  # recorded: the mission must still end with what it has
                ctx.envelope.record_error(ctx.agent.name, type(exc).__name__, str(exc))
        return {"answer": None, "failure": failure}

    def _interrupt_from(self, asked: Exception, stage: str) -> Interrupt:
        if isinstance(asked, ConfirmationRequired):
            return Interrupt(
                kind=InterruptKind.CONFIRMATION,
                stage=stage,
                question=_approval_question(asked),
                data={
                    "call_id": asked.call_id,
                    "tool_id": asked.tool_id,
                    "params": asked.params,
                    "risk": asked.risk.value,
                    **({"preview": asked.preview} if asked.preview else {}),
                },
            )
        assert isinstance(asked, InterruptRequested)
        return Interrupt(kind=asked.kind, stage=stage, question=asked.question, options=asked.options, data=asked.data)

    def _commit(
        self,
        envelope: Envelope,
        given: dict[str, Any],
        stage: str,
        checkpoint_id: str,
        events: list[Event],
        status: str,
        records: list[StageRecord],
        hops_before: int,
    ) -> dict[str, Any]:
        """Write the stage's events and its checkpoint (write-once), then the mission's progress; return
        the envelope for the state machine. An earlier attempt of this very stage that committed wins:
        its state is returned (folded from its checkpoint), so a retried stage returns the same result."""
        checkpoints = self.services.checkpoints
        try:  # an earlier attempt of this very stage committed: its state stands, its events are written
            return state_at(checkpoints, envelope.mission_id, checkpoints.get(envelope.mission_id, checkpoint_id))
        except NotFound:
            pass
        parent = envelope.checkpoint_id
        envelope.checkpoint_id = checkpoint_id
        encoded = self.services.codec.encode(envelope)
        # an attempt that wrote its events and died before its checkpoint left them as the last batch:
        # this one rewrites them in place
        self.services.events.append(envelope.mission_id, checkpoint_id, events)
        whole = snapshot_due(parent, hops_before, envelope.counters.agent_hops)
        checkpoint = Checkpoint(
            thread_id=envelope.mission_id,
            checkpoint_id=checkpoint_id,
            parent_id=parent,
            stage=stage,
            envelope=encoded if whole else None,
            delta=None if whole else diff(given, encoded),
            records=records,
        )
        stored = checkpoints.put(checkpoint)
        if (stored.envelope, stored.delta) != (checkpoint.envelope, checkpoint.delta):
            # an earlier attempt of this very stage committed meanwhile: its state stands
            return state_at(checkpoints, envelope.mission_id, stored)
        notes = self._update_mission(envelope, stage, status)
        if notes is None:
            # the mission ended meanwhile (cancelled): an Express segment cannot be stopped from outside,
            # so the app tells it to hand back now instead of running the stages after this one
            self.mission_ended_meanwhile = True
        # written between two stages, like the machine's own fields (missions.core.checkpoints): the
        # user's notes for the next stage, and whether the machine waits for the user's resume first
        if notes:
            encoded["notes"] = notes
        encoded["pause"] = self.pausing
        return encoded

    def _update_mission(self, envelope: Envelope, stage: str, status: str) -> list[dict[str, Any]] | None:
        """Record the stage on the mission: the notes its record holds (the write returns them), None when
        the lifecycle refused (the mission ended meanwhile). A mission its user is pausing stays pausing,
        and this stage says so (`pausing`)."""
        if self.services.missions is None:
            return []
        fields: dict[str, Any] = {
            "stage": stage,
            "next_stage": envelope.next_stage,
            "phase": self.pipeline.agent(stage).phase or "executing",
            "counters": envelope.counters.model_dump(),
            # the question is only `asking`: the interrupt function makes it pending (and the mission
            # interrupted) once its answer can be delivered, so no client sees a question it cannot answer
            "asking": envelope.interrupt.id if envelope.interrupt else None,
        }
        lifecycle = Lifecycle(self.services.missions)
        try:
            if envelope.next_stage is None:  # the final stage ran: the mission is over
                lifecycle.end(
                    envelope.mission_id,
                    "failed" if status == "failed" else "completed",
                    terminal_reason=envelope.terminal_reason,
                    result=self._result(envelope),
                    **fields,
                )
                return []
            try:
                return lifecycle.progress(envelope.mission_id, **fields).notes
            except TransitionRefused as refused:
                if refused.current != MissionStatus.PAUSING:
                    raise
                recorded = lifecycle.progress_while_pausing(envelope.mission_id, **fields)
                self.pausing = True
                return recorded.notes
        except TransitionRefused as refused:
            # cancelled while this stage ran: its execution is being stopped; the user's choice stands
            log.info("stage %s of %s did not record its progress: %s", stage, envelope.mission_id, refused)
            return None

    def _result(self, envelope: Envelope) -> dict[str, Any]:
        output = envelope.output(self.pipeline.final)
        cited = output.get("citations")
        return {
            "answer": output.get("answer"),
            "output": _preview(output, 20_000),
            "citations": cited if isinstance(cited, list) else [c.ref for c in envelope.citations][:200],
            "evidence": [c.model_dump() for c in envelope.citations][:200],  # everything the tools returned
            "terminal_reason": envelope.terminal_reason,
            # which configuration produced the answer: each agent's version, and the model the mission named
            "agent_versions": dict(envelope.agents),
            "model": envelope.model,
        }

    def _fail(self, envelope: Envelope, stage: str, checkpoint_id: str, exc: Exception, events: list[Event]) -> None:
        """Record a failing attempt's events under a unique prefix, then let it raise."""
        events.append(
            Event(
                type=EventType.FLOW_ERROR,
                mission_id=envelope.mission_id,
                stage=stage,
                payload={
                    "error": type(exc).__name__,
                    "message": str(exc)[:1000],
                    "retryable": not isinstance(exc, NON_RETRYABLE),
                },
            )
        )
        try:
            self.services.events.append(envelope.mission_id, f"{checkpoint_id}!{uuid.uuid4().hex[:8]}", events)
        except Exception:  # the original error matters more than its audit record
            pass

    # -- partial runs inside Parallel and Map ------------------------------------------

    def _run_partial(self, envelope: Envelope, stage: str, mode: str, request: dict[str, Any]) -> dict[str, Any]:
        agent, prompt, version = self._configured(envelope, stage)
        events: list[Event] = []

        def emit(event_type: EventType, /, **payload: Any) -> None:
            events.append(Event(type=event_type, mission_id=envelope.mission_id, stage=stage, payload=payload))

        before = envelope.counters.model_copy()
        citations_before = len(envelope.citations)
        errors_before = len(envelope.errors)
        ctx = StageContext(
            envelope,
            agent,
            self.pipeline,
            item=request.get("item"),
            system_prompt=prompt,
            artifacts=self.services.artifacts,
            write_token=f"{stage}@{request.get('hop')}:{mode}{request.get('index')}",
        )
        emit(EventType.AGENT_STARTED, mode=mode, index=request.get("index"), **_pinned(version, envelope))
        started_at, t0 = utcnow(), self.services.clock()
        try:
            output = self._work(ctx, emit, partial=True)
        except (InterruptRequested, ConfirmationRequired) as exc:
            raise StageDefinitionError(
                f"stage '{stage}' asked a human inside a {mode}; interrupts must come from sequential stages"
            ) from exc
        elapsed = (self.services.clock() - t0) * 1000
        counters = envelope.counters.model_dump()
        delta_counters = {k: counters[k] - before.model_dump()[k] for k in counters}
        delta_counters["agent_hops"] = 1 if mode == "branch" else 0
        emit(EventType.AGENT_COMPLETED, mode=mode, index=request.get("index"), duration_ms=round(elapsed, 3))
        delta = {
            "stage": stage,
            "index": request.get("index", 0),
            "output": output,
            "counters": delta_counters,
            "citations": [c.model_dump() for c in envelope.citations[citations_before:]],
            "errors": [e.model_dump() for e in envelope.errors[errors_before:]],
            "events": [{"type": e.type.value, "payload": e.payload} for e in events],
            "history": StageRecord(
                stage=stage,
                started_at=started_at,
                duration_ms=round(elapsed, 3),
                status="ok",
                llm_calls=delta_counters["llm_calls"],
                tool_calls=delta_counters["tool_calls"],
            ).model_dump()
            if mode == "branch"
            else None,
        }
        return self.services.codec.pack(delta, scope=envelope.mission_id)


def _pinned(version: AgentVersion | None, envelope: Envelope) -> dict[str, Any]:
    """What an agent.started event says about the configuration the stage runs."""
    shown: dict[str, Any] = {}
    if version is not None:
        shown["config_version"] = version.version
    if envelope.model is not None:
        shown["model"] = envelope.model
    return shown


class ModelOutput:
    """Puts a streaming model's answer on the mission's event stream while the stage runs (`llm.output`
    events), so a client following the stream sees it being written. Pieces are gathered for
    FLUSH_SECONDS before one batch is appended (each append is a read and a write of the events table),
    and what is left when the call ends goes last, marked `final`. When the provider asks again (a retry,
    the fallback model), a batch marked `restart` says that the text before it is not the answer. A store
    that fails is logged: the answer still reaches the stage, only its live view is lost."""

    FLUSH_SECONDS = 0.5

    def __init__(self, events: EventStore, mission_id: str, agent: str, token: str, clock: Clock = time.monotonic):
        self._events = events
        self._mission_id = mission_id
        self._agent = agent
        self._token = token  # the stage's "<stage>@<hop>": with a random part, every batch is new
        self._clock = clock
        self._pending: list[str] = []
        self._flushed_at = clock()
        self._parts = 0

    def write(self, piece: str) -> None:
        self._pending.append(piece)
        if self._clock() - self._flushed_at >= self.FLUSH_SECONDS:
            self._flush(final=False)

    def restart(self, attempt: int) -> None:
        """The provider asks again: what is pending goes unsent; a client that was shown earlier parts is
        told to drop them (nothing was shown: nothing to say)."""
        self._pending = []
        if self._parts:
            self._flush(final=False, restart=attempt)

    def close(self) -> None:
        if self._pending or self._parts:
            self._flush(final=True)

    def _flush(self, *, final: bool, restart: int | None = None) -> None:
        text, self._pending = "".join(self._pending), []
        self._flushed_at = self._clock()
        payload: dict[str, Any] = {"agent": self._agent, "part": self._parts, "text": text, "final": final}
        if restart is not None:
            payload["restart"] = restart  # the attempt that begins here: drop the text of the parts before
        self._parts += 1
        event = Event(type=EventType.LLM_OUTPUT, mission_id=self._mission_id, stage=self._agent, payload=payload)
        try:
            self._events.append(self._mission_id, f"{self._token}!llm-{uuid.uuid4().hex[:8]}", [event])
        except Exception:
            log.exception("model output of mission %s (stage %s) not streamed", self._mission_id, self._agent)


def _model_for(provider: LLMProvider, role: str) -> str:
    """The model a provider gives a role when the request names none (the environment's), if it says."""
    model_for = getattr(provider, "model_for", None)
    return str(model_for(role)) if callable(model_for) else provider.name


def _preview(value: Any, limit: int = 300) -> Any:
    """A bounded copy for events and results: long strings are cut, nothing else changes."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, dict):
        return {k: _preview(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_preview(v, limit) for v in value[:50]]
    return value


def _cause(cause: Any) -> str:
    """Step Functions hands a Lambda's error as a JSON string; keep its message, without credentials
    (it becomes the mission's error, a FLOW_ERROR event and the failed mission's result)."""
    if not isinstance(cause, str):
        return redact(str(cause or ""))
    try:
        parsed = json.loads(cause)
        if isinstance(parsed, dict):
            return redact(str(parsed.get("errorMessage") or cause))[:2000]
    except ValueError:
        pass
    return redact(cause)[:2000]


def _messages(ctx: StageContext, rendered: Mapping[str, str]) -> list[dict[str, str]]:
    """A stage function's model call: its prompt, then the goal, the context and the facts it gave
    (each already rendered as JSON)."""
    if ctx.system_prompt is None:
        raise StageDefinitionError(f"stage '{ctx.agent.name}' thinks but has no prompt in capability.toml")
    context = json.dumps(ctx.envelope.context, default=str, sort_keys=True, ensure_ascii=False)[:4000]
    lines = [f"Goal: {ctx.goal}", f"Context: {context}"]
    lines += [f"{name.replace('_', ' ').capitalize()}: {text}" for name, text in rendered.items()]
    return [{"role": "system", "content": ctx.system_prompt}, {"role": "user", "content": "\n".join(lines)}]


def _as_json(value: Any) -> str:
    """A fact as the model reads it: JSON, models dumped, text as written (not \\u-escaped)."""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(
        value, ensure_ascii=False, default=lambda v: v.model_dump(mode="json") if isinstance(v, BaseModel) else str(v)
    )


def _no_secret_store(name: str) -> str:
    raise LookupError(f"no secret store is wired: cannot read '{name}'")


class _UserMemory:
    """The user's long-term memory for one capability's stages: namespaces named after the capability."""

    def __init__(self, memory: Callable[[], LongTermMemory], user_id: str, capability: str, agent: AgentConfig):
        self._memory, self.user_id, self.capability, self.agent = memory, user_id, capability, agent

    @property
    def memory(self) -> LongTermMemory:
        return self._memory()

    def _namespace(self, namespace: str) -> tuple[str, ...]:
        if namespace != self.capability and not namespace.startswith(f"{self.capability}."):
            raise StageDefinitionError(
                f"capability '{self.capability}' may only write memory namespaces named after it, not '{namespace}'"
            )
        return (namespace,)

    def put(self, namespace: str, key: str, value: Any) -> None:
        if not self.agent.remembers:  # in AWS its role could not embed what it writes
            raise StageDefinitionError(f"stage '{self.agent.name}' remembers but does not declare remembers = true")
        self.memory.put(self.user_id, self._namespace(namespace), key, value)

    def get(self, namespace: str, key: str | None) -> Any:
        if key is None:
            return {item.key: item.value for item in self.memory.list(self.user_id, self._namespace(namespace), 1000)}
        item = self.memory.get(self.user_id, self._namespace(namespace), key)
        return item.value if item is not None else None


def _approval_question(asked: ConfirmationRequired) -> str:
    """What the user is asked to allow: the tool's own account of the change (and its diff) when it gives
    one, else the call's parameters."""
    shown = asked.preview or {}
    if not shown:
        return f"Allow {asked.tool_id} ({asked.risk.value}) with {_preview(asked.params)}?"
    what = str(shown.get("change") or "this change")
    question = f"Allow {asked.tool_id} ({asked.risk.value}): {what}?"
    return f"{question}\n{shown['diff']}" if shown.get("diff") else question
