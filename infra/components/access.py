"""What each function may do, in one table: exact actions on exact tables and indexes.

The deploy smoke test (tests/infra/test_deploy_smoke.py) records every AWS call each deployed
function makes while a mission runs and checks it against the role the template gave it, so
this table can be neither too narrow (the mission would fail) nor silently widened.

Between capabilities: each capability's state machine role invokes only its own stage functions
(and the interrupt function all pipelines share), and a stage role names no state machine, no
function and no log group but its own. The data stores are shared by every capability's stages:
missions, checkpoints, events, interrupts and artifacts are keyed by mission id (`m_<hex>`) and
offloaded blobs by mission and content hash (`blobs/<mission id>/<sha256>`), so no IAM condition (dynamodb:LeadingKeys,
an object-key prefix) can tell one capability's items from another's; the OpenAI key is one
secret per environment. Scoping those needs the capability in the keys, a runtime change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns

from infra.components.nag import acknowledge, rendered
from missions.core.cost.pricing import foundation_model_id

GET = "dynamodb:GetItem"
QUERY = "dynamodb:Query"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
BATCH_WRITE = "dynamodb:BatchWriteItem"
BATCH_GET = "dynamodb:BatchGetItem"
CONDITION_CHECK = "dynamodb:ConditionCheckItem"
DESCRIBE = "dynamodb:DescribeTable"  # metadata only: GET /ready


@dataclass(frozen=True)
class TableAccess:
    actions: tuple[str, ...]
    indexes: tuple[str, ...] = ()  # Query on these global secondary indexes


@dataclass(frozen=True)
class Access:
    tables: dict[str, TableAccess] = field(default_factory=dict)
    blobs: tuple[str, ...] = ()  # s3 actions on the blob objects
    # dispatch: states:StartExecution on every capability's state machine, and SendTaskSuccess to hand
    # a queued answer to the execution waiting for it (whoever drains a queue may do either)
    start_missions: bool = False
    control_missions: bool = False  # stop executions and answer waiting tasks
    publish_events: bool = False  # events:PutEvents on the mission bus
    openai_secret: bool = False
    webhook_secrets: bool = False
    # repository snapshots: prefix of object keys -> s3 actions (only the import function writes snapshots)
    snapshots: dict[str, tuple[str, ...]] = field(default_factory=dict)
    list_snapshots: bool = False  # s3:ListBucket, to delete every snapshot of a repository
    notices: tuple[str, ...] = ()  # sns actions on the email notices' topic (and its subscriptions)
    # erasing a user (DELETE /me): list their missions' blobs, and every version of their snapshots
    erase_users: bool = False
    # GET /ready: DescribeTable on every table and DescribeEventBus on the bus (metadata only, no item)
    readiness: bool = False
    # users' own schedules: create, change and delete EventBridge Scheduler schedules in their group, passing
    # the scheduler's role (only to the Scheduler)
    user_schedules: bool = False


# Appending to a mission's timeline: a query reads its last item, a conditional put places the batch (its
# events in one item) after it; a retried batch that shrank deletes the parts it no longer has.
_APPEND_EVENTS = (QUERY, PUT, DELETE)

# Draining a user's queue (whoever frees a slot does it): claim the next entry, move its mission to
# running and start it (its first envelope may offload blobs into the checkpoints table; a fork reads
# its checkpoint), or hand a queued answer to its waiting execution. A sub-mission whose start fails
# answers its parent's delegation (missions.service.delegation): an interrupt read and updated, and the
# parent's timeline appended to.
_DRAINS = {
    "interrupts": TableAccess((GET, UPDATE)),
    "events": TableAccess(_APPEND_EVENTS),
    "missions": TableAccess((GET, UPDATE)),
    "checkpoints": TableAccess((GET, PUT)),
    "dispatch": TableAccess((GET, PUT, UPDATE, DELETE, QUERY, CONDITION_CHECK)),
    "repositories": TableAccess((GET,)),  # a mission's repository is checked again when it starts
    "agents": TableAccess((QUERY,)),  # a starting mission pins its capability's active agent versions
    # a mission held behind its conversation's last one starts from the conversation as that one left it,
    # unless its user's daily budget is spent (missions.service.flow): both read when the key is handed over
    "conversations": TableAccess((GET,)),
    "usage": TableAccess((GET,)),
}
# Submitting a mission: the record (deleted again if its queue entry or its own start fails, so
# nothing is half-made), the drain, and the user's stored preferences read into its context.
_STARTS = {
    **_DRAINS,
    "missions": TableAccess((GET, PUT, UPDATE, DELETE)),
    "events": TableAccess(_APPEND_EVENTS),
    "memory": TableAccess((GET, QUERY)),
}
_BLOBS_RW = ("s3:GetObject", "s3:PutObject")
SNAPSHOTS = "repositories/*"
UPLOADS = "uploads/*"
# stages of capabilities that read repositories (capability.toml `repository`) and have tools
READ_SNAPSHOTS = Access(snapshots={SNAPSHOTS: ("s3:GetObject",)})

ACCESS: dict[str, Access] = {
    "stage": Access(
        tables={
            "checkpoints": TableAccess((GET, PUT, QUERY)),
            "events": TableAccess(_APPEND_EVENTS),
            "missions": TableAccess((GET, UPDATE)),
            "interrupts": TableAccess((GET, UPDATE)),
            "artifacts": TableAccess((GET, PUT, QUERY)),
            # what a stage remembers for its user (ctx.remember / ctx.recall: home_assistant's insights and
            # deployments); the runtime confines a capability to namespaces named after it
            "memory": TableAccess((GET, PUT, QUERY)),
            # a mission that is a turn of a conversation folds its turn into the working memory (final stage)
            "conversations": TableAccess((GET, PUT)),
            "agents": TableAccess((GET,)),  # the agent version its mission pinned (never a write)
            # each model call and its user's day (ADD); the final stage reads the mission's calls back, to
            # count what a failed stage's attempts spent (its envelope was lost with it), and adds them to the
            # totals (ADD) as it ends the mission; a stage that sees its user's daily budget reached reads that
            # budget afresh
            "usage": TableAccess((GET, PUT, UPDATE, QUERY)),
        },
        blobs=_BLOBS_RW,
    ),
    # a mission waiting for a human gives its running slot to the next one: the interrupt function drains
    # tells the user their mission needs them (if they opted in: read from their memory)
    # a paused mission's wait is kept on its record, and its timeline says it paused (mission.paused)
    # a delegation starts its sub-mission (a submit: the record, the user's preferences, the drain), and a
    # refused one answers its own interrupt at once (missions.service.delegation)
    # the write that makes its mission wait (or paused) folds in where its stages got to: their newest
    # checkpoint (missions.service.progress)
    "interrupt": Access(
        tables={
            **_STARTS,
            "interrupts": TableAccess((PUT, GET, UPDATE)),
            "checkpoints": TableAccess((GET, PUT, QUERY)),
        },
        blobs=_BLOBS_RW,
        start_missions=True,
        notices=("sns:Publish",),
    ),
    "api": Access(
        tables={
            **_STARTS,
            # listings query the summary indexes and read running missions whole (a batch get); a user's
            # export reads, and their erasure deletes (BatchWriteItem), what every table keeps of them
            "missions": TableAccess(
                (GET, PUT, UPDATE, QUERY, BATCH_GET, BATCH_WRITE), indexes=("by_user", "by_capability")
            ),
            "checkpoints": TableAccess((GET, PUT, QUERY, BATCH_WRITE)),
            "interrupts": TableAccess((GET, UPDATE, QUERY, BATCH_WRITE)),
            "events": TableAccess((*_APPEND_EVENTS, QUERY, BATCH_WRITE)),
            "memory": TableAccess(
                (GET, PUT, DELETE, QUERY, BATCH_GET, BATCH_WRITE), indexes=("by_namespace_head", "memory_by_user")
            ),
            "learnings": TableAccess((GET, UPDATE)),
            "artifacts": TableAccess((GET, QUERY, BATCH_WRITE)),
            "repositories": TableAccess((GET, PUT, UPDATE, DELETE, QUERY, BATCH_WRITE), indexes=("by_owner",)),
            # Powertools Idempotency's records, a partition per user
            "idempotency": TableAccess((GET, PUT, UPDATE, DELETE, QUERY, BATCH_WRITE)),
            # users list, forget and erase them; a rolled-back mission leaves its conversation (double-texting)
            "conversations": TableAccess((GET, PUT, QUERY, DELETE, BATCH_WRITE)),
            "dispatch": TableAccess((*_DRAINS["dispatch"].actions, BATCH_WRITE)),
            # operators' versions (a transaction: the version, the state on its revision, the audit entry)
            "agents": TableAccess((GET, PUT, QUERY)),
            # a mission's calls, the totals, today's spend; operators set budgets; DELETE /me erases them; a
            # cancel that ends a mission adds its calls to the totals (ADD)
            "usage": TableAccess((GET, PUT, UPDATE, DELETE, QUERY, BATCH_WRITE)),
            # users' schedules and their count (transactions of puts, updates and deletes); DELETE /me erases them
            "schedules": TableAccess((GET, PUT, UPDATE, DELETE, QUERY, BATCH_WRITE)),
        },
        user_schedules=True,
        blobs=(*_BLOBS_RW, "s3:DeleteObject"),
        erase_users=True,
        # presigning an upload needs PutObject on it; deleting a repository removes its objects
        # (every version of them when a user is erased: the bucket is versioned)
        snapshots={
            UPLOADS: ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:DeleteObjectVersion"),
            SNAPSHOTS: ("s3:DeleteObject", "s3:DeleteObjectVersion"),
        },
        list_snapshots=True,
        publish_events=True,  # repository import requests
        start_missions=True,
        control_missions=True,
        openai_secret=True,  # capability choice, preference extraction and embeddings use the model
        # users opt in to email notices, see whether their address confirmed, and opt out
        notices=("sns:GetSubscriptionAttributes", "sns:Subscribe", "sns:Unsubscribe"),
        readiness=True,
    ),
    # the stream function (SSE of a mission's events, the OpenAI-compatible chat API): starts a mission as a
    # turn of its user's conversation, follows its events, answers its questions with the next message
    # (handing an answer over is a drain), and reads missions, interrupts and conversations as the api does
    "stream": Access(
        tables={
            **_STARTS,
            "missions": TableAccess((GET, PUT, UPDATE, DELETE, QUERY, BATCH_GET), indexes=("by_user",)),
            "checkpoints": TableAccess((GET, PUT, QUERY)),
            "interrupts": TableAccess((GET, UPDATE, QUERY)),
            "events": TableAccess((*_APPEND_EVENTS, QUERY)),
            # a chat turn begins its conversation and remembers its reply (which names the conversation)
            "conversations": TableAccess((GET, PUT, QUERY)),
        },
        blobs=_BLOBS_RW,
        start_missions=True,
        control_missions=True,  # a message that interrupts or rolls back its conversation's active mission
        openai_secret=True,  # capability choice for a chat turn that names none uses the model
    ),
    "webhook": Access(tables={"deliveries": TableAccess((PUT, DELETE))}, publish_events=True, webhook_secrets=True),
    # a trigger's event may cancel the missions of its key, or replace the active one (missions.service.flow):
    # a cancel stops the execution and expires its pending questions; its decisions are kept beside the queues
    "trigger": Access(
        tables={**_STARTS, "interrupts": TableAccess((GET, UPDATE, QUERY))},
        blobs=_BLOBS_RW,
        start_missions=True,
        control_missions=True,
    ),
    "schedule": Access(
        tables={
            **_STARTS,
            "memory": TableAccess((GET, QUERY), indexes=("by_namespace_head",)),
            "schedules": TableAccess((GET, PUT)),  # a user's schedule read, its firing kept on it
            "interrupts": TableAccess((GET, UPDATE, QUERY)),  # a firing that replaces its key's active mission
        },
        blobs=_BLOBS_RW,
        start_missions=True,
        control_missions=True,
    ),
    "memory-stream": Access(publish_events=True),  # the stream read itself is granted by its event source
    # tells the user their mission ended (if they opted in: read from their memory); a sub-mission's end
    # answers its parent's delegation (an interrupt read and updated, the parent's timeline appended to)
    "status": Access(
        tables={
            **_DRAINS,
            # a mission whose execution's end ends it (its cancel finished, or a failure no stage recorded) has
            # its model calls read and added to the totals (ADD)
            "usage": TableAccess((GET, QUERY, UPDATE)),
            "interrupts": TableAccess((GET, UPDATE, QUERY)),
            "memory": TableAccess((GET,)),
            "events": TableAccess(_APPEND_EVENTS),
            # and the write that ends it folds in where its stages got to: their newest checkpoint
            "checkpoints": TableAccess((GET, PUT, QUERY)),
        },
        blobs=_BLOBS_RW,
        start_missions=True,
        notices=("sns:Publish",),
    ),
    "repository-import": Access(
        tables={"repositories": TableAccess((GET, UPDATE))},
        snapshots={UPLOADS: ("s3:GetObject",), SNAPSHOTS: ("s3:PutObject",)},
    ),
    # the waiting index holds keys: the overdue questions are read whole
    "sla": Access(tables={"interrupts": TableAccess((QUERY, BATCH_GET), indexes=("waiting",))}),
    # starts (or resumes) what a crashed function claimed, so it may do what a drain does
    # and starts the missions held for their users' daily budgets (a new day gives those afresh) or for a key
    # whose holder ended without handing it over
    "reconcile": Access(tables=_DRAINS, blobs=_BLOBS_RW, start_missions=True),
    # reads ended missions' timelines and appends each one's verdict
    "evaluate": Access(
        tables={
            "missions": TableAccess((QUERY, BATCH_GET), indexes=("by_capability",)),
            "events": TableAccess((*_APPEND_EVENTS, QUERY)),
        }
    ),
    # runs analysis scripts: no data at all (its logs, and the network interfaces Lambda attaches to its
    # VPC, are granted by infra/components/sandbox.py)
    "sandbox": Access(),
    # the deploy-time step (a custom resource): each capability's shipped agent configurations, stored as
    # versions with their audit entries (conditional puts in one transaction), never changed once stored
    "deploy": Access(tables={"agents": TableAccess((GET, PUT, QUERY))}),
    "retention": Access(
        tables={
            "missions": TableAccess((QUERY, BATCH_GET, UPDATE), indexes=("by_status",)),  # keys: read whole
            "checkpoints": TableAccess((QUERY, BATCH_WRITE)),
            "memory": TableAccess((GET, PUT)),
        }
    ),
}


@dataclass
class Resources:
    """What the access table refers to, once the stack has made it."""

    tables: dict[str, dynamodb.Table]
    bucket: s3.IBucket
    snapshots_bucket: s3.IBucket | None = None
    state_machine_arns: list[str] = field(default_factory=list)
    bus_arn: str | None = None
    openai_secret_arn: str | None = None  # the model provider's key (OpenAI's or Anthropic's)
    # Bedrock: ARN templates (`bedrock_model_arns`) of the models functions that call a model may invoke
    bedrock_model_arns: list[str] = field(default_factory=list)
    webhook_secrets_arn_pattern: str | None = None
    execution_arn_patterns: list[str] = field(default_factory=list)
    notices_topic: sns.ITopic | None = None
    user_schedule_arns: str | None = None  # schedules of the users' group (infra/components/user_schedules.py)
    scheduler_role_arn: str | None = None  # the role those schedules fire as


def grant(role: iam.IRole, access: Access, resources: Resources, *, openai: bool | None = None) -> None:
    """Add `access` to the role's policy: one statement per set of table actions (naming every table, and
    its indexes, that gets exactly those: the same grants as a statement per table, in a policy small
    enough to stay inline under IAM's 10 KB), and one per service."""
    by_actions: dict[tuple[str, ...], list[str]] = {}
    for table_id, table_access in sorted(access.tables.items()):
        table = resources.tables[table_id]
        arns = [table.table_arn] + [f"{table.table_arn}/index/{name}" for name in table_access.indexes]
        # GET /ready's DescribeTable goes beside the table's other actions (no statement of its own)
        actions = tuple(sorted({*table_access.actions, *([DESCRIBE] if access.readiness else [])}))
        by_actions.setdefault(actions, []).extend(arns)
    for actions, arns in by_actions.items():
        role.add_to_principal_policy(iam.PolicyStatement(actions=list(actions), resources=arns))
    if access.blobs:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(access.blobs), resources=[resources.bucket.arn_for_objects("blobs/*")])
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{_arn_hint(role, resources.bucket)}/blobs/*]",
            "Blob objects are named by their content hash at run time; the blobs/ prefix is as narrow as "
            "a key can be known in advance.",
        )
    if (access.snapshots or access.list_snapshots) and resources.snapshots_bucket is not None:
        _grant_snapshots(role, access, resources.snapshots_bucket)
    if access.erase_users:
        _grant_erasure(role, resources)
    # starting and controlling missions name the same machines: one statement (every machine's ARN is long)
    on_machines = {"states:SendTaskSuccess", "states:StartExecution"} if access.start_missions else set()
    on_machines |= {"states:SendTaskSuccess", "states:SendTaskFailure"} if access.control_missions else set()
    if on_machines and resources.state_machine_arns:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=sorted(on_machines), resources=list(resources.state_machine_arns))
        )
    if access.control_missions and resources.state_machine_arns:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["states:StopExecution"], resources=list(resources.execution_arn_patterns))
        )
    if access.publish_events and resources.bus_arn:
        role.add_to_principal_policy(iam.PolicyStatement(actions=["events:PutEvents"], resources=[resources.bus_arn]))
    if access.readiness:
        others = [table.table_arn for name, table in sorted(resources.tables.items()) if name not in access.tables]
        if others:
            role.add_to_principal_policy(iam.PolicyStatement(actions=[DESCRIBE], resources=others))
        if resources.bus_arn:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["events:DescribeEventBus"], resources=[resources.bus_arn])
            )
    wants_openai = access.openai_secret if openai is None else openai
    if wants_openai and resources.openai_secret_arn:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[resources.openai_secret_arn])
        )
    if resources.bedrock_model_arns and (wants_openai or access.readiness):
        _grant_bedrock(role, resources.bedrock_model_arns, readiness=access.readiness, invoke=wants_openai)
    if access.notices and resources.notices_topic is not None:
        _grant_notices(role, access.notices, resources.notices_topic)
    if access.user_schedules and resources.user_schedule_arns and resources.scheduler_role_arn:
        _grant_user_schedules(role, resources.user_schedule_arns, resources.scheduler_role_arn)
    if access.webhook_secrets and resources.webhook_secrets_arn_pattern:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"], resources=[resources.webhook_secrets_arn_pattern]
            )
        )


def bedrock_model_arns(models: list[str]) -> list[str]:
    """ARN templates ({partition}, {region}, {account}: see `grant`) of what a role must name to invoke these
    Bedrock models: a foundation model in the stack's region; an inference profile (us.anthropic.claude-..., a
    region group's prefix) and its foundation model in every region the profile may route to."""
    arns = []
    for model in models:
        base = foundation_model_id(model)
        if base == model:
            arns.append(f"arn:{{partition}}:bedrock:{{region}}::foundation-model/{model}")
        else:
            arns.append(f"arn:{{partition}}:bedrock:{{region}}:{{account}}:inference-profile/{model}")
            arns.append(f"arn:{{partition}}:bedrock:*::foundation-model/{base}")
    return arns


def _grant_bedrock(role: iam.IRole, templates: list[str], *, readiness: bool, invoke: bool) -> None:
    from aws_cdk import Stack

    stack = Stack.of(role)
    arns = [t.format(partition=stack.partition, region=stack.region, account=stack.account) for t in templates]
    if invoke:
        actions = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
        role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=arns))
        for template in templates:
            if ":bedrock:*:" in template:
                acknowledge(
                    role,
                    f"AwsSolutions-IAM5[Resource::{rendered(role, template)}]",
                    "A cross-region inference profile routes a call to its foundation model in any region of its "
                    "group: the model is named exactly, the region cannot be.",
                )
    if readiness:  # GET /ready asks for the foundation model's details here (an inference profile's model too)
        here = [t.replace(":bedrock:*:", ":bedrock:{region}:") for t in templates if "foundation-model" in t]
        foundation = list(
            dict.fromkeys(t.format(partition=stack.partition, region=stack.region, account=stack.account) for t in here)
        )
        role.add_to_principal_policy(iam.PolicyStatement(actions=["bedrock:GetFoundationModel"], resources=foundation))


def _grant_notices(role: iam.IRole, actions: tuple[str, ...], topic: sns.ITopic) -> None:
    subscriptions = sorted(a for a in actions if a != "sns:Publish")
    if "sns:Publish" in actions:
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[topic.topic_arn]))
    if subscriptions:  # a subscription's ARN is the topic's with an id SNS gives it
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=subscriptions, resources=[topic.topic_arn, f"{topic.topic_arn}:*"])
        )
        from aws_cdk import Stack

        resource = topic.node.default_child
        assert resource is not None
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{Stack.of(topic).get_logical_id(resource)}>:*]",  # type: ignore[arg-type]
            "A subscription is named by the topic and an id SNS gives it when the user opts in.",
        )


USER_SCHEDULE_ACTIONS = ["scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"]


def grant_timers(role: iam.IRole, resources: Resources) -> None:
    """Flow control's debounce timers (one-time schedules in the users' group): the trigger function sets them,
    the schedule function, which they invoke, sets them again; as the API manages users' schedules."""
    assert resources.user_schedule_arns and resources.scheduler_role_arn, "made after the users' schedule group"
    _grant_user_schedules(role, resources.user_schedule_arns, resources.scheduler_role_arn)


def _grant_user_schedules(role: iam.IRole, schedule_arns: str, scheduler_role_arn: str) -> None:
    """The schedules of the users' group, and passing the scheduler's role only to EventBridge Scheduler, in an
    inline policy of their own: CDK estimates each ARN token at 150 characters when it fits the role's default
    policy under IAM's 10 KB and would move these into a managed overflow policy (which the deploy smoke test
    forbids); resolved, the API role's inline policies together stay well under IAM's 10,240 characters."""
    policy = iam.Policy(
        role,  # type: ignore[arg-type]  # a Role construct: the policy is made beside it
        "UserSchedules",
        statements=[
            iam.PolicyStatement(actions=USER_SCHEDULE_ACTIONS, resources=[schedule_arns]),
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[scheduler_role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            ),
        ],
    )
    policy.attach_to_role(role)
    group = schedule_arns.rsplit("/", 2)[-2]
    acknowledge(
        policy,
        f"AwsSolutions-IAM5[Resource::{rendered(role, 'arn:{partition}:scheduler:{region}:{account}:schedule/')}"
        f"{group}/*]",
        "Users' schedules are named by ids made at run time; the API may touch only those of the users' group.",
    )


def _grant_snapshots(role: iam.IRole, access: Access, bucket: s3.IBucket) -> None:
    for prefix, actions in sorted(access.snapshots.items()):
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=[bucket.arn_for_objects(prefix)])
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{_arn_hint(role, bucket)}/{prefix}]",
            "Snapshot and upload keys hold the owner and repository id, known only at run time; the prefix "
            "separates what this function may touch (stages read snapshots, only the importer writes them).",
        )
    if access.list_snapshots:
        # an erasure lists every version (the bucket is versioned), under the same prefixes
        listing = ["s3:ListBucket", "s3:ListBucketVersions"] if access.erase_users else ["s3:ListBucket"]
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=listing,
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": ["repositories/*", "uploads/*"]}},
            )
        )


def _grant_erasure(role: iam.IRole, resources: Resources) -> None:
    """A user's erasure finds their missions' blobs by listing blobs/<mission id>/ (listing only there); the
    versions of their snapshots and uploads are listed and deleted through the snapshot grants."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[resources.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": ["blobs/*"]}},
        )
    )


def _arn_hint(role: iam.IRole, bucket: s3.IBucket) -> str:
    """The bucket's ARN as cdk-nag prints it in the role's findings: `<Logical.Arn>` in the bucket's own
    stack, the parameter CDK passes it through (`referenceto<unique id>Arn`) in a nested stack."""
    from aws_cdk import Names, Stack

    owner = Stack.of(bucket)
    resource = bucket.node.default_child
    assert resource is not None
    if Stack.of(role) is owner:
        return f"<{owner.get_logical_id(resource)}.Arn>"  # type: ignore[arg-type]
    return f"<referenceto{Names.node_unique_id(resource.node)}Arn>"
