"""The Executions port on Step Functions: SDK calls and botocore error shapes stay in this adapter."""

from __future__ import annotations

from typing import Any

from missions.core.errors import DependencyUnavailable, TaskGone

ENDED = ("ExecutionDoesNotExist", "ValidationException")  # StopExecution on an execution that is over
TOKEN_GONE = ("TaskTimedOut", "TaskDoesNotExist", "InvalidToken", "ExecutionDoesNotExist")
# the service is busy or down: worth retrying, and the caller's client should be told so (503)
OUTAGE = (
    "ThrottlingException",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "InternalServerError",
    "InternalFailure",
    "ExecutionLimitExceeded",
)


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__))


def _outage(exc: Exception) -> DependencyUnavailable | None:
    """DependencyUnavailable for a throttled or unavailable service (or no connection), else None."""
    if _code(exc) in OUTAGE or type(exc).__name__ in (
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
    ):
        return DependencyUnavailable(f"Step Functions is unavailable ({_code(exc)})")
    return None


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN Step Functions gives the execution `name` of a state machine."""
    prefix, machine = state_machine_arn.rsplit(":stateMachine:", 1)
    return f"{prefix}:execution:{machine}:{name}"


class StepFunctionsExecutions:
    def __init__(self, client: Any):
        self._client = client

    def start(self, state_machine_arn: str, name: str, input: str) -> str:
        """Idempotent by name: an execution of that name that already exists (a start retried after a
        crash) is not started again; its ARN is returned."""
        try:
            response = self._client.start_execution(stateMachineArn=state_machine_arn, name=name, input=input)
        except Exception as exc:
            if _code(exc) == "ExecutionAlreadyExists":
                return execution_arn(state_machine_arn, name)
            outage = _outage(exc)
            if outage is not None:
                raise outage from exc
            raise
        return str(response["executionArn"])

    def stop(self, execution_arn: str, cause: str) -> None:
        try:
            self._client.stop_execution(executionArn=execution_arn, cause=cause)
        except Exception as exc:
            outage = _outage(exc)
            if outage is not None:
                raise outage from exc
            if _code(exc) not in ENDED:
                raise

    def send_success(self, task_token: str, output: str) -> None:
        try:
            self._client.send_task_success(taskToken=task_token, output=output)
        except Exception as exc:
            if _code(exc) in TOKEN_GONE:
                raise TaskGone(_code(exc)) from exc
            outage = _outage(exc)
            if outage is not None:
                raise outage from exc
            raise

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        try:
            self._client.send_task_failure(taskToken=task_token, error=error, cause=cause)
        except Exception as exc:
            if _code(exc) in TOKEN_GONE:
                raise TaskGone(_code(exc)) from exc
            raise
