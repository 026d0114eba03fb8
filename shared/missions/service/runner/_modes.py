"""The ways a stage runs. A whole stage (run, join, finalize) absorbs what the state machine brought back,
does its work, routes (or ends the mission, or asks the user), and commits one checkpoint; a partial one
(branch, item) runs inside a Parallel group or a Map and returns a delta its joining stage folds in.
Bounds are never exceptions: a reached bound routes to the final stage with a reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from missions.core.capability.registry import Capability, InterruptRequested, StageContext, StageDefinitionError
from missions.core.capability.tools import ConfirmationRequired
from missions.core.cost.budget import USER_BUDGET
from missions.core.errors import StageRequestError
from missions.core.mission.envelope import (
    Envelope,
    Interrupt,
    InterruptKind,
    InterruptResponse,
    StageRecord,
    WaitingBranches,
    utcnow,
)
from missions.core.mission.events import Event, EventType
from missions.core.mission.notes import deliver as deliver_notes
from missions.core.pipeline.compiler import BRANCHES_ROUTE
from missions.core.pipeline.routing import Decision, apply, decide
from missions.service.runner._absorb import absorb_branches, absorb_failure, absorb_resume, branch_key
from missions.service.runner._agents import PinnedAgents, pinned
from missions.service.runner._base import AWAIT_PREFIX, Emit, Invocation, StageReport, StageServices
from missions.service.runner._commit import StageCommit
from missions.service.runner._function import StageFunctions
from missions.service.runner._tools import approval_question
from missions.service.runner._usage import budget_stops, reconcile_spend

Work = Callable[[StageContext, Emit], dict[str, Any]]


class StageModes:
    def __init__(
        self,
        capability: Capability,
        services: StageServices,
        agents: PinnedAgents,
        functions: StageFunctions,
        commit: StageCommit,
        invocation: Invocation,
    ):
        self._capability = capability
        self._pipeline = capability.pipeline
        self._services = services
        self._agents = agents
        self._functions = functions
        self._commit = commit
        self._invocation = invocation

    # -- the three ways a whole stage runs ------------------------------------------------------

    def run(self, envelope: Envelope, given: dict[str, Any], stage: str, asl_hops: Any) -> dict[str, Any]:
        """A stage on its own: pre-hook, the model, tools, post-hook, then routing."""
        return self._whole_stage(envelope, given, stage, asl_hops, work=self._functions.work)

    def join(self, envelope: Envelope, given: dict[str, Any], stage: str, asl_hops: Any) -> dict[str, Any]:
        """A fan-out stage after its Map: fold its items' outputs (no model call: the items made
        theirs), then route."""
        return self._whole_stage(envelope, given, stage, asl_hops, work=self._functions.work, fan_out=True)

    def finalize(self, envelope: Envelope, given: dict[str, Any], stage: str, asl_hops: Any) -> dict[str, Any]:
        """The failure path: record why the mission could not go on, run the final stage's hooks without
        the model, and end the mission failed with whatever it has."""
        failure = absorb_failure(envelope) or {
            "reason": "stage_failed",
            "state": None,
            "error": "unknown",
            "cause": "",
        }
        if envelope.interrupt is not None and envelope.resume is None:  # a question that timed out
            waiting = envelope.waiting_branches
            for question in waiting.questions if waiting is not None else [envelope.interrupt]:
                envelope.record_error(question.stage, "interrupt", f"interrupt {question.id} ended unanswered")
                self._commit.expire(envelope.mission_id, question.id)
            envelope.interrupt, envelope.waiting_branches = None, None
        return self._whole_stage(
            envelope,
            given,
            stage,
            asl_hops,
            work=lambda ctx, emit: self._functions.finalize_output(ctx, failure),
            failure=failure,
        )

    def _whole_stage(
        self,
        envelope: Envelope,
        given: dict[str, Any],
        stage: str,
        asl_hops: Any,
        *,
        work: Work,
        failure: dict[str, Any] | None = None,
        fan_out: bool = False,
    ) -> dict[str, Any]:
        agent, prompt, version = self._agents.configured(envelope, stage)
        final = stage == self._pipeline.final
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
            absorb_failure(envelope)  # a failure is only carried to the failure path
        records: list[StageRecord] = []  # this checkpoint's: the branches it joins, then itself
        joined = envelope.branch_results is not None
        item_results, waiting = absorb_branches(envelope, emit, fan_out, records, self._services.codec, self._pipeline)
        resume, approved_call = absorb_resume(envelope)
        if joined and waiting is None:  # every branch finished: nothing waits any more (a fork's leftovers too)
            envelope.waiting_branches = None
        received = deliver_notes(envelope.context, envelope.notes)  # what the user said since the last stage
        envelope.notes = None
        if received:
            emit(EventType.NOTE_DELIVERED, note_ids=[n.note_id for n in received], texts=[n.text for n in received])

        if final:
            reconcile_spend(self._services, envelope)  # what failed stage attempts spent, before the end
        envelope.current_stage = stage
        envelope.counters.agent_hops += 1
        if agent.counts_iteration:
            envelope.counters.iterations += 1
        emit(EventType.AGENT_STARTED, hop=hop, iteration=envelope.counters.iterations, **pinned(version, envelope))
        calls_before = envelope.counters.llm_calls, envelope.counters.tool_calls  # this stage's own, below
        started_at = utcnow()
        t0 = self._services.clock()
        status = "ok"
        ctx = StageContext(
            envelope,
            agent,
            self._pipeline,
            resume=resume,
            approved_call=approved_call,
            item_results=item_results,
            system_prompt=prompt,
            artifacts=self._services.artifacts,
            write_token=f"{stage}@{hop}",
            workspaces=self._services.workspaces,
        )
        try:
            if waiting is not None:  # its branches asked: it runs once every one has its answer
                status = "interrupted"
                envelope.waiting_branches, envelope.interrupt = waiting, waiting.questions[0]
                envelope.next_stage = BRANCHES_ROUTE
            else:
                output = work(ctx, emit)
                envelope.outputs[agent.key] = output
                if final:
                    _finish(envelope, failure, emit)
                else:
                    decision = decide(self._pipeline, envelope, stage, output)
                    spent = envelope.counters.cost_usd - before_stage.cost_usd  # its branches' too
                    if decision.next_stage != self._pipeline.final and budget_stops(
                        self._services, self._invocation, envelope, spent
                    ):  # its user's daily budget is spent: the mission ends through its final stage
                        decision = Decision(self._pipeline.final, terminal_reason=USER_BUDGET, rule="daily_budget")
                    _route(envelope, stage, decision, output, emit)
        except (InterruptRequested, ConfirmationRequired) as asked:
            status = "interrupted"
            interrupt = _interrupt_from(asked, stage)
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
            self._commit.fail(envelope, stage, checkpoint_id, exc, events)
            raise

        elapsed = (self._services.clock() - t0) * 1000
        records.append(
            StageRecord(
                stage=stage,
                started_at=started_at,
                duration_ms=round(elapsed, 3),
                status=status,
                next_stage=envelope.next_stage,
                llm_calls=envelope.counters.llm_calls - calls_before[0],
                tool_calls=envelope.counters.tool_calls - calls_before[1],
            )
        )
        emit(EventType.AGENT_COMPLETED, status=status, duration_ms=round(elapsed, 3), next_stage=envelope.next_stage)
        if final and status != "interrupted":
            emit(
                EventType.FLOW_COMPLETED,
                terminal_reason=envelope.terminal_reason,
                counters=envelope.counters.model_dump(),
            )
        if failure is not None or (final and envelope.failed):
            status = "failed"
        ended = ("failed" if status == "failed" else "completed") if envelope.next_stage is None else None
        if ended is not None:  # before the end is recorded: a failing write retries this stage, losing nothing
            self._fold_into_conversation(envelope, ended)
        self._invocation.report = StageReport(
            self._capability.name, stage, before_stage, envelope.counters.model_copy(), ended
        )
        committing = self._services.clock()
        try:
            return self._commit.commit(
                envelope, given, stage, checkpoint_id, events, status, records, before_stage.agent_hops
            )
        finally:
            self._invocation.timings.commit_ms += (self._services.clock() - committing) * 1000

    def _fold_into_conversation(self, envelope: Envelope, ended: str) -> None:
        """A mission that is a turn of a conversation leaves its result there (the conversations service)."""
        if self._services.conversations is None:
            return
        result = self._commit.result(envelope)
        self._services.conversations().fold_mission(envelope, ended, result, envelope.output(self._pipeline.final))

    # -- partial runs inside Parallel and Map ------------------------------------------

    def partial(self, envelope: Envelope, stage: str, mode: str, request: dict[str, Any]) -> dict[str, Any]:
        """One branch of a Parallel group or one item of a Map: the delta its joining stage folds in. A
        branch may ask its user: its delta then carries the question (and what it did before asking), and
        the joining stage waits for every branch's answer (WaitingBranches)."""
        key = branch_key(stage, mode, request.get("index"))
        waiting = envelope.waiting_branches
        if waiting is not None and key in waiting.done:  # it finished while others asked: counted then
            return self._services.codec.pack(waiting.done[key], scope=envelope.mission_id)
        resume, approved_call = _branch_answer(envelope, waiting, key)
        agent, prompt, version = self._agents.configured(envelope, stage)
        events: list[Event] = []

        def emit(event_type: EventType, /, **payload: Any) -> None:
            events.append(Event(type=event_type, mission_id=envelope.mission_id, stage=stage, payload=payload))

        before = envelope.counters.model_copy()
        citations_before = len(envelope.citations)
        errors_before = len(envelope.errors)
        ctx = StageContext(
            envelope,
            agent,
            self._pipeline,
            resume=resume,
            approved_call=approved_call,
            item=request.get("item"),
            system_prompt=prompt,
            artifacts=self._services.artifacts,
            write_token=f"{stage}@{request.get('hop')}:{mode}{request.get('index')}",
        )
        emit(EventType.AGENT_STARTED, mode=mode, index=request.get("index"), **pinned(version, envelope))
        started_at, t0 = utcnow(), self._services.clock()
        asked: Interrupt | None = None
        try:
            output: dict[str, Any] | None = self._functions.work(ctx, emit, partial=True)
        except (InterruptRequested, ConfirmationRequired) as exc:
            if isinstance(exc, InterruptRequested) and exc.kind is InterruptKind.DELEGATION:
                raise StageDefinitionError(
                    f"stage '{stage}' delegated inside a {mode}; a sub-mission is started by a sequential stage"
                ) from exc
            group = stage if mode == "item" else self._pipeline.group_name_of(stage)
            asked = _interrupt_from(exc, stage).model_copy(update={"group": group})
            output = None
            emit(
                EventType.INTERRUPT_RAISED,
                interrupt_id=asked.id,
                kind=asked.kind.value,
                question=asked.question,
                **({"call_id": asked.data["call_id"]} if "call_id" in asked.data else {}),
            )
        elapsed = (self._services.clock() - t0) * 1000
        counters = envelope.counters.model_dump()
        delta_counters = {k: counters[k] - before.model_dump()[k] for k in counters}
        delta_counters["agent_hops"] = 1 if mode == "branch" else 0
        emit(EventType.AGENT_COMPLETED, mode=mode, index=request.get("index"), duration_ms=round(elapsed, 3))
        delta: dict[str, Any] = {
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
                status="ok" if asked is None else "interrupted",
                llm_calls=delta_counters["llm_calls"],
                tool_calls=delta_counters["tool_calls"],
            ).model_dump()
            if mode == "branch"
            else None,
        }
        if asked is not None:
            delta |= {"key": key, "asked": asked.model_dump(mode="json"), "replay": envelope.replay}
        return self._services.codec.pack(delta, scope=envelope.mission_id)


