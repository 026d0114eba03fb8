"""What feedback teaches about a capability, and the port that keeps it (DynamoDB in AWS)."""

from __future__ import annotations

from typing import Any, Protocol

from missions.core.mission.envelope import Model


class Learnings(Model):
    """All-time aggregates of the feedback on one capability's missions."""

    capability: str
    completions: int = 0
    failures: int = 0
    rating_sum: int = 0
    rating_count: int = 0
    feedback_count: int = 0

    @property
    def average_rating(self) -> float | None:
        return self.rating_sum / self.rating_count if self.rating_count else None

    @property
    def completion_rate(self) -> float | None:
        total = self.completions + self.failures
        return self.completions / total if total else None

    def summary(self) -> dict[str, Any]:
        return {**self.model_dump(), "average_rating": self.average_rating, "completion_rate": self.completion_rate}


class LearningsStore(Protocol):
    def record(self, capability: str, *, completed: bool | None, rating: int | None) -> None:
        """Count one feedback atomically: completions or failures, rating sum and count, feedback count."""

    def get(self, capability: str) -> Learnings:
        """The capability's aggregates (all zeros when it never had feedback)."""


def learning_increments(completed: bool | None, rating: int | None) -> dict[str, int]:
    increments = {"feedback_count": 1}
    if completed is True:
        increments["completions"] = 1
    elif completed is False:
        increments["failures"] = 1
    if rating is not None:
        increments["rating_sum"] = int(rating)
        increments["rating_count"] = 1
    return increments
