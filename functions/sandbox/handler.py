"""Runs one analysis script (a SandboxRequest) and returns its SandboxResult, chart in base64.

The script runs in a child process of this function, with the local sandbox's limits, scrubbed
environment and audit hook (missions.adapters.sandbox_local), within this function's tier, memory and
remaining time. Around it Lambda adds its own isolation: this function has no network path out (a VPC
with isolated subnets and a security group without egress), a role that may only write its logs, and
a read-only package; only /tmp is writable, and each run's directory there is removed after it."""

from __future__ import annotations

from typing import Any

from missions.app import events
from missions.app.handler import lambda_handler as handler
from missions.app.runtime import Runtime


@handler()
def lambda_handler(event: dict[str, Any], context: Any, runtime: Runtime) -> Any:
    return runtime.sandbox_function.handle(event, events.sandbox_room(context))
