"""A request to start a mission: what every trigger (HTTP, webhook, schedule, memory change, fork,
the CLI) turns its input into before the launcher dispatches it."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from missions.core.errors import MissionRequestError
from missions.core.mission.envelope import Model
from missions.core.mission.forks import ForkEdit
from missions.core.triggers.declared import Priority, TriggerSource


class ForkSource(Model):
    """Where a forked mission carries on: a checkpoint of another mission of the same user."""

    mission_id: str = Field(min_length=1, max_length=80)
    checkpoint_id: str = Field(min_length=1, max_length=80)
    edit: ForkEdit | None = None  # what the fork changes before it runs (missions.core.mission.forks)


class ParentLink(Model):
    """A sub-mission's parent: the mission and the delegation (interrupt) it answers, and the capabilities
    from the root down to the parent (a delegation to one of them is a cycle)."""

    mission_id: str = Field(min_length=1, max_length=80)
    interrupt_id: str = Field(min_length=1, max_length=80)
    lineage: list[str] = Field(default_factory=list, max_length=16)


class MultitaskStrategy(StrEnum):
    """What a request does when a mission of the same conversation or key is still active (not ended), as
    LangGraph names its double-texting strategies (missions.service.flow.multitask)."""

    REJECT = "reject"  # refused (409), naming the active mission
    ENQUEUE = "enqueue"  # starts once the active one ends (the default)
    INTERRUPT = "interrupt"  # the active one is cancelled; the new one starts with its input in its context
    ROLLBACK = "rollback"  # the active one is cancelled and leaves no trace in the conversation's memory


KEY_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"


def keyed(concurrency_key: str) -> str:
    """The flow key of missions that name this concurrency key."""
    return f"key:{concurrency_key}"


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
    # the user's conversation this mission is a turn of: its working memory joins the context
    conversation_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:-]{1,128}$")
    # the model every stage and delegation of the mission asks (one of its capability's allowed models)
    model: str | None = Field(None, min_length=1, max_length=100)
    parent: ParentLink | None = None  # set by missions.service.delegation only
    # when the user's daily budget is spent (missions.core.cost.budget): held until it is given afresh or
    # raised ("queue"), or refused with nothing stored ("refuse")
    over_budget: Literal["queue", "refuse"] = "queue"
    # missions of one user sharing a key run one at a time; a conversation is a key of its own
    concurrency_key: str | None = Field(None, pattern=KEY_PATTERN)
    multitask_strategy: MultitaskStrategy | None = None  # None: the capability's (capability.toml)

    def flow_key(self) -> str | None:
        """The key whose missions run one at a time: the request's own, else its conversation's."""
        if self.concurrency_key is not None:
            return keyed(self.concurrency_key)
        return f"conversation:{self.conversation_id}" if self.conversation_id is not None else None

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
            raise MissionRequestError(one_line(exc)) from None


def one_line(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors())


__all__ = ["KEY_PATTERN", "ForkSource", "MissionRequest", "MultitaskStrategy", "ParentLink", "keyed", "one_line"]
