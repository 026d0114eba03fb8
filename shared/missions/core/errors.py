"""The runtime's domain errors, in one module: adapters raise them (`raise X from exc`), the HTTP API
maps them to statuses in one place (missions.app.api), and the state machine reads the names of
the ones no retry can fix.

Stage errors no retry can fix: the runner records them as not retryable; the compiled state
machine lists their names (Lambda reports an exception's class name as its error type) in a
Retry with MaxAttempts 0, so a wiring bug, an evidence violation or an answer the model could not
repair goes straight to the failure path instead of being retried.
"""

from __future__ import annotations

import re

# -- what a request asked for cannot be done; nothing was changed ---------------------------------


class NotFound(LookupError):
    """No such thing (or not one the caller may see: another user's mission is as missing as none)."""


class ConflictError(RuntimeError):
    """A conditional write lost: the thing already exists or changed state."""


class TransitionRefused(ConflictError):
    """A status change the mission's current status does not allow (see missions.service.lifecycle)."""

    def __init__(self, mission_id: str, current: str, wanted: str):
        super().__init__(f"mission {mission_id} is {current}; it cannot become {wanted}")
        self.mission_id, self.current, self.wanted = mission_id, current, wanted


class TaskGone(ConflictError):
    """A waiting task's token no longer accepts an answer (timed out, or its execution ended)."""


class MissionRequestError(ValueError):
    """The request cannot start a mission; the message says why. Nothing was changed."""


class BudgetReached(RuntimeError):
    """The user's daily budget is spent and the request asked to be refused rather than held (HTTP 429,
    Retry-After: when the budget is given afresh). Nothing was changed."""

    def __init__(self, message: str, retry_after_seconds: int):
        super().__init__(message)
        self.retry_after_seconds = max(1, retry_after_seconds)


class AnswerRejected(ValueError):
    """The answer does not fit the interrupt (wrong shape, unknown option): nothing changed."""


class MemoryValidationError(ValueError):
    """A namespace, key or value the store refuses; the message names which and why."""


class RepositoryRequestError(ValueError):
    """The request cannot register or import a repository; nothing was stored."""


class RepositoryConflict(RuntimeError):
    """The repository is not in a state that allows this, e.g. an import is already running."""


class AgentConfigError(ValueError):
    """An agent configuration version its capability cannot run (a tool it does not declare, an unpriced
    model, an unknown template variable) or a model a mission may not name: nothing was stored."""


class AgentDisabled(ConflictError):
    """An operator disabled an agent of the capability: no new mission of it starts until it is enabled."""


class ScheduleRejected(ValueError):
    """A schedule a user may not have: `field` is what is wrong, `kind` a short code, the message says why,
    and `next_fire_times` (UTC, ISO 8601) when the expression parses. Nothing was stored."""

    def __init__(self, field: str, kind: str, message: str, *, next_fire_times: list[str] | None = None):
        super().__init__(message)
        self.field, self.kind, self.next_fire_times = field, kind, next_fire_times


class ScheduleLimitReached(ConflictError):
    """The user has as many schedules as they may have; deleting one makes room. Nothing was stored."""


class DependencyUnavailable(RuntimeError):
    """A service the request needs (the event bus, the embedding model) refused it; nothing was stored."""


class DeploymentError(RuntimeError):
    """A deploy-time step could not finish or could not tell CloudFormation so (the deploy fails)."""


# -- stages ----------------------------------------------------------------------------------------


class StageDefinitionError(Exception):
    """A capability's stage is wired wrongly (a bug, not a transient failure): never retried."""


class InvalidAnswer(Exception):
    """The model answered, but its answer breaks a rule its stage checks (its output's schema, the evidence
    chain, the tools it may call): the runner shows the model its answer and this message and asks again,
    within the stage's repairs and the mission's bounds (missions.service.runner._repair)."""


class EvidenceChainViolation(InvalidAnswer):
    """A stage cited evidence no tool returned, or a critic added content. Repaired by asking the model
    again (as any InvalidAnswer); once the repairs are spent, never retried."""


class RepairsExhausted(Exception):
    """The model's answer was still invalid after every repair its stage allows (or its bounds left room
    for): the stage fails, and no retry of the stage could do better. The message gives every attempt a line,
    `attempt N: Kind: why`, so the failure path (which only sees the message, in Step Functions' Cause)
    records one error per attempt (`attempts_in`)."""

    SHOWN = 1_500  # characters of all attempts' errors: the failure path keeps 2,000 of the message

    def __init__(self, stage: str, attempts: list[tuple[str, str]], stopped: str):
        each = max(80, self.SHOWN // max(1, len(attempts)))
        self.stage, self.attempts = stage, [(kind, _one_line(why)[:each]) for kind, why in attempts]
        lines = [f"stage '{stage}': the model's answer was invalid {len(attempts)} time(s), {stopped}"]
        lines += [f"attempt {number}: {kind}: {why}" for number, (kind, why) in enumerate(self.attempts, 1)]
        super().__init__("\n".join(lines))

    @staticmethod
    def attempts_in(message: str) -> list[tuple[str, str]]:
        """(kind, why) of each attempt a RepairsExhausted message lists, in order."""
        return [(m["kind"], m["why"]) for m in map(_ATTEMPT.match, message.splitlines()) if m]


_ATTEMPT = re.compile(r"^attempt \d+: (?P<kind>\w+): (?P<why>.*)$")


def _one_line(text: str) -> str:
    return " ".join(text.split())


class DelegationFailed(Exception):
    """A sub-mission (`ctx.delegate`) did not give its result: it failed, was cancelled or was refused (a
    cycle, too deep, no budget left, an unknown capability), or its result does not fit the model asked
    for. A stage may catch it and carry on without; uncaught, the stage fails with this reason."""

    def __init__(self, capability: str, status: str, reason: str, child: str | None = None):
        super().__init__(f"the {capability} sub-mission{f' {child}' if child else ''} {status}: {reason}")
        self.capability, self.status, self.reason, self.child = capability, status, reason, child


class StageRequestError(ValueError):
    """The state machine sent a request this runner cannot serve (a wiring bug): not retried."""


NON_RETRYABLE: tuple[type[Exception], ...] = (
    StageDefinitionError,
    EvidenceChainViolation,
    RepairsExhausted,
    StageRequestError,
)
NON_RETRYABLE_ERRORS: list[str] = [error.__name__ for error in NON_RETRYABLE]

__all__ = [
    "NON_RETRYABLE",
    "NON_RETRYABLE_ERRORS",
    "AgentConfigError",
    "AgentDisabled",
    "AnswerRejected",
    "ConflictError",
    "DependencyUnavailable",
    "DeploymentError",
    "EvidenceChainViolation",
    "InvalidAnswer",
    "MemoryValidationError",
    "MissionRequestError",
    "NotFound",
    "RepairsExhausted",
    "RepositoryConflict",
    "RepositoryRequestError",
    "ScheduleLimitReached",
    "ScheduleRejected",
    "StageDefinitionError",
    "StageRequestError",
    "TaskGone",
    "TransitionRefused",
]
