"""Mission operations shared by the API, webhooks, schedules and memory triggers.

Built on the Runtime's adapters; every trigger ends in `dispatcher.submit`, so dedupe,
per-user limits and priorities apply to all of them alike.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from missions import capability as registry
from missions.compiler import initial_state
from missions.envelope import new_id
from missions.events import Event, EventType
from missions.lifecycle import NOT_STARTED, TransitionRefused
from missions.offload import EnvelopeCodec
from missions.starter import MissionRequest, MissionRequestError, build_envelope
from missions.store.ports import MissionRecord, MissionStatus, NotFound, TaskGone

USERS_NAMESPACE = ("_users",)


class MissionService:
    def __init__(self, runtime: Any, state_machine_arn: Any):
        self.runtime = runtime
        self.state_machine_arn = state_machine_arn  # capability -> ARN

    def __getattr__(self, name: str) -> Any:  # the stores: missions, events, checkpoints, interrupts, ...
        return getattr(self.runtime, name)

    # -- starting ----------------------------------------------------------------------------

    def start(self, request: MissionRequest) -> None:
        """Start a dispatched mission: the dispatcher claimed it and moved it to running; its id is final."""
        if request.fork_of is not None:
            envelope = self._forked_envelope(request)
        else:
            envelope = build_envelope(request, self.runtime.repositories)  # checked again: it may be gone
        codec: EnvelopeCodec = self.runtime.codec
        state = initial_state(codec.encode(envelope), envelope.bounds.max_agent_hops)
        execution_arn = self.runtime.executions.start(
            self.state_machine_arn(envelope.capability), envelope.mission_id, json.dumps(state)
        )
        try:
            self.runtime.lifecycle.progress(envelope.mission_id, execution_arn=execution_arn)
        except TransitionRefused:  # cancelled between its claim and this start: stop what just began
            self.runtime.executions.stop(execution_arn, "cancelled before it started")

    def submit(self, request: MissionRequest) -> Any:
        """Dispatch with the user's preferences in the context (triggers use this too)."""
        preferences = self.preferences(request.user_id)
        if preferences and "preferences" not in request.context:
            request = request.model_copy(update={"context": {**request.context, "preferences": preferences}})
        # refuse bad requests before anything is written; queue the checked context (a path resolved,
        # a repository pinned to the snapshot that was current when the user asked)
        envelope = build_envelope(request, self.runtime.repositories)
        request = request.model_copy(update={"context": envelope.context})
        return self.runtime.dispatcher.submit(request)

    def preferences(self, user_id: str) -> dict[str, Any]:
        from missions.feedback import preferences_for

        return preferences_for(user_id, self.runtime.memory)

    def remember_user(self, user_id: str) -> None:
        """Schedules for 'all' users need to know who the users are."""
        if self.runtime.memory.get(user_id, USERS_NAMESPACE, "profile") is None:
            self.runtime.memory.put(user_id, USERS_NAMESPACE, "profile", {"since": datetime.now(UTC).isoformat()})

    def all_users(self) -> list[str]:
        return self.runtime.memory.users_with(USERS_NAMESPACE[0])

    def classify(self, goal: str, names: list[str]) -> str | None:
        """Ask the LLM which capability fits; offline there is no guess (the API answers 422)."""
        if self.runtime.settings.llm_provider != "openai":
            return None
        from pydantic import BaseModel

        from missions.llm.base import LLMRequest

        class Choice(BaseModel):
            capability: str | None = None

        descriptions = "\n".join(f"- {c.name}: {c.description}" for c in registry.load_all())
        request = LLMRequest(
            stage="classify",
            role="classifier",
            output_model=Choice,
            messages=[
                {"role": "system", "content": f"Pick the capability that fits the goal, or null.\n{descriptions}"},
                {"role": "user", "content": goal},
            ],
        )
        try:
            answer = self.runtime.llm_for(registry.load(names[0])).complete(request).output
        except Exception:  # classification is a convenience: failing it means "name one"
            return None
        return getattr(answer, "capability", None)

    def classify_goal(self, goal: str) -> Any:
        """Complexity level of a goal (seed 004), by the LLM, or offline by a deterministic reading."""
        from missions.classification import classify_complexity, offline_goal_analysis
        from missions.llm.scripted import ScriptedProvider

        if self.runtime.settings.llm_provider == "openai":
            try:
                return classify_complexity(goal, self.runtime.llm_for(None), source="llm")
            except Exception:  # the model failed: the offline reading still answers
                pass
        return classify_complexity(goal, ScriptedProvider(offline_goal_analysis), source="offline")

    # -- forking, cancelling -------------------------------------------------------------------

    def fork(self, mission_id: str, checkpoint_id: str, user_id: str) -> Any:
        """A new mission that carries on from a checkpoint of another (time travel), dispatched like any
        other: the user's limit, the queue and priorities hold for forks too."""
        source = self.runtime.missions.get(mission_id)
        self._carry_on_from(mission_id, checkpoint_id)  # refuse a fork that cannot run before writing anything
        request = MissionRequest.parse(
            capability=source.capability,
            goal=source.goal,
            user_id=user_id,
            priority=source.priority,
            fork_of={"mission_id": mission_id, "checkpoint_id": checkpoint_id},
        )
        return self.runtime.dispatcher.submit(request)

    def _carry_on_from(self, mission_id: str, checkpoint_id: str) -> Any:
        checkpoint = self.runtime.checkpoints.get(mission_id, checkpoint_id)
        envelope = self.runtime.codec.decode(checkpoint.envelope)
        if envelope.next_stage is None:
            raise MissionRequestError(f"checkpoint {checkpoint_id} is the end of the mission; nothing to carry on")
        if envelope.next_stage.startswith("await:") and envelope.interrupt is not None:
            envelope.next_stage, envelope.interrupt = envelope.interrupt.stage, None
        return envelope

    def _forked_envelope(self, request: MissionRequest) -> Any:
        assert request.fork_of is not None and request.mission_id
        envelope = self._carry_on_from(request.fork_of.mission_id, request.fork_of.checkpoint_id)
        return envelope.model_copy(
            update={"mission_id": request.mission_id, "user_id": request.user_id, "checkpoint_id": None}
        )

    def cancel(self, record: MissionRecord) -> None:
        """Cancel in any state that is not over; ConflictError (TransitionRefused) when it already ended."""
        lifecycle = self.runtime.lifecycle
        if record.status in NOT_STARTED:
            try:
                lifecycle.cancelled(record.mission_id)  # from here on no claim can start it
            except TransitionRefused:
                record = self.runtime.missions.get(record.mission_id)  # claimed meanwhile: stop it below
            else:
                self.runtime.dispatcher.cancel_queued(record.user_id, record.mission_id)
                self._cancelled_event(record.mission_id)
                return
        lifecycle.move(record.mission_id, MissionStatus.CANCELLING)  # stage writes are refused from now on
        current = self.runtime.missions.get(record.mission_id)
        if current.execution_arn:
            self.runtime.executions.stop(current.execution_arn, "cancelled by the user")
        for interrupt in self.runtime.interrupts.pending(record.mission_id):
            self.runtime.interrupts.expire(record.mission_id, interrupt.interrupt_id)
            try:  # in AWS the stop already freed the token; an emulator may still be waiting on it
                self.runtime.executions.send_failure(interrupt.task_token, "MissionCancelled", "cancelled")
            except TaskGone:
                pass
        lifecycle.cancelled(record.mission_id)
        self._cancelled_event(record.mission_id)
        self.runtime.dispatcher.finished(record.mission_id)

    def _cancelled_event(self, mission_id: str) -> None:
        self.runtime.events.append(
            mission_id,
            f"9999-cancel-{new_id()}",
            [Event(type=EventType.MISSION_CANCELLED, mission_id=mission_id)],
        )

    def execution_ended(self, execution_arn: str, status: str) -> None:
        """Step Functions said an execution ended: record failures the stages could not, free the slot."""
        mission_id = execution_arn.rsplit(":", 1)[-1]
        try:
            record = self.runtime.missions.get(mission_id)
        except NotFound:
            return
        if record.status == MissionStatus.CANCELLING:  # its cancel stopped it: finish the cancel
            try:
                self.runtime.lifecycle.cancelled(mission_id)
            except TransitionRefused:
                pass
        elif status != "SUCCEEDED" and record.status not in MissionStatus.TERMINAL:
            try:
                self.runtime.lifecycle.move(
                    mission_id,
                    MissionStatus.FAILED,
                    completed_at=_now(),
                    terminal_reason=f"execution_{status.lower()}",
                    pending_interrupt=None,
                )
            except TransitionRefused:
                pass  # it ended (or was cancelled) in the meantime
        elif record.status in MissionStatus.TERMINAL and not record.completed_at:
            self.runtime.missions.update(mission_id, completed_at=_now())
        self.runtime.dispatcher.finished(mission_id)

    # -- feedback, metrics -----------------------------------------------------------------------

    def give_feedback(self, record: MissionRecord, user_id: str, data: dict[str, Any]) -> Any:
        from missions.feedback import Feedback, apply_feedback

        feedback = Feedback.model_validate(data)
        return apply_feedback(
            mission=record,
            user_id=user_id,
            feedback=feedback,
            missions=self.runtime.missions,
            learnings=self.runtime.learnings,
            memory=self.runtime.memory,
            events=self.runtime.events,
            llm=self.runtime.feedback_llm(),
        )

    def mission_metrics(self, capability: str, days: int) -> dict[str, Any]:
        from missions.metrics import mission_metrics

        since = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="milliseconds")
        records = self.runtime.missions_by_capability.list(capability, since)
        level = getattr(registry.load(capability), "complexity", 1)
        return mission_metrics(
            records,
            learnings=self.runtime.learnings.get(capability),
            complexity_of=lambda _name: level,
            now=datetime.now(UTC),
            days=days,
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
