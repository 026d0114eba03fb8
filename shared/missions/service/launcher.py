"""The launcher: the one way a mission starts, whatever asked for it.

HTTP calls, webhooks, schedules, memory changes, forks and the CLI's emulation all hand the
launcher a `MissionRequest`; it refuses a request that cannot run before anything is written
(the capability, the bounds, the repository it names, the checkpoint a fork carries on from),
and gives the checked request to the dispatcher, so deduplication, the per-user limit and
priorities hold for every one of them. The dependency runs one way: the launcher owns the dispatcher,
and the dispatcher hands a mission that holds a running slot to the launcher's starting part (an
`ExecutionStarter`, the dispatcher's `Starter`), which knows nothing of queues. Only then is its state
machine started, named after the mission, so starting the same mission twice cannot run it twice.

The first envelope is built once per start: the submit builds it as it checks the request and hands
it to the dispatcher, which passes it to the start when that submit's own drain starts the mission; a
mission that waited in the queue is checked again as it starts (its repository may be gone), and the
agent configuration versions active then are the ones it pins.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from missions.core.capability import registry as registry
from missions.core.cost.budget import HELD_FOR_BUDGET
from missions.core.errors import BudgetReached, MissionRequestError, StageRequestError, TaskGone, TransitionRefused
from missions.core.memory.conversation import CONTEXT_KEY as CONVERSATION_KEY
from missions.core.memory.conversation import WorkingMemory
from missions.core.mission.envelope import Bounds, Envelope, new_id
from missions.core.mission.events import Event, EventType
from missions.core.mission.forks import ForkEdit, apply_edit
from missions.core.mission.offload import EnvelopeCodec
from missions.core.mission.refs import CONTEXT_KEY, PATH_KEY, REF_KEY, RepositoryResolver
from missions.core.mission.requests import ForkSource, MissionRequest, MultitaskStrategy, keyed, one_line
from missions.core.pipeline.compiler import BRANCHES_ROUTE, initial_state
from missions.core.triggers.declared import TriggerSource
from missions.ports.checkpoints import CheckpointStore
from missions.ports.conversations import ConversationStore
from missions.ports.dispatch import HELD_FOR_KEY, DispatchStore, QueueEntry, ResumeTicket
from missions.ports.events import EventStore
from missions.ports.executions import Executions
from missions.ports.interrupts import InterruptRecord
from missions.ports.missions import MissionRecord, MissionStore
from missions.service.agents import AgentConfigs
from missions.service.checkpoints import with_earlier_outputs
from missions.service.dispatch import Dispatcher, DispatchResult, mission_id_for
from missions.service.flow.budgets import Budgets
from missions.service.flow.multitask import Keys, describe, forget_turn, interrupted_context, without_message
from missions.service.lifecycle import Lifecycle

log = logging.getLogger(__name__)

Preferences = Callable[[str], dict[str, Any]]  # user -> what feedback taught about them


def build_envelope(
    request: MissionRequest,
    repositories: RepositoryResolver | None = None,
    capabilities: registry.Registry | None = None,
    agents: AgentConfigs | None = None,
) -> Envelope:
    """The first envelope of a mission; MissionRequestError when the request cannot start one.

    `repositories` checks any repository the request names (and supplies a required one's
    default); without it, a request naming a repository is refused rather than trusted.
    `capabilities`: the registry to find the capability in (default: the installed ones).
    `agents`: pins the active configuration versions and checks the model the request names (AgentDisabled
    when an operator disabled an agent); without it the mission runs the capability as shipped and may
    name no model.
    """
    try:
        capability = (capabilities or registry.default_registry()).load(request.capability)
    except registry.UnknownCapability as exc:
        raise MissionRequestError(str(exc)) from None
    try:
        bounds = Bounds.model_validate({**capability.pipeline.bounds.model_dump(), **request.bounds})
    except ValidationError as exc:
        raise MissionRequestError(f"invalid bounds: {one_line(exc)}") from None
    if request.trigger is not TriggerSource.CLI:  # a client may tighten a bound, never pass its ceiling
        ceiling = capability.pipeline.bounds
        above = [name for name in request.bounds if getattr(bounds, name) > getattr(ceiling, name)]
        if above:
            name = above[0]
            raise MissionRequestError(
                f"{name} {getattr(bounds, name)} is above {capability.name}'s ceiling of {getattr(ceiling, name)}"
            )
    context = {**capability.default_context, **request.context}
    names_repository = any(key in context for key in (CONTEXT_KEY, PATH_KEY, REF_KEY))
    if names_repository or capability.repository == "required":
        if repositories is None:
            raise MissionRequestError("repositories cannot be resolved here")
        try:
            context = repositories.resolve(context, request.user_id, required=capability.repository == "required")
        except ValueError as exc:
            raise MissionRequestError(str(exc)) from None
    if capability.prepare_context is not None:
        try:
            context = capability.prepare_context(context)
        except ValueError as exc:
            raise MissionRequestError(str(exc)) from None
    if request.model is not None and agents is None:
        raise MissionRequestError("a model cannot be chosen here (no agent configurations)")
    model = agents.check_model(capability.name, request.model) if agents and request.model else None
    return Envelope(
        mission_id=request.mission_id or new_id("m_"),
        capability=capability.name,
        user_id=request.user_id,
        raw_input=request.goal.strip(),
        context=context,
        bounds=bounds,
        agents=agents.pins(capability.name) if agents is not None else {},
        model=model,
    )


class Launcher:
    """Submit, fork, and start what the dispatcher lets start (see the module docstring)."""

    def __init__(
        self,
        *,
        missions: MissionStore,
        checkpoints: CheckpointStore,
        codec: EnvelopeCodec,
        executions: Executions,
        dispatch: DispatchStore,
        state_machine_arn: Callable[[str], str],
        repositories: RepositoryResolver | None = None,
        preferences: Preferences | None = None,
        limit: int | Callable[[str], int] = 3,
        capabilities: registry.Registry | None = None,
        conversations: Callable[[], ConversationStore] | None = None,
        agents: AgentConfigs | None = None,
        reconcile_after_seconds: float = 960,
        start_failed: Callable[[MissionRecord], object] | None = None,
        budgets: Budgets | None = None,
        events: EventStore | None = None,
        cancel: Callable[[MissionRecord, str], object] | None = None,
    ):
        """`reconcile_after_seconds`: how old a note or claim must be for `reconcile` to take it as left by a
        process that died (longer than any function runs). `start_failed`: told of a queued mission whose start
        failed (it never runs, so no execution reports its end: a sub-mission's parent learns it there).
        `budgets`: users' daily budgets (a user at theirs has new missions held); `events`: where those
        decisions are told; `cancel`: mission control's cancel, for a mission a newer request of its
        conversation or key replaces (missions.service.flow.multitask)."""
        self.capabilities = capabilities or registry.default_registry()
        self._reconcile_after = reconcile_after_seconds
        self._missions = missions
        self._preferences = preferences
        self._conversations = conversations
        self._budgets, self._events = budgets, events
        self._starter = ExecutionStarter(
            missions=missions,
            checkpoints=checkpoints,
            codec=codec,
            executions=executions,
            state_machine_arn=state_machine_arn,
            repositories=repositories,
            capabilities=self.capabilities,
            agents=agents,
        )
        self.dispatcher = Dispatcher(dispatch, missions, self._starter, limit=limit, start_failed=start_failed)
        self._keys = Keys(dispatch, missions, cancel)

    # -- asking for a mission ---------------------------------------------------------------------

    def submit(self, request: MissionRequest) -> DispatchResult:
        """Check the request, then dispatch it: started now, queued, or a duplicate of an earlier one.

        MissionRequestError (nothing written) when it cannot run. The user's preferences join its
        context, and the context is queued as checked (a path resolved, a repository pinned to the
        snapshot that was current when the user asked)."""
        request = request.model_copy(update={"mission_id": mission_id_for(request)})  # its envelope's too
        if request.fork_of is not None:  # a fork that cannot run is refused before it is stored
            prepared = self._starter.envelope(request)
            return self._dispatch(request, prepared)
        preferences = self._preferences(request.user_id) if self._preferences is not None else {}
        if preferences and "preferences" not in request.context:
            request = request.model_copy(update={"context": {**request.context, "preferences": preferences}})
        if request.conversation_id is not None:
            remembered = {**request.context, CONVERSATION_KEY: self._memory_of(request)}
            request = request.model_copy(update={"context": remembered})
        envelope = self._starter.envelope(request)
        key = request.flow_key()
        if key is not None:  # one mission of a conversation (or concurrency key) at a time
            strategy = request.multitask_strategy or self.capabilities.load(request.capability).multitask_strategy
            admission = self._keys.admit(request, key, strategy)
            if admission.action == "hold" and admission.active is not None:
                return self._hold_for_key(request.model_copy(update={"context": envelope.context}), envelope, key)
            if admission.action == "replace" and admission.active is not None:
                envelope.context = self._after_replacing(request, envelope.context, admission.active, strategy)
                result = self._dispatch(request.model_copy(update={"context": envelope.context}), envelope)
                return dataclasses.replace(result, replaced=admission.active.mission_id)
        return self._dispatch(request.model_copy(update={"context": envelope.context}), envelope)

    def cancel_key(self, user_id: str, concurrency_key: str, reason: str) -> list[str]:
        """Cancel the user's missions of a concurrency key (an event said so): those held behind it first, so
        the active one's end hands the key to nobody, then the active one. Returns the ids cancelled."""
        key = keyed(concurrency_key)
        behind = [e for e in self.dispatcher.held_for(HELD_FOR_KEY, user_id) if e.request.flow_key() == key]
        holder = self._keys.active(self._keys.holder(user_id, key))
        cancelled = []
        for record in [*(self._missions.get(e.mission_id) for e in behind), *([holder] if holder else [])]:
            if self._keys.cancel(record, reason):
                cancelled.append(record.mission_id)
        return cancelled

    def _after_replacing(
        self, request: MissionRequest, context: dict[str, Any], replaced: MissionRecord, strategy: MultitaskStrategy
    ) -> dict[str, Any]:
        """The context of a mission that replaced an active one: with its input (interrupt), or with no trace
        of it (rollback: its turn and its message gone from the conversation)."""
        if strategy is MultitaskStrategy.INTERRUPT:
            return interrupted_context(context, replaced)
        context = without_message(context, replaced.goal)
        if request.conversation_id is not None and self._conversations is not None:
            forget_turn(self._conversations(), request.user_id, request.conversation_id, replaced.mission_id)
            context = {**context, CONVERSATION_KEY: self._memory_of(request)}
        return context

    def _hold_for_key(self, request: MissionRequest, prepared: Envelope, key: str) -> DispatchResult:
        """Recorded and held behind the active mission of its key; if that one ended meanwhile (its hand-over
        found nobody waiting yet), the key is handed over again now, so nothing waits for an end already past."""
        result = self.dispatcher.submit(request, prepared=prepared, hold=HELD_FOR_KEY)
        if result.status == "duplicate":
            return result
        holder = self._keys.holder(request.user_id, key)
        self._tell(result.mission_id, HELD_FOR_KEY, f"it starts when mission {holder} of {describe(key)} ends")
        if self._keys.ended(holder):
            started = self._hand_over_key(request.user_id, key, holder)
            if result.mission_id in started:
                return DispatchResult(result.mission_id, "started")
        return result

    def _tell(self, mission_id: str, reason: str, detail: str, **figures: Any) -> None:
        """A flow-control decision about the mission, on its timeline."""
        if self._events is not None:
            event = Event(
                type=EventType.MISSION_QUEUED,
                mission_id=mission_id,
                payload={"reason": reason, "detail": detail, **figures},
            )
            self._events.append(mission_id, f"held-{reason}", [event])

    def _hand_over_key(self, user_id: str, key: str, ended: str | None) -> list[str]:
        """The key of a mission that ended (or of none) goes to the first mission held behind it, which starts
        now (or waits for its user's budget); returns the ids started."""
        entry = self._keys.next_holder(user_id, key, ended, self.dispatcher.held_for(HELD_FOR_KEY, user_id))
        if entry is None:
            return []
        if entry.request.conversation_id is not None and self._conversations is not None:
            # it starts from the conversation as the one before it left it, not as it was when it was asked
            context = {**entry.request.context, CONVERSATION_KEY: self._memory_of(entry.request)}
            entry = entry.model_copy(update={"request": entry.request.model_copy(update={"context": context})})
        over = self._budgets.reached(user_id) if self._budgets is not None else None
        if over is not None:  # its turn came, its user's budget did not: it waits for that now
            self.dispatcher.rehold(entry, HELD_FOR_BUDGET)
            self._tell(entry.mission_id, HELD_FOR_BUDGET, over.explain(), **over.model_dump(mode="json"))
            return []
        return self.dispatcher.release_entries(user_id, [entry])

    def _dispatch(self, request: MissionRequest, prepared: Envelope) -> DispatchResult:
        """To the dispatcher, held there while its user's daily budget is spent (BudgetReached instead,
        nothing stored, when the request asked to be refused)."""
        budgets = self._budgets
        over = budgets.reached(request.user_id) if budgets is not None else None
        if budgets is None or over is None:
            return self.dispatcher.submit(request, prepared=prepared)
        if request.over_budget == "refuse":
            raise BudgetReached(f"not started: {over.explain()}", budgets.seconds_until_fresh(over))
        result = self.dispatcher.submit(request, prepared=prepared, hold=HELD_FOR_BUDGET)
        if result.status != "duplicate":
            self._tell(result.mission_id, HELD_FOR_BUDGET, over.explain(), **over.model_dump(mode="json"))
        return result

    def release_held(self, user_id: str | None = None) -> list[str]:
        """Start what waits for its user's budget: the user's (after a raise) or everyone's (a new day),
        for each user whose budget now allows it. Returns the ids started."""
        budgets = self._budgets
        if budgets is None:
            return []
        return self.dispatcher.release(HELD_FOR_BUDGET, lambda user: budgets.reached(user) is None, user_id=user_id)

    def check(self, request: MissionRequest) -> None:
        """MissionRequestError when the request could not start a mission now, as `submit` would refuse it;
        nothing is written (a schedule checks what its firings will ask before it is kept)."""
        self._starter.envelope(request)

    def _memory_of(self, request: MissionRequest) -> dict[str, Any]:
        """The conversation's working memory as the mission's first stage gets it (empty when it is new)."""
        assert request.conversation_id is not None
        if self._conversations is None:
            raise MissionRequestError("conversations are not kept here (no conversations table)")
        found = self._conversations().get(request.user_id, request.conversation_id)
        memory = found[0] if found else WorkingMemory(conversation_id=request.conversation_id, user_id=request.user_id)
        return memory.as_context()

    def fork(self, mission_id: str, checkpoint_id: str, user_id: str, edit: ForkEdit | None = None) -> DispatchResult:
        """A new mission carrying on from a checkpoint of another (time travel), dispatched like any other,
        with the state there changed by `edit` first (missions.core.mission.forks).

        NotFound when there is no such checkpoint; MissionRequestError when it is the mission's end (and
        the edit names no stage to run) or the edit does not apply."""
        source = self._missions.get(mission_id)
        edit = edit if edit is not None and not edit.empty else None
        request = MissionRequest.parse(
            capability=source.capability,
            goal=edit.goal if edit is not None and edit.goal is not None else source.goal,
            user_id=user_id,
            priority=source.priority,
            trigger=TriggerSource.FORK,
            fork_of={"mission_id": mission_id, "checkpoint_id": checkpoint_id, "edit": edit},
        )
        return self.submit(request)

    def finished(self, mission_id: str, user_id: str | None = None, flow_key: str | None = None) -> list[str]:
        """Its execution ended (may be called more than once): free its slot, start the next ones, and hand
        its key (`flow_key`, its record's) to the mission held behind it (`user_id`: its user, when the caller
        knows it; else its record is read)."""
        started = self.dispatcher.finished(mission_id, user_id)
        if flow_key is not None and user_id is not None:
            started += self._hand_over_key(user_id, flow_key, mission_id)
        return started

    def waiting(self, mission_id: str, user_id: str | None = None) -> list[str]:
        """It waits for a human: a waiting mission holds no running slot, so the next one may start."""
        return self.dispatcher.waiting(mission_id, user_id)

    def resume(self, interrupt: InterruptRecord, output: str, mission: MissionRecord | None = None) -> bool:
        """An answered question: hand it to the execution when the user has a running slot for it (at
        once if one is free). True when it was handed over now; TaskGone when the execution no longer
        takes it (then nothing is kept queued)."""
        ticket = ResumeTicket(interrupt_id=interrupt.interrupt_id, task_token=interrupt.task_token, output=output)
        return self.dispatcher.resume(interrupt.mission_id, ticket, mission).status == "started"

    def unpause(self, mission_id: str, ticket: ResumeTicket) -> bool:
        """A paused mission's resume: handed to its execution when the user has a running slot for it,
        like an answer (True when now); TaskGone when the execution no longer waits for it."""
        return self.dispatcher.resume(mission_id, ticket).status == "started"

    def queue_place(self, record: MissionRecord) -> dict[str, Any] | None:
        """Where a queued mission (or a queued answer) stands in its user's queue, and why it waits."""
        queue = self.dispatcher.queued(record.user_id)
        place = next((i for i, entry in enumerate(queue, 1) if entry.mission_id == record.mission_id), None)
        if place is None:
            return self._held_place(record)
        running, limit = len(self.dispatcher.running(record.user_id)), self.dispatcher.limit_for(record.user_id)
        reason = f"{running} of your {limit} running slots are in use"
        if queue[place - 1].resume is not None:
            reason += "; your answer resumes it when one frees"
        return {"position": place, "reason": reason}

    def _held_place(self, record: MissionRecord) -> dict[str, Any] | None:
        held = self.dispatcher.held(record.user_id)
        place = next((i for i, entry in enumerate(held, 1) if entry.mission_id == record.mission_id), None)
        if place is None:
            return None
        why = held[place - 1].held
        if why == HELD_FOR_KEY and record.flow_key is not None:
            reason = f"held: it starts when mission {self._keys.holder(record.user_id, record.flow_key)} of "
            reason += f"{describe(record.flow_key)} ends"
        elif why == HELD_FOR_BUDGET and self._budgets is not None:
            reason = f"held: {self._budgets.status(record.user_id).explain()}"
        else:
            reason = "held"
        return {"position": place, "reason": reason, "held": why}

    def withdraw(self, user_id: str, mission_id: str, flow_key: str | None = None) -> bool:
        """Take a queued mission out of its user's queue (a cancel); False when a claim took it first. A
        mission that held its key (`flow_key`) without having started hands it to the next."""
        withdrawn = self.dispatcher.cancel_queued(user_id, mission_id)
        if flow_key is not None:
            self._hand_over_key(user_id, flow_key, mission_id)
        return withdrawn

    def reconcile(self, now: Callable[[], int] = time.time_ns) -> dict[str, Any]:
        """The reconcile function: finish the starts that crashed processes left half-done
        (`Dispatcher.reconcile`), and start what waited for a budget given afresh (a new day); each one is
        logged with what was done."""
        report = self.dispatcher.reconcile(before=now() - int(self._reconcile_after * 1e9)).as_dict()
        try:
            report["held_started"] = self.release_held()
        except Exception as exc:  # tried again at the next run
            report["failures"]["release:budget"] = f"{type(exc).__name__}: {exc}"[:500]
        try:  # keys whose holder ended without handing them over (a failed start, a crash in between)
            for entry, holder in self._keys.stranded(self.dispatcher.held_for(HELD_FOR_KEY)):
                key = entry.request.flow_key()
                assert key is not None
                if holder == entry.mission_id:  # handed over, never released
                    report["held_started"] += self.dispatcher.release_entries(entry.user_id, [entry])
                else:
                    report["held_started"] += self._hand_over_key(entry.user_id, key, holder)
        except Exception as exc:
            report["failures"]["release:key"] = f"{type(exc).__name__}: {exc}"[:500]
        for action in ("queued", "started", "released"):
            for mission_id in report[action]:
                log.warning(f"stranded mission {action}", extra={"mission_id": mission_id})
        for mission_id, why in report["failures"].items():
            log.error("stranded mission not reconciled", extra={"mission_id": mission_id, "reason": why})
        return report


class ExecutionStarter:
    """The launcher's starting part, the dispatcher's `Starter`: builds a mission's first envelope and
    starts (or resumes) its execution. It knows nothing of queues or slots."""

    def __init__(
        self,
        *,
        missions: MissionStore,
        checkpoints: CheckpointStore,
        codec: EnvelopeCodec,
        executions: Executions,
        state_machine_arn: Callable[[str], str],
        repositories: RepositoryResolver | None,
        capabilities: registry.Registry,
        agents: AgentConfigs | None,
    ):
        self._checkpoints = checkpoints
        self._codec = codec
        self._executions = executions
        self._state_machine_arn = state_machine_arn
        self._repositories = repositories
        self._capabilities = capabilities
        self._agents = agents
        self._lifecycle = Lifecycle(missions)

    def envelope(self, request: MissionRequest) -> Envelope:
        """The mission's first envelope (MissionRequestError when it cannot start): a fork's carries on
        from its checkpoint; any other's is built from the request, pinning the versions active now."""
        if request.fork_of is None:
            envelope = build_envelope(request, self._repositories, self._capabilities, self._agents)
        else:
            envelope = self._carry_on_from(request.fork_of).model_copy(
                update={"mission_id": request.mission_id, "user_id": request.user_id, "checkpoint_id": None}
            )
        try:  # refused before it is stored: a capability the runtime has, that this environment runs no machine for
            self._state_machine_arn(envelope.capability)
        except StageRequestError:
            raise MissionRequestError(f"'{envelope.capability}' is not deployed in this environment") from None
        return envelope

    def start(self, request: MissionRequest, prepared: Envelope | None = None) -> None:
        """The dispatcher claimed the mission and marked it running: start its state machine."""
        assert request.mission_id, "the dispatcher names every mission before it starts"
        # built by the submit that starts it now; else (it waited) checked again: the repository may be gone
        envelope = prepared if prepared is not None else self.envelope(request)
        state = initial_state(self._codec.encode(envelope), envelope.bounds.max_agent_hops)
        arn = self._executions.start(
            self._state_machine_arn(envelope.capability), envelope.mission_id, json.dumps(state)
        )
        try:
            self._lifecycle.execution_started(envelope.mission_id, arn)
        except TransitionRefused:  # cancelled between its claim and this start: stop what just began
            self._executions.stop(arn, "cancelled before it started")

    def resume(self, entry: QueueEntry) -> None:
        """The dispatcher gave an answered mission a slot: running again, then the answer handed over
        (refused with TransitionRefused once it was cancelled, which skips it)."""
        assert entry.resume is not None
        ticket = entry.resume
        if ticket.kind == "unpause":
            self._lifecycle.unpaused(entry.mission_id)
        else:
            self._lifecycle.resumed(entry.mission_id)
        try:
            self._executions.send_success(ticket.task_token, ticket.output)
        except Exception:  # still waiting for it
            if ticket.kind == "unpause":
                self._lifecycle.pause_kept(entry.mission_id, ticket.interrupt_id, ticket.task_token)
            else:
                self._lifecycle.waiting(entry.mission_id, ticket.interrupt_id)
            raise

    def redeliver(self, entry: QueueEntry) -> None:
        """Hand an answer over again after a crash between marking the mission running and handing it
        over: a token that already took it refuses it (TaskGone), which means it was delivered."""
        assert entry.resume is not None
        try:
            self._executions.send_success(entry.resume.task_token, entry.resume.output)
        except TaskGone:
            pass

    def _carry_on_from(self, source: ForkSource) -> Envelope:
        # the whole state at that checkpoint (its snapshot and the deltas since), whichever it is, with the outputs
        # that had left the envelope before it: a fork may resume at a stage that reads them
        envelope = self._codec.decode(with_earlier_outputs(self._checkpoints, source.mission_id, source.checkpoint_id))
        if source.edit is not None:
            try:
                capability = self._capabilities.load(envelope.capability)
            except registry.UnknownCapability as exc:
                raise MissionRequestError(str(exc)) from None
            outputs = {name: function.output for name, function in capability.stages.items()}
            envelope = apply_edit(envelope, source.edit, capability.pipeline.stage_names(), outputs)
        if envelope.next_stage is None:
            raise MissionRequestError(
                f"checkpoint {source.checkpoint_id} is the end of the mission; nothing to carry on"
            )
        waiting = envelope.waiting_branches
        if envelope.next_stage == BRANCHES_ROUTE and waiting is not None:
            # branches had asked: the fork runs their group again; the branches that had finished return what
            # they returned, the ones that asked run afresh (and ask again)
            envelope.next_stage, envelope.interrupt = waiting.group, None
            envelope.waiting_branches = waiting.model_copy(update={"asked": {}, "replays": {}})
        elif envelope.next_stage.startswith("await:") and envelope.interrupt is not None:
            envelope.next_stage, envelope.interrupt = envelope.interrupt.stage, None
        return envelope


__all__ = ["ExecutionStarter", "Launcher", "Preferences", "build_envelope"]
