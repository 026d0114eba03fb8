"""The Sandbox port on AWS: one synchronous invocation of the sandbox function of the request's tier.

That function (functions/sandbox) runs the request through missions.adapters.sandbox_local inside a
Lambda sized for its tier, in a VPC with no way out, under a role that may only write its logs
(infra/components/sandbox.py). What a script does wrong comes back as its SandboxResult; what Lambda
itself reports is mapped here: the function's own timeout or a killed runtime become results (the
script's doing), while throttling, a missing function or a refused call raise DependencyUnavailable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from missions.core.errors import DependencyUnavailable
from missions.core.sandbox import TIERS, SandboxRequest, SandboxResult, Tier

if TYPE_CHECKING:
    from mypy_boto3_lambda.client import LambdaClient

# the deep tier's 60 s, the function's margin and a cold start: a read timeout must not cut a run short
READ_TIMEOUT_SECONDS = max(limits.timeout_seconds for limits in TIERS.values()) + 30


class LambdaSandbox:
    """`functions`: the sandbox function's name (or ARN) per tier; `client`: a boto3 Lambda client."""

    def __init__(self, functions: Mapping[str, str], client: Any = None):
        unknown = sorted(set(functions) - set(TIERS))
        if unknown:
            raise ValueError(f"sandbox functions for unknown tiers {unknown}; the tiers are {sorted(TIERS)}")
        self.functions = dict(functions)
        self._client = client

    @property
    def client(self) -> LambdaClient:
        if self._client is None:
            import boto3
            from botocore.config import Config

            # a run is a pure function of its request, so a retried throttle or dropped connection is safe
            config = Config(
                read_timeout=READ_TIMEOUT_SECONDS, connect_timeout=5, retries={"mode": "standard", "max_attempts": 3}
            )
            self._client = boto3.client("lambda", config=config)
        return self._client  # type: ignore[no-any-return]

    def run(self, request: SandboxRequest) -> SandboxResult:
        name = self._function(request.tier)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.invoke(
                FunctionName=name, InvocationType="RequestResponse", Payload=request.model_dump_json().encode()
            )
            payload = response["Payload"].read()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code", "?"), error.get("Message", "")
            if code in ("TooManyRequestsException", "ThrottlingException"):
                raise DependencyUnavailable(
                    f"the {request.tier} sandbox is busy (its concurrency is reserved and used up): try again"
                ) from exc
            raise DependencyUnavailable(f"the sandbox function {name} refused the call: {code}: {message}") from exc
        except BotoCoreError as exc:
            raise DependencyUnavailable(f"the sandbox function {name} could not be reached: {exc}") from exc
        if response.get("FunctionError"):
            return _function_error(name, request.tier, payload)
        try:
            return SandboxResult.model_validate_json(payload)
        except ValidationError as exc:
            raise DependencyUnavailable(f"the sandbox function {name} returned no sandbox result") from exc

    def _function(self, tier: Tier) -> str:
        try:
            return self.functions[tier]
        except KeyError:
            raise DependencyUnavailable(f"no sandbox function is deployed for the {tier} tier") from None


def _function_error(name: str, tier: Tier, payload: bytes) -> SandboxResult:
    """What Lambda says when the function itself failed: its timeout and a killed runtime (memory) are
    the script's doing and become results; anything else is the sandbox's fault."""
    try:
        error = json.loads(payload)
    except ValueError:
        error = {}
    message = str(error.get("errorMessage", "")) if isinstance(error, dict) else ""
    limits = TIERS[tier]
    if "Task timed out" in message:
        return SandboxResult.failed(
            "timeout", f"timeout: the {tier} sandbox function ran past its time ({limits.timeout_seconds:g} s tier)"
        )
    if "signal: killed" in message or "Runtime exited" in message and "memory" in message.lower():
        return SandboxResult.failed(
            "memory", f"memory: the {tier} sandbox function ran out of memory ({limits.memory_mb} MB tier)"
        )
    kind = str(error.get("errorType", "error")) if isinstance(error, dict) else "error"
    raise DependencyUnavailable(f"the sandbox function {name} failed: {kind}: {message[:300]}")


__all__ = ["READ_TIMEOUT_SECONDS", "LambdaSandbox"]
