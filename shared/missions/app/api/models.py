"""The API's contract: what each request body may hold (strict: no "yes" for a boolean, no number for a
string) and what each response holds. The OpenAPI document is generated from these models, and the
suite checks every response it sees against that document (tests/support/contract.py)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictInt, StrictStr, field_validator

from missions.core.notes import MAX_NOTE_CHARS
from missions.core.schedules import CONTEXT_LIMIT as SCHEDULE_CONTEXT_LIMIT
from missions.core.schedules import GOAL_LIMIT as SCHEDULE_GOAL_LIMIT
from missions.core.triggers import Priority

CONTEXT_LIMIT_BYTES = 64 * 1024  # a mission's context travels in its envelope and its first checkpoint
DATA_LIMIT_BYTES = 64 * 1024  # an answer's structured data, likewise
MEMORY_VALUE_LIMIT_BYTES = 64 * 1024  # one long-term memory item (the store's own limit)


def _bounded(value: Any, limit: int, what: str) -> Any:
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > limit:
        raise ValueError(f"{what} is {size} bytes as JSON; the limit is {limit}")
    return value


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- requests ----------------------------------------------------------------------------------------


class MissionCreate(Body):
    capability: StrictStr | None = Field(None, min_length=1, max_length=64, description="default: chosen by the goal")
    goal: StrictStr = Field(min_length=1, max_length=10_000)
    context: dict[str, JsonValue] = Field(default_factory=dict, description="at most 64 KB as JSON")
    priority: Priority = Priority.MEDIUM
    deadline: datetime | None = Field(None, description="ISO 8601; earlier deadlines run first within a priority")
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        le=10_000,
        strict=True,
        description="this mission's dollar budget: at most the capability's own (GET /capabilities)",
    )
    conversation_id: StrictStr | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="a conversation of yours this mission is a turn of: it starts from its working memory",
    )
    model: StrictStr | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="the model every stage asks, one of the capability's allowed models here "
        "(GET /agents/{capability}: `models`); default: each agent's configured one",
    )

    @field_validator("context")
    @classmethod
    def _small_context(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        return _bounded(value, CONTEXT_LIMIT_BYTES, "context")  # type: ignore[no-any-return]


class ClassifyRequest(Body):
    goal: StrictStr = Field(min_length=1, max_length=10_000)


class ForkRequest(Body):
    checkpoint_id: StrictStr = Field(min_length=1, max_length=80)


class AnswerBody(Body):
    text: StrictStr | None = Field(None, max_length=20_000)
    approved: StrictBool | None = None
    decision: StrictStr | None = Field(None, max_length=200)
    data: dict[str, JsonValue] | None = None

    @field_validator("data")
    @classmethod
    def _small_data(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        return _bounded(value, DATA_LIMIT_BYTES, "data") if value is not None else None


class NoteBody(Body):
    text: StrictStr = Field(min_length=1, max_length=MAX_NOTE_CHARS, description="what the mission should know")

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a note needs some text")
        return value


class FeedbackBody(Body):
    completed: StrictBool
    quality: StrictInt | None = Field(None, ge=1, le=5)
    useful: StrictBool | None = None
    text: StrictStr | None = Field(None, max_length=5000)


class MemoryValue(Body):
    value: JsonValue

    @field_validator("value")
    @classmethod
    def _small_value(cls, value: JsonValue) -> JsonValue:
        return _bounded(value, MEMORY_VALUE_LIMIT_BYTES, "value")  # type: ignore[no-any-return]


class UploadSpec(Body):
    format: Literal["tar.gz", "zip"]
    size_bytes: StrictInt = Field(ge=1, le=1024**3)  # the import's own limit is checked too


class RepositoryCreate(Body):
    name: StrictStr | None = Field(None, min_length=1, max_length=100)
    url: StrictStr | None = Field(None, min_length=1, max_length=2048, description="https git URL (no credentials)")
    ref: StrictStr | None = Field(None, min_length=1, max_length=200, description="branch, tag or commit; default HEAD")
    upload: UploadSpec | None = Field(None, description="register an archive upload instead of a git URL")
    shared: StrictBool = Field(False, description="operators only: readable by every user")


class ScheduleCreate(Body):
    expression: StrictStr = Field(
        min_length=1,
        max_length=256,
        description="EventBridge Scheduler's cron(min hour day-of-month month day-of-week year), e.g. "
        "cron(0 8 ? * MON-FRI *), or rate(<n> minutes|hours|days)",
    )
    timezone: StrictStr = Field("UTC", min_length=1, max_length=64, description="an IANA zone a cron is read in")
    goal: StrictStr = Field(min_length=1, max_length=SCHEDULE_GOAL_LIMIT)
    capability: StrictStr = Field(
        "auto", min_length=1, max_length=64, description="a capability, or auto: chosen from the goal at each firing"
    )
    name: StrictStr = Field("", max_length=100, description="a label for you")
    context: dict[str, JsonValue] = Field(default_factory=dict, description="each mission's context; at most 16 KB")

    @field_validator("context")
    @classmethod
    def _small_context(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        return _bounded(value, SCHEDULE_CONTEXT_LIMIT, "context")  # type: ignore[no-any-return]


class ImportBody(Body):
    ref: StrictStr | None = Field(None, min_length=1, max_length=200)


# -- responses ---------------------------------------------------------------------------------------


class Problem(BaseModel):
    """One thing wrong with a request (a field, a header, the body)."""

    loc: list[str | int]
    type: str
    message: str


class ErrorBody(BaseModel):
    """Every error the API sends has this shape; `correlation_id` names the request in the logs."""

    statusCode: int
    message: str
    correlation_id: str | None = None
    detail: list[Problem] | None = None
    next_fire_times: list[str] | None = Field(
        None, description="a schedule refused (422) whose expression parses: when it would have fired next (UTC)"
    )


class MissionAccepted(BaseModel):
    mission_id: str
    status: Literal["started", "queued", "duplicate"] = Field(
        description="started now, queued behind the user's running missions, or an earlier request's mission"
    )
    capability: str


class MissionSummary(BaseModel):
    mission_id: str
    capability: str
    goal: str
    status: str
    lifecycle: str
    stage: str | None = Field(description="the last stage that ran")
    running_stage: str | None = Field(description="the stage running now (null when none is)")
    priority: str
    trigger: str
    created_at: str
    terminal_reason: str | None


class MissionList(BaseModel):
    missions: list[MissionSummary]
    cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


class PendingInterrupt(BaseModel):
    """The question waiting for the user; it is shown only once it can be answered."""

    interrupt_id: str
    kind: str
    question: str
    options: list[str]
    data: dict[str, Any]
    stage: str


class QueuePlace(BaseModel):
    """Why a mission has not started yet, and how many of its user's missions go first."""

    position: int = Field(ge=1)
    reason: str