# -- routing, finishing, asking -------------------------------------------------------------------


def _route(envelope: Envelope, stage: str, decision: Decision, output: dict[str, Any], emit: Emit) -> None:
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


def _finish(envelope: Envelope, failure: dict[str, Any] | None, emit: Emit) -> None:
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


def _branch_answer(
    envelope: Envelope, waiting: WaitingBranches | None, key: str
) -> tuple[InterruptResponse | None, bool]:
    """The answer a branch that asked resumes with (and what it did before asking, to replay), and whether
    it approved a tool call rather than answered a question."""
    envelope.replay = None
    if waiting is None or key not in waiting.asked:
        return None, False
    interrupt_id = waiting.asked[key]
    answers = (envelope.resume.answers or {}) if envelope.resume is not None else {}
    answer = answers.get(interrupt_id)
    if answer is None:  # the group runs again only once every question is answered
        raise StageRequestError(f"branch {key} resumed without the answer to its question {interrupt_id}")
    envelope.replay = waiting.replays.get(key)
    question = next(q for q in waiting.questions if q.id == interrupt_id)
    if question.kind is InterruptKind.CONFIRMATION and "call_id" in question.data:
        envelope.approvals[question.data["call_id"]] = bool(answer.approved)
        return answer, True
    return answer, False


def _interrupt_from(asked: Exception, stage: str) -> Interrupt:
    if isinstance(asked, ConfirmationRequired):
        return Interrupt(
            kind=InterruptKind.CONFIRMATION,
            stage=stage,
            question=approval_question(asked),
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
