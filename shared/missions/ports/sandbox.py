"""The analysis-script sandbox as a port: run one script within its tier's limits (the contract, its
requests and results, is missions.core.sandbox)."""

from __future__ import annotations

from typing import Protocol

from missions.core.sandbox import SandboxRequest, SandboxResult


class Sandbox(Protocol):
    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run the script within its tier's limits; a broken rule or limit is a result, not an exception."""
        ...
