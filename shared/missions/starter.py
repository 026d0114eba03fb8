"""Starting a mission: validate the request, record the mission, start its execution.

The execution name is the mission id, so starting the same mission twice cannot run it twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import Field, ValidationError, field_validator

from missions import capability as registry
from missions.compiler import initial_state
from missions.envelope import Bounds, Envelope, Model, new_id
from missions.lifecycle import Lifecycle
from missions.offload import EnvelopeCodec
from missions.repositories.refs import CONTEXT_KEY, PATH_KEY, REF_KEY, RepositoryResolver
from missions.store.ports import ConflictError, Executions, MissionRecord, MissionStore
from missions.triggers import Priority, TriggerSource


class MissionRequestError(ValueError):
    """The request cannot start a mission; the message says why. Nothing was changed."""


class ForkSource(Model):
    """Where a forked mission carries on: a checkpoint of another mission of the same user."""

    mission_id: str = Field(min_length=1, max_length=80)
    checkpoint_id: str = Field(min_length=1, max_length=80)


class MissionRequest(Model):
    capability: str = Field(min_length=1, max_length=64)
    goal: str = Field(min_length=1, max_length=10_000)
    user_id: str = Field("local", min_length=1, max_length=128)
    context: dict[str, Any] = Field(default_factory=dict)
    bounds: dict[str, Any] = Field(default_factory=dict)  # overrides of the pipeline's bounds
    mission_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,80}$")
    priority: Priority = Priority.MEDIUM
    deadline: str | None = Field(None, max_length=40)  # ISO 8601; earlier deadlines run first within a priority
    trigger: TriggerSource = TriggerSource.API
    idempotency_key: str | None = Field(None, min_length=1, max_length=512)
    fork_of: ForkSource | None = None  # set by MissionService.fork only: the start uses that checkpoint

    @field_validator("goal")
    @classmethod
    def _goal_has_words(cls, goal: str) -> str:
        if not goal.strip():
            raise ValueError("the goal is empty")
        return goal.strip()

    @classmethod
    def parse(cls, **fields: Any) -> MissionRequest:
        """Validate a request; every problem is named on one line, as MissionRequestError."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            raise MissionRequestError(_one_line(exc)) from None


def _one_line(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors())


def build_envelope(request: MissionRequest, repositories: RepositoryResolver | None = None) -> Envelope:
    """The first envelope of a mission; MissionRequestError when the request cannot start one.

    `repositories` checks any repository the request names (and supplies a required one's
    default); without it, a request naming a repository is refused rather than trusted.
    """
    try:
        capability = registry.load(request.capability)
    except registry.UnknownCapability as exc:
        raise MissionRequestError(str(exc)) from None
    try:
        bounds = Bounds.model_validate({**capability.pipeline.bounds.model_dump(), **request.bounds})
    except ValidationError as exc:
        raise MissionRequestError(f"invalid bounds: {_one_line(exc)}") from None
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
    return Envelope(
        mission_id=request.mission_id or new_id("m_"),
        capability=capability.name,
        user_id=request.user_id,
        raw_input=request.goal.strip(),
        context=context,
        bounds=bounds,
    )


def start_mission(
    request: MissionRequest,
    *,
    missions: MissionStore,
    codec: EnvelopeCodec,
    executions: Executions,
    state_machine_arn: Callable[[str], str],
    repositories: RepositoryResolver | None = None,
) -> Envelope:
    envelope = build_envelope(request, repositories)
    missions.create(
        MissionRecord(
            mission_id=envelope.mission_id,
            user_id=envelope.user_id,
            capability=envelope.capability,
            goal=envelope.raw_input,
            status="running",
        )
    )
    state = initial_state(codec.encode(envelope), envelope.bounds.max_agent_hops)
    try:
        execution_arn = executions.start(state_machine_arn(envelope.capability), envelope.mission_id, json.dumps(state))
    except Exception as exc:
        Lifecycle(missions).move(envelope.mission_id, "failed", terminal_reason=f"start_failed: {exc}"[:500])
        raise
    missions.update(envelope.mission_id, execution_arn=execution_arn)
    return envelope


__all__ = ["ConflictError", "MissionRequest", "MissionRequestError", "build_envelope", "start_mission"]
