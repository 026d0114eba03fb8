"""The composition root: the services built once per process on the runtime's ports (their adapters
are bound in missions.app.bindings), and what each Lambda function calls. Each handler calls one of
its services (`stages`, `interrupt_service`, `ingest`, `control`, ...), which hold the use cases.

Services are built on first use, so a cold start pays only for what its function touches. Nothing here
reads the environment or creates a client at import.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from missions.app import observability
from missions.app.bindings import Bindings
from missions.core.capability import registry as registry
from missions.core.errors import DependencyUnavailable, StageRequestError
from missions.core.roots import AllowedRoots
from missions.service.runner import StageRunner, StageServices

if TYPE_CHECKING:
    # Annotations only. The services other than the runner are imported where they are built: a stage's
    # cold start does not pay for the API's, the chat's or the triggers' code (bench: import times).
    from missions.adapters.sandbox_local import SandboxFunction
    from missions.app.stages import StageFunction
    from missions.core.llm.agents import AgentVersion
    from missions.core.llm.provider import LLMProvider
    from missions.core.mission.refs import RepositoryResolver, Workspaces
    from missions.core.settings import RuntimeSettings
    from missions.ports.accounts import PersonalStore
    from missions.ports.deployment import DeploymentReplies
    from missions.ports.notifications import Notifications
    from missions.ports.schedules import Scheduler
    from missions.ports.secrets import SecretReader
    from missions.service.accounts import AccountService
    from missions.service.agents import AgentConfigs
    from missions.service.chat import ChatService
    from missions.service.control import MissionControl
    from missions.service.conversations import ConversationService
    from missions.service.delegation import Delegations
    from missions.service.deployment import AgentDeployment
    from missions.service.evaluation import Evaluator
    from missions.service.flow.budgets import Budgets
    from missions.service.health import Readiness
    from missions.service.interrupts import InterruptService
    from missions.service.launcher import Launcher
    from missions.service.lifecycle import Lifecycle
    from missions.service.missions import MissionService
    from missions.service.notifications import NotificationService
    from missions.service.progress import MissionProgress
    from missions.service.repositories.service import RepositoryService
    from missions.service.retention import Retention
    from missions.service.runner import StageTimings
    from missions.service.triggers.ingest import Ingest
    from missions.service.triggers.schedules import ScheduleService


class Runtime(Bindings):
    """The services, built once per process on the ports (`Bindings`), and what each function calls."""

    def __init__(
        self,
        settings: RuntimeSettings,
        *,
        clients: dict[str, Any] | None = None,
        llm: LLMProvider | None = None,
        on_timings: Callable[[str, StageTimings], None] | None = None,
        secrets: SecretReader | None = None,
        capabilities: registry.Registry | None = None,
        deployment_replies: DeploymentReplies | None = None,
    ):
        """`clients`: boto3 clients by service name ("dynamodb", "s3", "stepfunctions", "events") for
        tests and the emulation; `llm`: one provider for every stage (tests, a local model server)."""
        super().__init__(settings, clients=clients, llm=llm, secrets=secrets, deployment_replies=deployment_replies)
        self.capabilities = capabilities or registry.default_registry()  # the mission types it serves
        self._on_timings = on_timings
        # what "today" is for daily budgets: the wall clock (the dev server's own clock, which it moves by hand)
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._runners: dict[str, StageRunner] = {}

    # -- services ---------------------------------------------------------------------------------

    @cached_property
    def agents(self) -> AgentConfigs | None:
        """Agent configuration versions (missions.service.agents), cached per process; None without the table
        (missions then run their capabilities as shipped)."""
        if not self.settings.agents_table:
            return None
        from missions.service.agents import AgentConfigs

        return AgentConfigs(
            self.agent_store,
            self.capabilities,
            prices=self.settings.openai_prices,
            environment_models=self.settings.mission_models(),
            cache_seconds=self.settings.agents_cache_seconds,
        )

    # -- repositories -----------------------------------------------------------------------------

    @cached_property
    def local_roots(self) -> AllowedRoots:
        return AllowedRoots.of(self.settings.repo_roots)

    @cached_property
    def repositories(self) -> RepositoryResolver:
        """Checks what a mission request says about its repository (before anything is stored)."""
        from missions.service.repositories.resolver import UserRepositories

        return UserRepositories(self.local_roots, self.repository_store if self.settings.repositories_table else None)

    @cached_property
    def workspaces(self) -> Workspaces:
        """Where stages read repositories: local roots, and snapshots unpacked into ephemeral storage."""
        from missions.service.repositories.workspace import RepositoryWorkspaces

        cache = Path(self.settings.workspace_dir)
        if not self.settings.snapshot_bucket:
            return RepositoryWorkspaces(self.local_roots, cache)
        from missions.service.repositories.archive import extract_snapshot

        return RepositoryWorkspaces(self.local_roots, cache, snapshots=self.snapshot_store, extract=extract_snapshot)

    @cached_property
    def repository_service(self) -> RepositoryService:
        from missions.adapters.eventbridge import EventBridgeImportQueue
        from missions.service.repositories.service import RepositoryService, UrlPolicy

        return RepositoryService(
            store=self.repository_store,
            snapshots=self.snapshot_store,
            imports=EventBridgeImportQueue(self.bus),
            urls=UrlPolicy(allow_local=self.settings.local_git_sources, roots=self.local_roots),
        )

    @cached_property
    def lifecycle(self) -> Lifecycle:
        from missions.service.lifecycle import Lifecycle

        return Lifecycle(self.missions, progress=self.progress.latest)

    @cached_property
    def progress(self) -> MissionProgress:
        """Where a running mission is: its newest checkpoint's progress, over its record."""
        from missions.service.progress import MissionProgress

        return MissionProgress(self.checkpoints)

    @cached_property
    def launcher(self) -> Launcher:
        """The one way a mission starts (every trigger, forks and the CLI's emulation)."""
        from missions.service.launcher import Launcher

        return Launcher(
            missions=self.missions,
            checkpoints=self.checkpoints,
            codec=self.codec,
            executions=self.executions,
            dispatch=self.dispatch_store,
            state_machine_arn=self.state_machine_arn,
            repositories=self.repositories,
            preferences=self.service.preferences if self.settings.memory_table else None,
            conversations=(lambda: self.conversations) if self.settings.conversations_table else None,
            limit=self.settings.concurrency_limit,
            capabilities=self.capabilities,
            agents=self.agents,
            reconcile_after_seconds=self.settings.reconcile_stale_after_seconds,
            start_failed=lambda record: self.delegations.ended(record),  # a sub-mission's parent is told
            budgets=self.budgets,
            events=self.events,
            cancel=lambda record, reason: self.control.cancel(record, reason),  # a double-texted mission replaced
        )

    @cached_property
    def budgets(self) -> Budgets | None:
        """Users' daily budgets (on the usage table, where every model call is counted); None without it."""
        from missions.service.flow.budgets import Budgets

        if not self.settings.usage_table:
            return None
        return Budgets(lambda: self.usage, self.settings.daily_budget_usd, now=lambda: self.now())

    @cached_property
    def delegations(self) -> Delegations:
        """Sub-missions: started by the interrupt function, their ends handed to their parents."""
        from missions.service.delegation import Delegations

        return Delegations(
            missions=self.missions,
            interrupts=self.interrupts,
            events=self.events,
            launcher=self.launcher,
            capabilities=self.capabilities,
            max_depth=self.settings.max_delegation_depth,
        )

    @cached_property
    def control(self) -> MissionControl:
        from missions.service.control import MissionControl

        return MissionControl(
            missions=self.missions,
            progress=self.progress,
            events=self.events,
            interrupts=self.interrupts,
            executions=self.executions,
            launcher=self.launcher,
            delegations=lambda: self.delegations,
            notifications=lambda: self.notifications,
            usage=(lambda: self.usage) if self.settings.usage_table else None,
        )

    @cached_property
    def notifications(self) -> NotificationService:
        """Notices when a mission needs its user or ends, to those who opted in (SNS email in AWS)."""
        from missions.service.notifications import NotificationService

        topic: Notifications | None = None
        if self.settings.notifications_topic:
            from missions.adapters.sns_notifications import SnsNotifications

            topic = SnsNotifications(self.settings.notifications_topic, self._client("sns"))
        return NotificationService(topic, self.memory)

    @cached_property
    def schedules(self) -> ScheduleService:
        """Users' own schedules: the schedules table, and EventBridge Scheduler schedules that fire them.
        DependencyUnavailable (503) where the settings name no table or schedule group."""
        from datetime import timedelta

        from missions.adapters.dynamodb.schedules import DynamoScheduleStore
        from missions.service.triggers.schedules import ScheduleService

        settings = self.settings
        scheduler = self.scheduler
        if not settings.schedules_table or scheduler is None:
            raise DependencyUnavailable("users' schedules are not configured here (no schedules table or group)")
        return ScheduleService(
            store=DynamoScheduleStore(settings.schedules_table, self._client("dynamodb")),
            scheduler=scheduler,
            capabilities=self.capabilities.available,
            choose_capability=self.service.choose_capability,
            submit=self.launcher.submit,
            check=self.launcher.check,
            limit=settings.schedules_per_user,
            minimum_interval=timedelta(minutes=settings.schedule_min_interval_minutes),
        )

    @cached_property
    def scheduler(self) -> Scheduler | None:
        """EventBridge Scheduler's group of schedules that invoke the schedule function: users' own schedules,
        and flow control's one-time timers (debounce); None where the settings name no group."""
        from missions.adapters.scheduler import EventBridgeScheduler

        settings = self.settings
        if not settings.schedule_group:
            return None
        return EventBridgeScheduler(
            group=settings.schedule_group,
            target_arn=settings.schedule_target_arn or "",
            role_arn=settings.scheduler_role_arn or "",
            dead_letter_arn=settings.schedule_dead_letter_arn,
            client=self._lazy("scheduler"),
        )

    @cached_property
    def accounts(self) -> AccountService:
        """A user's own data: export and erasure of everything stored about them, in every table and bucket."""
        from missions.adapters.dynamodb import personal
        from missions.service.accounts import AccountService

        dynamodb, s3 = self._client("dynamodb"), self._lazy("s3")
        per_user: list[PersonalStore] = [personal.UserDispatch(self._table("dispatch"), dynamodb)]
        if self.settings.conversations_table:
            per_user.append(personal.UserConversations(self.settings.conversations_table, dynamodb))
        if self.settings.memory_table:
            per_user.append(personal.UserMemory(self.settings.memory_table, dynamodb))
        if self.settings.repositories_table:
            per_user.append(
                personal.UserRepositories(self.settings.repositories_table, dynamodb, self.settings.snapshot_bucket, s3)
            )
        if self.settings.idempotency_table:
            per_user.append(personal.UserIdempotencyRecords(self.settings.idempotency_table, dynamodb))
        if self.settings.schedules_table and self.settings.schedule_group:
            per_user.append(self.schedules)  # the Scheduler's schedules, then the records
        return AccountService(
            index=personal.MissionRecords(self.settings.missions_table, dynamodb),
            missions=self.missions,
            cancel=self.control.cancel,
            per_mission=self._mission_stores(usage_totals=True),
            per_user=per_user,
            stop_notices=self.notifications.opt_out if self.settings.memory_table else None,
        )

    def _mission_stores(self, *, usage_totals: bool) -> list[PersonalStore]:
        """Each store keyed by mission, for its share of a mission: erasure's, and retention's pruning
        (which keeps the user's usage totals)."""
        from missions.adapters.dynamodb import personal

        dynamodb, s3 = self._client("dynamodb"), self._lazy("s3")
        stores: list[PersonalStore] = [
            personal.MissionEvents(self.settings.events_table, dynamodb),
            personal.MissionInterrupts(self.settings.interrupts_table, dynamodb),
            personal.MissionCheckpoints(self.settings.checkpoints_table, dynamodb, self.settings.blob_bucket, s3),
        ]
        if self.settings.artifacts_table:
            stores.append(personal.MissionArtifacts(self.settings.artifacts_table, dynamodb))
        if self.settings.usage_table:
            stores.append(personal.MissionUsage(self.settings.usage_table, dynamodb, totals=usage_totals))
        return stores

    @cached_property
    def chat(self) -> ChatService:
        """The chat entry (POST /v1/chat/completions): messages as turns of conversations."""
        from missions.service.chat import ChatService

        if not self.settings.conversations_table:
            raise DependencyUnavailable("the chat needs the conversations table, which is not configured")
        return ChatService(
            missions=self.missions,
            progress=self.progress,
            events=self.events,
            interrupts=self.interrupts,
            conversations=self.conversations,
            submit=self.launcher.submit,
            answer=self.interrupt_service.answer,
            choose_capability=self.service.choose_capability,
            capabilities=self.capabilities.available,
            first_stage=lambda name: self.capabilities.load(name).pipeline.start,
            poll_seconds=self.settings.stream_poll_seconds,
        )

    @cached_property
    def evaluator(self) -> Evaluator:
        """The trace scorers over missions' timelines (on demand, and the nightly run)."""
        from missions.service.evaluation import Evaluator

        return Evaluator(
            self.missions, self.events, self.capabilities, self.missions_by_capability, count=observability.count
        )

    @cached_property
    def service(self) -> MissionService:
        from missions.service.missions import MissionService

        stores = (self.missions, self.events, self.learnings, self.memory, self.missions_by_capability)
        return MissionService(
            *stores, feedback_llm=self.feedback_llm, classifier_llm=self.classifier_llm, capabilities=self.capabilities
        )

    @cached_property
    def readiness(self) -> Readiness:
        """GET /ready: every table this function's settings name, the bus, and the model provider (not the
        offline one, which has nothing to reach); the answer is kept `ready_cache_seconds`."""
        from missions.adapters.readiness import bus_check, table_check
        from missions.core.llm.provider import Probed
        from missions.service.health import Check, Readiness

        checks: dict[str, Check] = {}
        for name, value in sorted(self.settings.model_dump().items()):
            if name.endswith("_table") and value:
                checks[f"table:{name.removesuffix('_table')}"] = table_check(self._client("dynamodb"), value)
        if self.settings.event_bus:
            checks["bus"] = bus_check(self._client("events"), self.settings.event_bus)
        if self._llm is not None or self.settings.llm_provider != "scripted":
            provider = self._llm or self._model

            def model() -> None:
                if isinstance(provider, Probed):
                    provider.probe()

            checks[f"model:{provider.name}"] = model
        return Readiness(checks, ttl_seconds=self.settings.ready_cache_seconds)

    # -- the stage runner -------------------------------------------------------------------------

    def runner(self, capability_name: str) -> StageRunner:
        allowed = self.settings.capability
        if allowed and capability_name != allowed:
            raise StageRequestError(f"this function serves '{allowed}', not '{capability_name}'")
        if capability_name not in self._runners:
            capability = self.capabilities.load(capability_name)
            services = StageServices(
                checkpoints=self.checkpoints,
                events=self.events,
                codec=self.codec,
                llm=self.llm_for,
                missions=self.missions,
                interrupts=self.interrupts,
                artifacts=self.artifacts if self.settings.artifacts_table else None,
                on_timings=self._on_timings,
                workspaces=self.workspaces if capability.repository != "none" else None,
                secrets=lambda name: self.secrets.read(name),  # the reader (its client) made on first use
                mcp=self.mcp_tools if capability.mcp_servers else None,  # sessions opened on a tool's first call
                memory=(lambda: self.memory) if self.settings.memory_table else None,
                sandbox=lambda: self.sandbox,
                conversations=self._conversation_service if self.settings.conversations_table else None,
                agents=self._pinned_version if self.settings.agents_table else None,
                usage=(lambda: self.usage) if self.settings.usage_table else None,
                budgets=self._budgets_of_stages(),
                repairs=self.settings.model_repairs,
            )
            self._runners[capability_name] = StageRunner(capability, services)
        return self._runners[capability_name]

    def _budgets_of_stages(self) -> Callable[[], Budgets] | None:
        budgets = self.budgets
        return (lambda: budgets) if budgets is not None else None

    def _conversation_service(self) -> ConversationService:
        """Where a stage folds a mission that is a turn of a conversation (made when such a mission ends)."""
        from missions.service.conversations import ConversationService

        return ConversationService(self.conversations)

    def _pinned_version(self, capability: str, agent: str, version: int) -> AgentVersion:
        assert self.agents is not None, "stages read versions only when the agents table is set"
        return self.agents.pinned(capability, agent, version)

    # -- what each function calls (its handler is a decorator stack and one call) --------------------

    @cached_property
    def stages(self) -> StageFunction:
        """The stage function."""
        from missions.app.stages import StageFunction

        return StageFunction(self.runner)

    @cached_property
    def interrupt_service(self) -> InterruptService:
        """The interrupt and SLA functions, and answers (the API, the chat, the CLI)."""
        from missions.service.interrupts import InterruptService

        return InterruptService(
            interrupts=self.interrupts,
            events=self.events,
            missions=self.missions,
            progress=self.progress,
            launcher=lambda: self.launcher,
            notifications=lambda: self.notifications,
            sla_hours=self.settings.interrupt_sla_hours,
            count=observability.count,
            delegations=lambda: self.delegations,
        )

    @cached_property
    def ingest(self) -> Ingest:
        """The trigger functions: webhook, trigger (bus events), schedule and memory stream."""
        from missions.service.triggers.ingest import Ingest

        return Ingest(
            launcher=lambda: self.launcher,
            bus=lambda: self.bus,
            webhook_sources=lambda: self.webhook_sources,
            deliveries=lambda: self.deliveries,
            memory=lambda: self.memory,
            all_users=lambda: self.service.all_users(),
            schedules=lambda: self.schedules,
            flow_records=lambda: self.flow_records,
            timers=lambda: self.scheduler,
            now=lambda: self.now().timestamp(),  # the dev server's clock there, as for daily budgets
        )

    @cached_property
    def sandbox_function(self) -> SandboxFunction:
        """The sandbox function's own runner, for the tier its settings name."""
        from missions.adapters.sandbox_local import SandboxFunction

        return SandboxFunction(self.settings.sandbox_tier)

    @cached_property
    def agent_deployment(self) -> AgentDeployment:
        """The deploy function (a CloudFormation custom resource)."""
        from missions.service.deployment import AgentDeployment

        return AgentDeployment(self.agents, self.deployment_replies)

    @cached_property
    def retention(self) -> Retention:
        """The retention function: missions that ended long ago archived."""
        from missions.service.retention import Retention, RetentionPolicy

        minutes = self.settings.retention_minutes
        if minutes is None:
            policy = RetentionPolicy(self.settings.retention_completed_days, self.settings.retention_failed_days)
        else:  # the dev server's short policy: archived missions' bulky items pruned too
            policy = RetentionPolicy.minutes(minutes)
        prune = self._mission_stores(usage_totals=False) if minutes is not None else []
        return Retention(
            missions=self.missions, checkpoints=self.checkpoints, memory=self.memory, policy=policy, prune=prune
        )


_RUNTIME: Runtime | None = None


def default_runtime() -> Runtime:
    """The process-wide runtime of a Lambda container, built on its first invocation."""
    global _RUNTIME
    if _RUNTIME is None:
        from missions.core.settings import settings_from_env

        _RUNTIME = Runtime(settings_from_env())
    return _RUNTIME


__all__ = ["Runtime", "default_runtime"]