class MissionNote(BaseModel):
    note_id: str
    text: str
    at: str


class MissionView(MissionSummary):
    updated_at: str
    completed_at: str | None
    archived_at: str | None
    pending_interrupt: PendingInterrupt | None
    queue: QueuePlace | None = None
    result: dict[str, Any] | None
    counters: dict[str, Any]
    cost_usd: float
    feedback: dict[str, Any] | None
    paused_at: str | None = Field(None, description="when it paused, while it is paused")
    notes: list[MissionNote] = Field(default_factory=list, description="what you told it while it ran")


class EventView(BaseModel):
    type: str
    mission_id: str
    stage: str | None
    at: str
    payload: dict[str, Any]
    position: str | None


class EventsPage(BaseModel):
    events: list[EventView]
    cursor: str | None = Field(description="pass as `after` to read what came next")


class StageRun(BaseModel):
    """One run of one stage: the mission's history, as its checkpoints keep it."""

    stage: str
    started_at: str
    duration_ms: float
    status: str = Field(description="ok | interrupted | error | terminated (unknown: before checkpoints kept it)")
    next_stage: str | None = None
    llm_calls: int = 0
    tool_calls: int = 0


class CheckpointView(BaseModel):
    checkpoint_id: str
    parent_id: str | None
    stage: str
    created_at: str
    stages: list[StageRun] = Field(
        default_factory=list, description="the stage runs it records: a join's parallel branches, then its own"
    )


