"""The envelope: everything a mission carries from stage to stage.

The envelope travels through Step Functions as the execution state, so it is kept
JSON-plain and small (see `missions.core.mission.offload` for how bulky fields leave it).
"""

from __future__ import annotations

import time
import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from missions.core.redaction import redact


def utcnow() -> str:
    """Now, as `datetime.now(UTC).isoformat(timespec="milliseconds")` writes it."""
    return iso_millis(time.time_ns())


_second: tuple[int, str] = (-1, "")  # the last second formatted, replaced whole (threads read it whole)


def iso_millis(ns: int) -> str:
    """A time in nanoseconds since the epoch as ISO 8601 UTC to the millisecond, truncated as datetime's
    isoformat truncates. A stage takes several timestamps within one second: the second's text is made
    once (a third of the cost of building a datetime each time)."""
    global _second
    second, rest = divmod(ns, 1_000_000_000)
    cached = _second
    if cached[0] != second:
        cached = _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{rest // 1_000_000:03d}+00:00"


def new_id(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex[:20]}"


class Model(BaseModel):
    """Base for runtime models: unknown fields are rejected so typos fail loudly."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Bounds(Model):
    """Global limits of one mission. Reaching any of them ends it cleanly."""

    max_iterations: int = Field(3, ge=1, le=1000)
    max_llm_calls: int = Field(10, ge=0, le=10_000)
    max_agent_hops: int = Field(21, ge=2, le=10_000)
    max_tool_calls: int = Field(50, ge=0, le=100_000)
    max_cost_usd: float = Field(1.0, ge=0)


class Counters(Model):
    iterations: int = 0
    llm_calls: int = 0
    agent_hops: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    def add(self, other: Counters) -> None:
        for name in Counters.model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Citation(Model):
    """A pointer to evidence: a file and a line range that a tool really read."""

    file: str
    line: int = Field(ge=1)
    end_line: int | None = None

    @property
    def ref(self) -> str:
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        return f"[{self.ref}]"


class InterruptKind(StrEnum):
    CLARIFICATION = "clarification"
    CONFIRMATION = "confirmation"
    AGENT_REVIEW = "agent_review"
    CHOICE = "choice"
    # a stage handed part of its work to another capability's mission: answered by that sub-mission's end,
    # never by a human (missions.service.delegation)
    DELEGATION = "delegation"


class Interrupt(Model):
    id: str = Field(default_factory=lambda: new_id("int_"))
    kind: InterruptKind
    stage: str
    question: str
    message: str | None = None
    options: list[str] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=utcnow)
    # asked by a branch of this parallel group (or an item of this fan-out stage): the answers run the
    # group again, where its finished branches return what they returned (see WaitingBranches)
    group: str | None = None


class InterruptResponse(Model):
    """A human's answer. Which fields are required depends on the interrupt kind."""

    text: str | None = Field(None, max_length=20_000)
    approved: bool | None = None
    decision: str | None = Field(None, max_length=200)
    data: dict[str, Any] | None = None

    def check_shape(self, kind: InterruptKind, options: list[str] | None = None) -> None:
        """Raise ValueError when the answer does not fit the interrupt's kind."""
        if kind is InterruptKind.CLARIFICATION and not (self.text and self.text.strip()):
            raise ValueError("a clarification needs a non-empty 'text'")
        if kind is InterruptKind.CONFIRMATION and self.approved is None:
            raise ValueError("a confirmation needs 'approved': true or false")
        if kind is InterruptKind.AGENT_REVIEW and self.approved is None and not self.decision:
            raise ValueError("a review needs 'approved' or a 'decision'")
        if kind is InterruptKind.CHOICE:
            if not self.decision:
                raise ValueError("a choice needs a 'decision' naming one option")
            if options and self.decision not in options:
                raise ValueError(f"'{self.decision}' is not one of the options {options}")
        if kind is InterruptKind.DELEGATION and not (self.data and self.data.get("status")):
            raise ValueError("a delegation is answered by its sub-mission's end ('data' with its 'status')")


class Resume(Model):
    """What Step Functions hands back into the envelope when an interrupt is answered."""

    interrupt_id: str
    response: InterruptResponse
    # when a group's branches asked: every question's answer (by interrupt id), handed over once the last
    # is given; `interrupt_id`/`response` are then the first question's
    answers: dict[str, InterruptResponse] | None = None


class WaitingBranches(Model):
    """A parallel group (or a fan-out's items) whose branches asked their user: the joining stage waits
    until every question is answered, then the group runs again. A branch that finished returns what it
    returned (`done`, already counted); one that asked resumes with its answer, what it did before asking
    replayed (`replays`), exactly as a sequential stage after a question."""

    group: str  # the group's name, or the fan-out stage
    questions: list[Interrupt] = Field(min_length=1)
    asked: dict[str, str] = Field(default_factory=dict)  # branch key -> the id of the question it asked
    replays: dict[str, dict[str, Any]] = Field(default_factory=dict)  # branch key -> Replay JSON
    done: dict[str, dict[str, Any]] = Field(default_factory=dict)  # branch key -> its result, counted once


class StageRecord(Model):
    """One run of one stage, for the mission's history. Not carried in the envelope (it would grow
    with every hop): each checkpoint keeps the records of its stage (missions.core.mission.checkpoints)."""

    stage: str
    started_at: str
    duration_ms: float
    status: str  # "ok" | "interrupted" | "error" | "terminated"
    next_stage: str | None = None
    llm_calls: int = 0
    tool_calls: int = 0


class ErrorRecord(Model):
    stage: str
    kind: str
    message: str
    at: str = Field(default_factory=utcnow)


class Envelope(Model):
    """The mission's state: what the next stages need, nothing that grows with every hop (a stage run
    again replaces its output; its record goes into its checkpoint). Fields listed in `INLINE_FIELDS`
    must stay inline: the ASL reads them."""

    # identity
    mission_id: str = Field(default_factory=lambda: new_id("m_"))
    capability: str
    user_id: str = "local"
    request_id: str = Field(default_factory=lambda: new_id("req_"))
    created_at: str = Field(default_factory=utcnow)

    # input
    raw_input: str = Field(max_length=100_000)
    context: dict[str, Any] = Field(default_factory=dict)

    # what it runs with, fixed when it starts: the configuration version of each agent (missions.core.llm.agents;
    # empty: the capability as shipped) and the model the request named (None: each version's, else the
    # environment's for the agent's role)
    agents: dict[str, int] = Field(default_factory=dict)
    model: str | None = None

    # per-agent outputs (stage name -> output), possibly offloaded references
    outputs: dict[str, Any] = Field(default_factory=dict)

    # flow
    current_stage: str | None = None
    next_stage: str | None = None
    counters: Counters = Field(default_factory=Counters)
    edge_counts: dict[str, int] = Field(default_factory=dict)
    bounds: Bounds = Field(default_factory=Bounds)
    terminal_reason: str | None = None
    # the final stage said the mission failed at what it was for (Ctx.end_reason(..., failed=True)): it ends
    # failed with terminal_reason, like a failing stage, though every stage ran
    failed: bool = False
    # set by a stage of an Express segment that has used its time: the segment hands back to the
    # mission's machine, which starts the next one at next_stage (missions.core.pipeline.compiler)
    segment_yield: bool = False
    # set by a stage that found its user paused the mission: the mission's machine waits for the resume
    # after it (missions.core.pipeline.compiler, `await.pause`); said afresh by each stage
    pause: bool = False
    # set by a stage of an Express segment that found its mission ended meanwhile (cancelled): the segment
    # hands back without starting the next one (missions.core.pipeline.compiler); said afresh by each stage
    mission_ended: bool = False
    # the user's notes the mission's record held when the last stage read it after its checkpoint (or that the
    # resume handed over): the next stage receives those it has not seen (missions.core.mission.notes)
    notes: list[dict[str, Any]] | None = None

    # human in the loop
    interrupt: Interrupt | None = None
    resume: Resume | None = None
    approvals: dict[str, bool] = Field(default_factory=dict)
    answers: list[dict[str, Any]] = Field(default_factory=list)
    # what the stage that asked did before asking (its model answers and tool calls), replayed when
    # it resumes: {"stage": ..., "thoughts": [...], "tools": {...}} (missions.core.capability.stages.Replay)
    replay: dict[str, Any] | None = None
    # a group's branches that asked, and what the others finished, while every answer is awaited
    waiting_branches: WaitingBranches | None = None
    # the capability's own state, if it keeps one (missions.core.capability.stages: `state`, ctx.update_state)
    state: dict[str, Any] | None = None

    # audit (the stages' history is not here: each checkpoint keeps its stage's StageRecord)
    errors: list[ErrorRecord] = Field(default_factory=list)
    failure: dict[str, Any] | None = None  # set by the state machine's Catch or bound guards
    citations: list[Citation] = Field(default_factory=list)
    checkpoint_id: str | None = None

    # fan-out / fan-in
    work_items: list[Any] | None = None
    branch_results: list[Any] | None = None

    # references to offloaded fields: dotted field path -> blob key
    refs: dict[str, str] = Field(default_factory=dict)

    def output(self, stage: str) -> dict[str, Any]:
        value = self.outputs.get(stage)
        return value if isinstance(value, dict) else {}

    def add_citations(self, citations: list[Citation]) -> None:
        """One citation per first line; a later read of more lines from it widens that one (a definition's
        line, then its body read from there, leaves the body citable)."""
        seen = {(c.file, c.line): index for index, c in enumerate(self.citations)}
        for citation in citations:
            index = seen.get((citation.file, citation.line))
            if index is None:
                seen[(citation.file, citation.line)] = len(self.citations)
                self.citations.append(citation)
            elif (citation.end_line or citation.line) > (self.citations[index].end_line or citation.line):
                self.citations[index] = citation

    def record_error(self, stage: str, kind: str, message: str) -> None:
        """The one way an error enters the envelope: credentials are removed first (they are shown over the API)."""
        self.errors.append(ErrorRecord(stage=stage, kind=kind, message=redact(message)[:2000]))

    def edge_key(self, source: str, target: str) -> str:
        return f"{source}->{target}"


# Fields the compiled state machine reads with JSONPath; the offloader never moves them.
INLINE_FIELDS = frozenset(
    {
        "mission_id",
        "capability",
        "next_stage",
        "counters",
        "terminal_reason",
        "interrupt",
        "work_items",
        "segment_yield",
        "pause",
        "mission_ended",
    }
)
