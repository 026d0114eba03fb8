"""Resource specifications: the one source of truth for tables, shared by the local
emulation (which creates them in moto) and the CDK stack (which deploys them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL = "ALL"
KEYS_ONLY = "KEYS_ONLY"


@dataclass(frozen=True)
class Index:
    """A global secondary index. `projection` is what its entries hold besides the keys (the table's and
    its own, always there): "KEYS_ONLY", the names of the attributes its queries read (INCLUDE), or "ALL".

    An index entry is written only when an attribute it holds changes (a key change is a delete and a
    put), and costs its own size: an index that holds only what its queries read costs one small write
    when those attributes change, not a copy of the whole item on every update."""

    name: str
    partition_key: str
    sort_key: str | None = None
    projection: str | tuple[str, ...] = KEYS_ONLY

    def __post_init__(self) -> None:
        if isinstance(self.projection, str) and self.projection not in (ALL, KEYS_ONLY):
            raise ValueError(f"index {self.name}: projection is ALL, KEYS_ONLY or a tuple of attribute names")
        if isinstance(self.projection, tuple) and not self.projection:
            raise ValueError(f"index {self.name}: an INCLUDE projection names at least one attribute")

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.partition_key,) + ((self.sort_key,) if self.sort_key else ())

    @property
    def projection_type(self) -> str:
        return self.projection if isinstance(self.projection, str) else "INCLUDE"

    @property
    def non_key_attributes(self) -> tuple[str, ...]:
        """The attributes an INCLUDE projection names (none for ALL and KEYS_ONLY)."""
        return self.projection if isinstance(self.projection, tuple) else ()

    def holds(self, table_keys: tuple[str, ...], attribute: str) -> bool:
        """Whether this index's entries carry the attribute."""
        return (
            self.projection == ALL
            or attribute in table_keys
            or attribute in self.keys
            or attribute in self.non_key_attributes
        )


@dataclass(frozen=True)
class TableSpec:
    id: str  # logical id, also the settings field that carries the physical name
    partition_key: str
    sort_key: str | None = None
    ttl_attribute: str | None = None
    stream: bool = False
    indexes: tuple[Index, ...] = field(default_factory=tuple)

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.partition_key,) + ((self.sort_key,) if self.sort_key else ())

    def key_schema(self) -> list[dict[str, str]]:
        schema = [{"AttributeName": self.partition_key, "KeyType": "HASH"}]
        if self.sort_key:
            schema.append({"AttributeName": self.sort_key, "KeyType": "RANGE"})
        return schema

    def attributes(self) -> list[str]:
        names = [self.partition_key] + ([self.sort_key] if self.sort_key else [])
        for index in self.indexes:
            names += [index.partition_key] + ([index.sort_key] if index.sort_key else [])
        return list(dict.fromkeys(names))


# What listings show of a mission (missions.ports.missions.MissionSummary): the user's list and inbox (by_user),
# metrics and the nightly evaluation (by_capability). None of it changes while a mission runs (its stage and
# cost are copied into `listed_stage` and `listed_cost_usd` when it stops running); a running mission's
# listing reads its record and its newest checkpoint (missions.service.progress).
MISSION_SUMMARY = (
    "user_id",
    "capability",
    "goal",
    "status",
    "priority",
    "trigger",
    "completed_at",
    "terminal_reason",
    "pending_interrupt",
    "feedback",
    "listed_stage",
    "listed_cost_usd",
)
MISSIONS = TableSpec(
    "missions",
    partition_key="mission_id",
    indexes=(
        Index("by_user", "user_id", "created_at", projection=tuple(a for a in MISSION_SUMMARY if a != "user_id")),
        Index(
            "by_capability",
            "capability",
            "created_at",
            projection=tuple(a for a in MISSION_SUMMARY if a != "capability"),
        ),
        # retention finds missions that ended long ago, then reads each whole (it archives all of it)
        Index("by_status", "status", "completed_at"),
    ),
)
CHECKPOINTS = TableSpec("checkpoints", partition_key="thread_id", sort_key="checkpoint_id", ttl_attribute="expires_at")
EVENTS = TableSpec("events", partition_key="mission_id", sort_key="position", ttl_attribute="expires_at")
INTERRUPTS = TableSpec(
    "interrupts",
    partition_key="mission_id",
    sort_key="interrupt_id",
    ttl_attribute="expires_at",
    # sparse: only pending questions carry `waiting`, so finding overdue ones reads only those (their keys:
    # the few overdue ones are then read whole)
    indexes=(Index("waiting", "waiting", "created_at"),),
)

