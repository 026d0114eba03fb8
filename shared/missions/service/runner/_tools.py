"""The stage's tools: an executor that tells each call as events, and the journal that keeps every call so
a retried stage replays what an earlier attempt ran instead of running it again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from missions.core.capability.registry import Capability, StageContext
from missions.core.capability.tools import ConfirmationRequired, ToolCallRecord, ToolEnv, ToolExecutor, call_id
from missions.core.errors import NotFound
from missions.core.mission.events import EventType
from missions.core.roots import AllowedRoots
from missions.ports.checkpoints import TOOL_JOURNAL_SUFFIX, Checkpoint, CheckpointStore
from missions.service.runner._base import Emit, StageServices, preview


@dataclass(frozen=True)
class StageToolJournal:
    """A stage's tool calls, kept beside the mission's checkpoints as a thread of their own
    ("<mission>#tools", one item per call, named "<stage>@<hop>#<call key>"): the checkpoint store's
    write-once put is what a journal needs, and the stage already may read and write it."""

    checkpoints: CheckpointStore
    mission_id: str
    stage_token: str  # "<stage>@<hop>": the same for every attempt of this stage, unique in the mission

    def recorded(self, key: str) -> ToolCallRecord | None:
        try:
            kept = self.checkpoints.get(self.mission_id + TOOL_JOURNAL_SUFFIX, f"{self.stage_token}#{key}")
        except NotFound:
            return None
        assert kept.envelope is not None  # a journal entry keeps its call whole
        return ToolCallRecord.from_json(kept.envelope["call"])

    def record(self, key: str, call: ToolCallRecord) -> None:
        self.checkpoints.put(
            Checkpoint(
                thread_id=self.mission_id + TOOL_JOURNAL_SUFFIX,
                checkpoint_id=f"{self.stage_token}#{key}",
                parent_id=None,
                stage=self.stage_token.split("@", 1)[0],
                envelope={"call": call.to_json()},
            )
        )


@dataclass(eq=False)
class StageTools:
    _capability: Capability
    _services: StageServices

    def executor(self, ctx: StageContext, emit: Emit, replay: dict[str, Any] | None = None) -> ToolExecutor:
        """The stage's tool executor; `replay` is what the attempt that asked ran before asking."""
        envelope, capability, services = ctx.envelope, self._capability, self._services

        def started(tool_id: str, params: dict[str, Any]) -> None:
            shown = {k: v for k, v in params.items() if k != "repo"}
            spec = capability.catalog.get(tool_id)
            risk = spec.risk.value if spec is not None else None
            emit(
                EventType.TOOL_STARTED,
                tool=tool_id,
                params=preview(shown),
                risk=risk,
                call_id=call_id(tool_id, params),  # what an approval names (missions.core.evaluation)
                **({"source": spec.source} if spec is not None and spec.source else {}),  # e.g. "mcp:git"
            )

        def completed(record: ToolCallRecord) -> None:
            result = record.result
            envelope.add_citations(result.citations)
            emit(
                EventType.TOOL_COMPLETED,
                tool=record.tool_id,
                status=result.status,
                error=result.error,
                citations=len(result.citations),
                attempts=record.attempts,
                duration_ms=round(record.duration_ms, 3),
                **({"replayed": True} if record.replayed else {}),
            )

        return ToolExecutor(
            catalog=capability.catalog,
            agent=ctx.agent,
            approvals=envelope.approvals,
            auto_approve=capability.auto_approve_tools,
            on_start=started,
            on_complete=completed,
            budget=max(0, envelope.bounds.max_tool_calls - envelope.counters.tool_calls),
            roots=services.workspaces.roots if services.workspaces is not None else AllowedRoots(),
            journal=StageToolJournal(services.checkpoints, envelope.mission_id, ctx.write_token),
            replay=dict(replay or {}),
            env=ToolEnv(envelope.mission_id, envelope.user_id, services.secrets or _no_secret_store, services.mcp),
        )


def approval_question(asked: ConfirmationRequired) -> str:
    """What the user is asked to allow: the tool's own account of the change (and its diff) when it gives
    one, else the call's parameters."""
    shown = asked.preview or {}
    if not shown:
        return f"Allow {asked.tool_id} ({asked.risk.value}) with {preview(asked.params)}?"
    what = str(shown.get("change") or "this change")
    question = f"Allow {asked.tool_id} ({asked.risk.value}): {what}?"
    return f"{question}\n{shown['diff']}" if shown.get("diff") else question


def _no_secret_store(name: str) -> str:
    raise LookupError(f"no secret store is wired: cannot read '{name}'")