class CheckpointList(BaseModel):
    checkpoints: list[CheckpointView]


class ArtifactSummary(BaseModel):
    name: str
    path: str
    version: int
    stage: str
    created_at: str


class ArtifactList(BaseModel):
    artifacts: list[ArtifactSummary]


class ArtifactView(ArtifactSummary):
    content: Any


class ForkAccepted(BaseModel):
    mission_id: str
    status: Literal["started", "queued", "duplicate"]
    forked_from: str
    checkpoint_id: str


class AnswerAccepted(BaseModel):
    interrupt_id: str
    status: Literal["answered", "queued"] = Field(
        description="answered: the mission resumes now; queued: it resumes when one of the user's slots frees"
    )


class Cancelled(BaseModel):
    mission_id: str
    status: Literal["cancelled"]


class Pausing(BaseModel):
    mission_id: str
    status: Literal["pausing"] = Field(
        description="its stage in flight ends and checkpoints, then it waits as `paused`, holding no running slot"
    )


class Resumed(BaseModel):
    mission_id: str
    status: Literal["running", "queued"] = Field(
        description="running: it goes on now; queued: it goes on when one of the user's running slots frees"
    )


class NoteTaken(BaseModel):
    mission_id: str
    note_id: str
    status: Literal["noted"] = Field(description="the next stage that starts receives it in its context")


class FeedbackTaken(BaseModel):
    mission_id: str
    preferences_written: list[str]
    complaint: bool


class CapabilityView(BaseModel):
    name: str
    description: str
    stages: list[str]
    llm_stages: list[str]
    tools: list[str]
    bounds: dict[str, Any]
    example: str | None
    complexity: int


class CapabilityList(BaseModel):
    capabilities: list[CapabilityView]


class GraphNode(BaseModel):
    id: str = Field(description="the state's name (inside a branch: <parent>/<state>)")
    kind: Literal["stage", "await", "guard", "choice", "pass", "parallel", "map", "end", "fail"]
    stage: str | None = Field(description="the stage a Task state runs (a mission's `stage` names it)")
    label: str


class GraphEdge(BaseModel):
    from_: str = Field(alias="from")
    to: str
    label: str


class CapabilityGraph(BaseModel):
    """The capability's compiled state machine, as Step Functions runs it, to draw."""

    capability: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    start: str


class InboxItem(BaseModel):
    mission_id: str
    capability: str
    goal: str
    created_at: str
    question: PendingInterrupt


class Inbox(BaseModel):
    """Every question waiting for the caller, newest first."""

    items: list[InboxItem]


class Me(BaseModel):
    user_id: str
    preferences_namespace: str = Field(description="where feedback's learned preferences live: GET /memory/<it>")
    operator: bool


class Erasure(BaseModel):
    """What `DELETE /me` erased: items (and objects) per store. An erasure that could not finish answers 503
    instead, its message saying what it erased and what it did not; running it again finishes it."""

    user_id: str
    erased: dict[str, int] = Field(description="per store (missions, events, memory, repositories, ...): how many")


class NotificationSettings(BaseModel):
    """Whether you are told by email when a mission needs you or finishes."""

    email: str | None
    status: Literal["off", "pending_confirmation", "on"] = Field(
        description="pending_confirmation: the address was sent a link to confirm it"
    )


class NotificationOptIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    email: str = Field(min_length=3, max_length=254)


class GoalAnalysisView(BaseModel):
    subgoals: int
    dependencies: str
    external_services: int
    planning: str
    review_loop: bool


class ClassificationView(BaseModel):
    capability: str | None
    level: Literal[1, 2, 3]
    analysis: GoalAnalysisView
    source: Literal["llm", "offline"]


class UploadInstructions(BaseModel):
    url: str
    method: Literal["PUT"]
    headers: dict[str, str]
    expires_in: int
    then: str