# long-term memory: owner = "<user>#<namespace>", key = item key; its stream drives memory triggers
MEMORY = TableSpec(
    "memory",
    partition_key="owner",
    sort_key="key",
    stream=True,
    indexes=(
        Index("by_namespace_head", "namespace_head", "owner"),  # schedules find opted-in users (owners)
        Index("memory_by_user", "user_id"),  # every item of a user, whatever its namespace: export and erasure
    ),
)
# the dispatcher: per-user running slots, per-user priority queues
# and flow control's records: triggers' decisions and throttle windows, which expire
DISPATCH = TableSpec("dispatch", partition_key="pk", sort_key="sk", ttl_attribute="expires_at")
# per-capability learnings aggregated from feedback, and webhook delivery ids seen (TTL)
LEARNINGS = TableSpec("learnings", partition_key="capability")
DELIVERIES = TableSpec("deliveries", partition_key="delivery_id", ttl_attribute="expires_at")

# versioned documents missions write for their users: key = "<path>#<version, zero-padded>"
ARTIFACTS = TableSpec("artifacts", partition_key="mission_id", sort_key="key", ttl_attribute="expires_at")

# repositories users registered (or an operator shared): owner lists them; snapshots are in the bucket
# listing a user's repositories shows each whole, and a repository is written a few times in its life: ALL
REPOSITORIES = TableSpec(
    "repositories", partition_key="repository_id", indexes=(Index("by_owner", "owner", "created_at", projection=ALL),)
)

# Idempotency-Key records of the HTTP API (Powertools Idempotency's DynamoDB layer: its attribute names):
# one partition per user ("user#<user>"), the hashed key its sort key, so a user's records are found
# (missions.adapters.dynamodb.idempotency)
IDEMPOTENCY = TableSpec("idempotency", partition_key="id", sort_key="sk", ttl_attribute="expiration")

# conversations' working memories (missions.core.memory.conversation), per user, forgotten when not continued
CONVERSATIONS = TableSpec(
    "conversations", partition_key="owner", sort_key="conversation_id", ttl_attribute="expires_at"
)

# agents as data (missions.core.llm.agents): per capability, each agent's state, versions and audit trail
AGENTS = TableSpec("agents", partition_key="capability", sort_key="sk")
# every model call (missions.core.cost.usage): per mission (expiring), and totals per user and for everyone
USAGE = TableSpec("usage", partition_key="pk", sort_key="sk", ttl_attribute="expires_at")

# users' own schedules (missions.core.triggers.schedules): a partition per user holds their schedules and their count
SCHEDULES = TableSpec("schedules", partition_key="user_id", sort_key="schedule_id")

TABLES: tuple[TableSpec, ...] = (
    MISSIONS,
    CHECKPOINTS,
    EVENTS,
    INTERRUPTS,
    MEMORY,
    DISPATCH,
    LEARNINGS,
    DELIVERIES,
    ARTIFACTS,
    REPOSITORIES,
    IDEMPOTENCY,
    CONVERSATIONS,
    AGENTS,
    USAGE,
    SCHEDULES,
)

# Blobs of offloaded envelope fields: compressed blobs up to this size live in the
# checkpoints table, bigger ones in the bucket (a DynamoDB item is capped at 400 KB).
BLOB_INLINE_LIMIT = 350 * 1024


@dataclass(frozen=True)
class FunctionSpec:
    """A Lambda function: its code folder under functions/ and its handler."""

    id: str
    code_dir: str
    handler: str = "handler.lambda_handler"
    # a function that runs its own web server behind the Lambda Web Adapter: the script Lambda runs (its
    # handler setting, e.g. run.sh); `handler` is then what that server serves, and what runs in-process
    server: str | None = None

    @property
    def module(self) -> str:
        """The importable module of the handler when run in-process (local emulation, tests)."""
        return f"functions.{self.code_dir}.{self.handler.rsplit('.', 1)[0]}"

    @property
    def attribute(self) -> str:
        return self.handler.rsplit(".", 1)[1]


