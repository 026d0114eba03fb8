"""What the API offers besides starting and steering a mission: feedback, metrics, the users a
schedule concerns, and which capability fits a goal. Typed collaborators, nothing forwarded."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from missions.core.capability import registry as registry
from missions.core.capability.classification import (
    Classification,
    classify_complexity,
    classify_offline,
    select_by_keywords,
)
from missions.core.errors import MissionRequestError
from missions.core.llm.provider import LLMError, LLMProvider, LLMRequest
from missions.ports.events import EventStore
from missions.ports.learnings import LearningsStore
from missions.ports.memory import LongTermMemory
from missions.ports.missions import MissionRecord, MissionsByCapability, MissionStore
from missions.service.feedback import Feedback, FeedbackOutcome, apply_feedback, preferences_for
from missions.service.health import tool_health
from missions.service.metrics import mission_metrics, window_start

USERS_NAMESPACE = ("_users",)
TOOL_HEALTH_MISSIONS = 50  # tool health reads the events of at most this many of the newest missions
TOOL_HEALTH_EVENTS = 2000  # and at most this many events of each
log = logging.getLogger(__name__)


class _Choice(BaseModel):
    capability: str | None = None


class MissionService:
    def __init__(
        self,
        missions: MissionStore,
        events: EventStore,
        learnings: LearningsStore,
        memory: LongTermMemory,
        by_capability: MissionsByCapability,
        *,
        feedback_llm: Callable[[], LLMProvider],
        classifier_llm: Callable[[], LLMProvider | None],
        capabilities: registry.Registry | None = None,
    ):
        self.capabilities = capabilities or registry.default_registry()
        self._missions = missions
        self._events = events
        self._learnings = learnings
        self._memory = memory
        self._by_capability = by_capability
        self._feedback_llm = feedback_llm
        self._classifier_llm = classifier_llm  # None offline: there is no model to ask

    # -- users -------------------------------------------------------------------------------------

    def preferences(self, user_id: str) -> dict[str, Any]:
        return preferences_for(user_id, self._memory)

    def remember_user(self, user_id: str) -> None:
        """Schedules for 'all' users need to know who the users are."""
        if self._memory.get(user_id, USERS_NAMESPACE, "profile") is None:
            self._memory.put(user_id, USERS_NAMESPACE, "profile", {"since": datetime.now(UTC).isoformat()})

    def all_users(self) -> list[str]:
        return self._memory.users_with(USERS_NAMESPACE[0])

    # -- which capability, how complex ---------------------------------------------------------------

    def choose_capability(self, goal: str, requested: str | None, fallback: str | None = None) -> str:
        """The named capability, else the one whose keywords the goal mentions, else `fallback` (a
        conversation's last one: "and last week?" names nothing), else the model's pick;
        MissionRequestError naming the installed ones when none fits."""
        names = self.capabilities.available()
        if requested:
            if requested not in names:
                raise MissionRequestError(f"unknown capability '{requested}'; installed: {', '.join(names)}")
            return requested
        keywords = [(c.name, [*c.keywords, *c.triggers.keywords]) for c in self.capabilities.load_all()]
        chosen = select_by_keywords(goal, keywords) or (fallback if fallback in names else None)
        chosen = chosen or self._ask_model_for_capability(goal, names)
        if chosen in names:
            return chosen
        raise MissionRequestError(f"could not tell which capability fits this goal; name one of: {', '.join(names)}")

    def _ask_model_for_capability(self, goal: str, names: list[str]) -> str | None:
        llm = self._classifier_llm()
        if llm is None:
            return None
        descriptions = "\n".join(f"- {c.name}: {c.description}" for c in self.capabilities.load_all())
        request = LLMRequest(
            stage="classify",
            role="classifier",
            output_model=_Choice,
            messages=[
                {"role": "system", "content": f"Pick the capability that fits the goal, or null.\n{descriptions}"},
                {"role": "user", "content": goal},
            ],
        )
        try:
            answer = llm.complete(request).output
        except LLMError as exc:  # a convenience: failing it means "name one", said with the reason logged
            log.warning("the model could not pick a capability: %s", exc)
            return None
        return answer.capability if isinstance(answer, _Choice) else None

    def classify_goal(self, goal: str) -> Classification:
        """Complexity level of a goal (seed 004): by the model, else the deterministic offline reading."""
        llm = self._classifier_llm()
        if llm is not None:
            try:
                return classify_complexity(goal, llm, source="llm")
            except LLMError as exc:
                log.warning("the model could not classify a goal; reading it offline: %s", exc)
        return classify_offline(goal)

    # -- feedback, metrics -------------------------------------------------------------------------------

    def give_feedback(self, record: MissionRecord, user_id: str, data: dict[str, Any]) -> FeedbackOutcome:
        return apply_feedback(
            mission=record,
            user_id=user_id,
            feedback=Feedback.model_validate(data),
            missions=self._missions,
            learnings=self._learnings,
            memory=self._memory,
            events=self._events,
            llm=self._feedback_llm(),
        )

    def mission_metrics(self, capability: str, days: int, *, user_id: str | None) -> dict[str, Any]:
        """Metrics of `user_id`'s missions of a capability, or of every user's when `user_id` is None (the
        operators' view; the caller decides who may have it). The capability's learnings are every user's
        feedback, so only the every-user view carries them."""
        since = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="milliseconds")
        level = self.capabilities.load(capability).complexity
        missions = self._by_capability.list(capability, since)
        if user_id is not None:
            missions = [m for m in missions if m.user_id == user_id]
        return mission_metrics(
            missions,
            learnings=self._learnings.get(capability) if user_id is None else None,
            complexity_of=lambda _name: level,
            now=datetime.now(UTC),
            days=days,
        )

    def tool_metrics(self, capability: str, days: int, *, user_id: str | None) -> dict[str, Any]:
        """Each tool's recent error rate and latency in a capability (missions.service.health.tool_health),
        over the tool calls of the newest TOOL_HEALTH_MISSIONS missions created in the last `days` days: the
        caller's (`user_id`), or every user's when None (the operators' view; the caller decides)."""
        now = datetime.now(UTC)
        missions = self._by_capability.list(capability, window_start(now, days))
        if user_id is not None:
            missions = [m for m in missions if m.user_id == user_id]
        newest = sorted(missions, key=lambda m: m.created_at, reverse=True)[:TOOL_HEALTH_MISSIONS]
        events = [event for m in newest for event in self._events.read(m.mission_id, limit=TOOL_HEALTH_EVENTS)[0]]
        return {
            "capability": capability,
            "window": {"days": days, "since": window_start(now, days), "until": now.isoformat(timespec="milliseconds")},
            "missions": len(newest),
            "tools": tool_health(events),
        }


__all__ = ["TOOL_HEALTH_EVENTS", "TOOL_HEALTH_MISSIONS", "USERS_NAMESPACE", "MissionService"]
