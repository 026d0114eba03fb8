"""Errors a stage raises that no retry can fix, in one place for the runner and the compiler.

The runner records them as not retryable; the compiled state machine lists their names (Lambda
reports an exception's class name as its error type) in a Retry with MaxAttempts 0, so a wiring
bug or an evidence violation goes straight to the failure path instead of being retried.
"""

from __future__ import annotations


class StageDefinitionError(Exception):
    """A capability's stage is wired wrongly (a bug, not a transient failure): never retried."""


class EvidenceChainViolation(Exception):
    """A stage cited evidence no tool returned, or a critic added content. Never retried."""


class StageRequestError(ValueError):
    """The state machine sent a request this runner cannot serve (a wiring bug): not retried."""


NON_RETRYABLE: tuple[type[Exception], ...] = (StageDefinitionError, EvidenceChainViolation, StageRequestError)
NON_RETRYABLE_ERRORS: list[str] = [error.__name__ for error in NON_RETRYABLE]

__all__ = [
    "NON_RETRYABLE",
    "NON_RETRYABLE_ERRORS",
    "EvidenceChainViolation",
    "StageDefinitionError",
    "StageRequestError",
]