STAGE_FUNCTION = FunctionSpec("stage", "stage")
INTERRUPT_FUNCTION = FunctionSpec("interrupt", "interrupt")
API_FUNCTION = FunctionSpec("api", "api")
WEBHOOK_FUNCTION = FunctionSpec("webhook", "webhook")
TRIGGER_FUNCTION = FunctionSpec("trigger", "trigger")
SCHEDULE_FUNCTION = FunctionSpec("schedule", "schedule")
MEMORY_STREAM_FUNCTION = FunctionSpec("memory-stream", "memory_stream")
STATUS_FUNCTION = FunctionSpec("status", "status")
SLA_FUNCTION = FunctionSpec("sla", "sla")
RETENTION_FUNCTION = FunctionSpec("retention", "retention")
RECONCILE_FUNCTION = FunctionSpec("reconcile", "reconcile")  # finishes starts a crashed process left
EVALUATE_FUNCTION = FunctionSpec("evaluate", "evaluate")  # nightly trace scorers over ended missions
# clones or unpacks a repository into an immutable snapshot; the only function that writes snapshots
REPOSITORY_IMPORT_FUNCTION = FunctionSpec("repository-import", "repository_import")
# runs analysis scripts (missions.ports.sandbox): one function per tier, in a VPC with no way out
SANDBOX_FUNCTION = FunctionSpec("sandbox", "sandbox")
# streamed responses (SSE, the OpenAI-compatible chat API) on a function URL: a web server behind the Lambda
# Web Adapter (missions.app.streaming) serving the stream handler; not one of the emulation's functions
# (`missions dev` serves its routes itself), so not in SERVICE_FUNCTIONS
STREAM_FUNCTION = FunctionSpec("stream", "stream", server="run.sh")
# runs while CloudFormation deploys (a custom resource): stores the shipped agent configurations; the
# emulation needs no such step (its tables live as long as its process, which ships one capability.toml)
DEPLOY_FUNCTION = FunctionSpec("deploy", "deploy")
SERVICE_FUNCTIONS = (
    API_FUNCTION,
    WEBHOOK_FUNCTION,
    TRIGGER_FUNCTION,
    SCHEDULE_FUNCTION,
    MEMORY_STREAM_FUNCTION,
    STATUS_FUNCTION,
    SLA_FUNCTION,
    RETENTION_FUNCTION,
    RECONCILE_FUNCTION,
    EVALUATE_FUNCTION,
    REPOSITORY_IMPORT_FUNCTION,
    SANDBOX_FUNCTION,
)

# the API asks for an import by an event on the mission bus; a rule sends it to the import function
REPOSITORY_SOURCE = "missions.repositories"
IMPORT_DETAIL_TYPE = "repository.import"
REPOSITORY_IMPORT_PATTERN = {"source": [REPOSITORY_SOURCE], "detail-type": [IMPORT_DETAIL_TYPE]}


def stage_function_name(prefix: str, capability: str, stage: str) -> str:
    return f"{prefix}-{capability}-{stage}".replace("_", "-")[:64]


def state_machine_name(prefix: str, capability: str) -> str:
    return f"{prefix}-{capability}".replace("_", "-")[:80]


def segment_machine_name(prefix: str, capability: str) -> str:
    """The capability's Express machine, whose executions are a mission's segments (missions.core.pipeline.compiler)."""
    return f"{state_machine_name(prefix, capability)[:72]}-segment"


# Step Functions reports ended executions on the default bus; the status function frees the user's slot
EXECUTION_STATUS_SOURCE = "aws.states"
EXECUTION_STATUS_DETAIL_TYPE = "Step Functions Execution Status Change"
EXECUTION_ENDED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def execution_ended_pattern(state_machine_arns: list[str]) -> dict[str, Any]:
    """The rule that hands the status function every mission execution that ended."""
    return {
        "source": [EXECUTION_STATUS_SOURCE],
        "detail-type": [EXECUTION_STATUS_DETAIL_TYPE],
        "detail": {"stateMachineArn": list(state_machine_arns), "status": list(EXECUTION_ENDED)},
    }