class SnapshotView(BaseModel):
    sha256: str
    commit: str | None
    ref: str | None
    files: int
    total_bytes: int
    archive_bytes: int
    imported_at: str


class RepositoryView(BaseModel):
    repository_id: str
    name: str
    source: str
    url: str | None
    ref: str | None
    format: str | None
    status: str
    reason: str | None
    shared: bool
    snapshots: list[SnapshotView]
    created_at: str
    updated_at: str
    upload: UploadInstructions | None = None


class RepositoryList(BaseModel):
    repositories: list[RepositoryView]


class MemoryItemView(BaseModel):
    namespace: list[str]
    key: str
    value: Any
    created_at: str
    updated_at: str
    score: float | None = Field(None, description="similarity to the query, when searching")


class MemoryList(BaseModel):
    items: list[MemoryItemView]


class MetricsWindow(BaseModel):
    days: int
    since: str
    until: str


class LevelTimes(BaseModel):
    count: int
    average_seconds: float | None


MetricsScope = Literal["mine", "all"]


class MissionMetrics(BaseModel):
    """Seed 004's success metrics of one capability's missions in a window of days: the caller's own
    missions (`scope` mine), or every user's for an operator (`scope` all)."""

    scope: MetricsScope = Field(description="mine: the caller's missions; all: every user's (operators only)")
    window: MetricsWindow
    count: int
    finished: int
    by_status: dict[str, int]
    completion_rate: float | None
    error_rate: float | None
    feedback_rate: float | None
    average_rating: float | None
    rating_count: int
    time_to_completion: dict[str, LevelTimes]
    average_cost_usd: float | None
    total_cost_usd: float
    learnings: dict[str, Any] | None = Field(
        description="the capability's feedback aggregates over every user: scope all only, else null"
    )


class ConversationTurn(BaseModel):
    mission_id: str
    capability: str
    goal: str
    answer: str
    status: str
    notes: list[str] = Field(default_factory=list, description="what you told that turn's mission while it ran")
    at: str


class ConversationView(BaseModel):
    conversation_id: str
    turns: list[ConversationTurn]
    earlier: list[str] = Field(description="older turns, one line each")
    focus: list[str] = Field(description="entities, files and symbols in focus, newest first")
    evidence: list[str]
    open_questions: list[str]
    created_at: str
    updated_at: str


class ConversationList(BaseModel):
    conversations: list[ConversationView]


# -- agents as data (missions.core.agents) -----------------------------------------------------------


class AgentVersionCreate(Body):
    """A new version: the fields given replace those of `based_on` (default: the active version); an
    explicit null goes back to the stage's own setting in capability.toml."""

    model: StrictStr | None = Field(None, min_length=1, max_length=100, description="a model with a known price")
    temperature: float | None = Field(None, ge=0, le=2, strict=True)
    fallback_model: StrictStr | None = Field(None, min_length=1, max_length=100)
    max_tokens: StrictInt | None = Field(None, ge=1, le=200_000)
    tools: list[StrictStr] | None = Field(None, max_length=100, description="a subset of the stage's `declared_tools`")
    prompt: StrictStr | None = Field(
        None, min_length=1, max_length=20_000, description="the system prompt; {{capability}}, {{agent}}, "
        "{{description}}, {{tools}} and {{date}} are filled in"
    )  # fmt: skip
    based_on: StrictInt | None = Field(None, ge=1, le=1_000_000)
    note: StrictStr = Field("", max_length=500)


class AgentClone(Body):
    note: StrictStr = Field("", max_length=500)


class AgentPromote(Body):
    version: StrictInt = Field(ge=1, le=1_000_000)


class AgentVersionView(BaseModel):
    capability: str
    agent: str
    version: int
    model: str | None
    temperature: float | None
    fallback_model: str | None
    max_tokens: int | None
    tools: list[str] | None
    prompt: str | None
    created_by: str
    created_at: str
    note: str
    source: str


