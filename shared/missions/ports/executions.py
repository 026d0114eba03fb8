"""What the runtime needs to run a mission's state machine (Step Functions in AWS)."""

from __future__ import annotations

from typing import Protocol


class Executions(Protocol):
    """Running a mission's state machine (Step Functions in AWS): the runtime never sees the SDK."""

    def start(self, state_machine_arn: str, name: str, input: str) -> str:
        """Start an execution named `name` (the mission id); returns its ARN. Idempotent by name: when
        that execution exists already (a start retried after a crash), it returns its ARN."""

    def stop(self, execution_arn: str, cause: str) -> None:
        """Stop it; an execution that already ended is not an error."""

    def send_success(self, task_token: str, output: str) -> None:
        """Resume a waiting task; TaskGone when its token no longer accepts an answer."""

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        """Fail a waiting task; TaskGone when its token no longer accepts it."""