class AgentStateView(BaseModel):
    capability: str
    agent: str
    active: int = Field(description="the version new missions pin")
    latest: int
    enabled: bool
    history: list[int] = Field(description="earlier active versions, the latest last (what a rollback restores)")
    asks_model: bool
    declared_tools: list[str]
    updated_by: str
    updated_at: str


class AgentList(BaseModel):
    capability: str
    models: list[str] = Field(description="the models a mission of this capability may name here")
    agents: list[AgentStateView]


class AgentDetail(AgentStateView):
    versions: list[AgentVersionView]


class AgentDiff(BaseModel):
    capability: str
    agent: str
    older: int
    newer: int
    changes: dict[str, dict[str, Any]] = Field(description='field -> {"from": ..., "to": ...}')


class AuditEntryView(BaseModel):
    capability: str
    agent: str
    actor: str
    action: str
    at: str
    detail: dict[str, Any]


class AuditList(BaseModel):
    entries: list[AuditEntryView]


class UsageRecordView(BaseModel):
    mission_id: str
    user_id: str
    capability: str
    stage: str
    agent: str
    version: int | None
    provider: str
    model: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_ms: float
    outcome: str
    error: str | None
    at: str


class MissionUsage(BaseModel):
    mission_id: str
    calls: list[UsageRecordView]
    total: dict[str, float] = Field(description="calls, tokens_in, tokens_out, cost_usd, latency_ms summed")


class UsageTotalView(BaseModel):
    capability: str
    agent: str
    version: int | None
    model: str
    calls: int
    errors: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_ms: float
    average_latency_ms: float | None
    average_cost_usd: float | None


class UsageMetrics(BaseModel):
    scope: MetricsScope
    capability: str
    totals: list[UsageTotalView] = Field(description="per agent, configuration version and model")


class Liveness(BaseModel):
    status: Literal["ok"] = Field(description="the function answered: it is alive")


class DependencyCheck(BaseModel):
    ok: bool
    latency_ms: float
    error: str | None = Field(description="why it failed (credentials redacted), null when ok")


class Readiness(BaseModel):
    """Every dependency a request may need, each asked with its cheapest call; kept a few seconds."""

    ready: bool = Field(description="every check passed (200); else 503 with the same body")
    checks: dict[str, DependencyCheck] = Field(description="table:<name>, bus, model:<provider>")
    age_seconds: float = Field(description="how long ago the checks ran (answers are cached briefly)")


class ToolLatency(BaseModel):
    mean: float
    p50: float
    p95: float
    max: float


class ToolHealthView(BaseModel):
    tool: str
    calls: int
    errors: int = Field(description="calls that ended in error or timeout (not_found and denied are answers)")
    error_rate: float
    latency_ms: ToolLatency


class ToolMetrics(BaseModel):
    """Each tool's recent error rate and latency in one capability, from its missions' tool calls."""

    scope: MetricsScope
    capability: str
    window: MetricsWindow
    missions: int = Field(description="missions whose tool calls were read (the newest, at most 50)")
    tools: list[ToolHealthView]


class FireTime(BaseModel):
    utc: str = Field(description="ISO 8601, UTC")
    local: str = Field(description="ISO 8601 in the schedule's time zone, with its offset")


class FiringView(BaseModel):
    scheduled_time: str
    outcome: Literal["started", "queued", "duplicate", "skipped", "rejected"]
    mission_id: str | None = None
    reason: str | None = Field(None, description="why nothing started (paused; a goal that could not run)")
    at: str


class ScheduleView(BaseModel):
    """One of your schedules, with its next firings (none while paused) and what its last firings did."""

    schedule_id: str
    name: str
    expression: str
    timezone: str
    goal: str
    capability: str = Field(description="a capability, or auto")
    context: dict[str, Any]
    state: Literal["enabled", "paused"]
    created_at: str
    updated_at: str
    next_fire_times: list[FireTime]
    firings: list[FiringView] = Field(description="the last ones, oldest first")


class ScheduleList(BaseModel):
    schedules: list[ScheduleView]
    limit: int = Field(description="how many schedules you may have")
    minimum_interval_minutes: int = Field(description="no two firings of a schedule may be closer")
