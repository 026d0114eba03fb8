"""The composition root: the runtime's ports bound to their AWS adapters, and the services built on
them, once per process; and the entry point of every Lambda function.

Every member is a typed port or service; clients are private and made on first use, so a cold start
pays only for what its function touches (the stage of a capability without a repository never
creates an S3 client; a stage that calls no model never imports openai). Tests and the local
emulation pass their own clients. Nothing here reads the environment or creates a client at import.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from missions.app import observability
from missions.core import capability as registry
from missions.core.compiler import segment_spent
from missions.core.errors import DependencyUnavailable, NotFound, StageRequestError, TransitionRefused
from missions.core.offload import EnvelopeCodec
from missions.core.redaction import remember_secret
from missions.core.roots import AllowedRoots
from missions.core.sandbox import FUNCTION_HEADROOM_MB, SandboxRequest, TierLimits
from missions.core.settings import SettingsError
from missions.service.runner import StageRunner, StageServices

if TYPE_CHECKING:
    # Annotations only. The services other than the runner are imported where they are built: a stage's
    # cold start does not pay for the API's, the chat's or the triggers' code (bench: import times).
    from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
    from botocore.client import BaseClient
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from pydantic import SecretStr

    from missions.adapters.sandbox_local import LocalSandbox
    from missions.core.agents import AgentVersion
    from missions.core.capability import Capability
    from missions.core.envelope import InterruptResponse
    from missions.core.llm import LLMProvider
    from missions.core.refs import RepositoryResolver, Workspaces
    from missions.core.settings import RuntimeSettings
    from missions.ports.accounts import PersonalStore
    from missions.ports.agents import AgentStore, UsageStore
    from missions.ports.artifacts import ArtifactStore
    from missions.ports.bus import EventBus
    from missions.ports.checkpoints import CheckpointStore
    from missions.ports.conversations import ConversationStore
    from missions.ports.deployment import DeploymentReplies
    from missions.ports.dispatch import DispatchStore
    from missions.ports.events import EventStore
    from missions.ports.executions import Executions
    from missions.ports.interrupts import InterruptRecord, InterruptStore
    from missions.ports.learnings import LearningsStore
    from missions.ports.memory import Embedder, LongTermMemory
    from missions.ports.missions import MissionsByCapability, MissionStore
    from missions.ports.notifications import Notifications
    from missions.ports.repositories import RepositoryStore, SnapshotStore
    from missions.ports.sandbox import Sandbox
    from missions.ports.secrets import SecretReader
    from missions.ports.webhooks import DeliveryStore, WebhookSources
    from missions.service.accounts import AccountService
    from missions.service.agents import AgentConfigs
    from missions.service.chat import ChatService
    from missions.service.control import MissionControl
    from missions.service.evaluation import Evaluator
    from missions.service.health import Readiness
    from missions.service.launcher import Launcher
    from missions.service.lifecycle import Lifecycle
    from missions.service.missions import MissionService
    from missions.service.notifications import NotificationService
    from missions.service.repositories.service import RepositoryService
    from missions.service.runner import StageTimings
    from missions.service.schedules import ScheduleService


class Runtime:
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
        self.settings = settings
        self.capabilities = capabilities or registry.default_registry()  # the mission types it serves
        self._clients: dict[str, Any] = dict(clients or {})
        self._llm = llm
        self._on_timings = on_timings
        self._secrets = secrets
        self._deployment_replies = deployment_replies
        self._runners: dict[str, StageRunner] = {}
        # where presigned upload URLs point: None is S3 itself; the dev server serves them locally
        self.upload_endpoint: str | None = None

    # -- clients: private, made on first use ------------------------------------------------------

    def _client(self, service: str) -> BaseClient:
        if service not in self._clients:
            import boto3

            self._clients[service] = boto3.client(service)  # type: ignore[call-overload]
        return self._clients[service]  # type: ignore[no-any-return]

    def _lazy(self, service: str) -> Any:
        """A client made when first called (S3 is only needed for huge blobs and snapshots)."""
        return _LazyClient(lambda: self._client(service))

    def _table(self, name: str) -> str:
        value: str | None = getattr(self.settings, f"{name}_table")
        if not value:
            raise SettingsError(f"MISSIONS_{name.upper()}_TABLE is not set")
        return value

    @property
    def _ttl(self) -> int | None:
        days = self.settings.checkpoint_ttl_days
        return days * 86400 if days else None

    # -- ports ------------------------------------------------------------------------------------

    @cached_property
    def missions(self) -> MissionStore:
        from missions.adapters.dynamodb.missions import DynamoMissionStore

        return DynamoMissionStore(self.settings.missions_table, client=self._client("dynamodb"))

    @cached_property
    def checkpoints(self) -> CheckpointStore:
        from missions.adapters.dynamodb.checkpoints import DynamoCheckpointStore

        return DynamoCheckpointStore(
            self.settings.checkpoints_table, client=self._client("dynamodb"), ttl_seconds=self._ttl
        )

    @cached_property
    def events(self) -> EventStore:
        from missions.adapters.dynamodb.events import DynamoEventStore

        return DynamoEventStore(self.settings.events_table, client=self._client("dynamodb"), ttl_seconds=self._ttl)

    @cached_property
    def interrupts(self) -> InterruptStore:
        from missions.adapters.dynamodb.interrupts import DynamoInterruptStore

        return DynamoInterruptStore(self.settings.interrupts_table, client=self._client("dynamodb"))

    @cached_property
    def artifacts(self) -> ArtifactStore:
        from missions.adapters.dynamodb.artifacts import DynamoArtifactStore

        return DynamoArtifactStore(self._table("artifacts"), client=self._client("dynamodb"), ttl_seconds=self._ttl)

    @cached_property
    def codec(self) -> EnvelopeCodec:
        from missions.adapters.dynamodb.blobs import DynamoBlobStore

        blobs = DynamoBlobStore(
            self.settings.checkpoints_table,
            self.settings.blob_bucket,
            client=self._client("dynamodb"),
            s3_client=self._lazy("s3"),
        )
        return EnvelopeCodec(blobs, threshold=self.settings.offload_threshold)

    @cached_property
    def memory(self) -> LongTermMemory:
        from missions.adapters.dynamodb.longterm import DynamoLongTermMemory

        return DynamoLongTermMemory(self._table("memory"), client=self._client("dynamodb"), embedder=self.embedder)

    @cached_property
    def conversations(self) -> ConversationStore:
        """Conversations' working memories (a mission that is a turn of one reads and folds it)."""
        from missions.adapters.dynamodb.conversations import DynamoConversationStore

        return DynamoConversationStore(self._table("conversations"), client=self._client("dynamodb"))

    @cached_property
    def agent_store(self) -> AgentStore:
        from missions.adapters.dynamodb.agents import DynamoAgentStore

        return DynamoAgentStore(self._table("agents"), client=self._client("dynamodb"))

    @cached_property
    def usage(self) -> UsageStore:
        from missions.adapters.dynamodb.agents import DynamoUsageStore

        return DynamoUsageStore(self._table("usage"), client=self._client("dynamodb"))

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

    @cached_property
    def embedder(self) -> Embedder:
        if self.settings.llm_provider == "openai":
            from missions.adapters.embeddings import OpenAIEmbedder

            return OpenAIEmbedder(api_key=self.openai_api_key(), base_url=self.settings.openai_base_url)
        from missions.adapters.embeddings import HashingEmbedder

        return HashingEmbedder()

    @cached_property
    def learnings(self) -> LearningsStore:
        from missions.adapters.dynamodb.learnings import DynamoLearningsStore

        return DynamoLearningsStore(self._table("learnings"), client=self._client("dynamodb"))

    @cached_property
    def missions_by_capability(self) -> MissionsByCapability:
        from missions.adapters.dynamodb.missions import DynamoMissionsByCapability

        return DynamoMissionsByCapability(self.settings.missions_table, client=self._client("dynamodb"))

    @cached_property
    def dispatch_store(self) -> DispatchStore:
        from missions.adapters.dynamodb.dispatch import DynamoDispatchStore

        return DynamoDispatchStore(self._table("dispatch"), client=self._client("dynamodb"))

    @cached_property
    def deliveries(self) -> DeliveryStore:
        from missions.adapters.dynamodb.deliveries import DynamoDeliveryStore

        return DynamoDeliveryStore(self._table("deliveries"), client=self._client("dynamodb"))

    @cached_property
    def idempotency(self) -> BasePersistenceLayer:
        """Where the HTTP API keeps Idempotency-Key records (Powertools Idempotency's DynamoDB layer, one
        partition per user)."""
        from missions.adapters.dynamodb.idempotency import UserIdempotencyLayer

        client: DynamoDBClient = self._client("dynamodb")  # type: ignore[assignment]  # a dynamodb client
        return UserIdempotencyLayer(self._table("idempotency"), boto3_client=client)

    @cached_property
    def webhook_sources(self) -> WebhookSources:
        """Webhook secrets: from the settings locally, from Secrets Manager (cached) in AWS."""
        from missions.adapters.memory.webhooks import StaticWebhookSources
        from missions.ports.webhooks import WebhookSource

        if self.settings.webhook_sources:
            configured = self.settings.webhook_sources.items()
            return StaticWebhookSources({name: WebhookSource.from_config(name, spec) for name, spec in configured})
        if self.settings.webhook_secrets_prefix:
            from missions.adapters.secrets import SecretsManagerWebhookSources

            return SecretsManagerWebhookSources(self.settings.webhook_secrets_prefix)
        return StaticWebhookSources({})

    @cached_property
    def executions(self) -> Executions:
        from missions.adapters.stepfunctions import StepFunctionsExecutions

        return StepFunctionsExecutions(self._lazy("stepfunctions"))

    @cached_property
    def bus(self) -> EventBus:
        from missions.adapters.eventbridge import EventBridgeBus

        if not self.settings.event_bus:
            raise SettingsError("MISSIONS_EVENT_BUS is not set")
        return EventBridgeBus(self.settings.event_bus, self._lazy("events"))

    @cached_property
    def secrets(self) -> SecretReader:
        if self._secrets is None:
            from missions.adapters.secrets import PowertoolsSecrets

            self._secrets = PowertoolsSecrets()
        return self._secrets

    @cached_property
    def sandbox(self) -> Sandbox:
        """Runs analysis scripts (missions.ports.sandbox): through the sandbox function of the script's
        tier where the settings name them (AWS), else in a child process here (the emulation, the CLI)."""
        if self.settings.sandbox_functions:
            from missions.adapters.sandbox_lambda import LambdaSandbox

            return LambdaSandbox(self.settings.sandbox_functions, client=self._clients.get("lambda"))
        from missions.adapters.sandbox_local import LocalSandbox

        return LocalSandbox()

    @cached_property
    def _sandbox_here(self) -> LocalSandbox:
        """The sandbox function's own runner. In the function (its tier is set) it owns /tmp's sandbox
        directories and no child may read this process's memory or /proc/<pid>/environ."""
        from missions.adapters.sandbox_local import LocalSandbox

        return LocalSandbox(in_function=self.settings.sandbox_tier is not None)

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
    def repository_store(self) -> RepositoryStore:
        from missions.adapters.dynamodb.repositories import DynamoRepositoryStore

        return DynamoRepositoryStore(self._table("repositories"), client=self._client("dynamodb"))

    @cached_property
    def snapshot_store(self) -> SnapshotStore:
        from missions.adapters.s3_snapshots import S3SnapshotStore

        if not self.settings.snapshot_bucket:
            raise SettingsError("MISSIONS_SNAPSHOT_BUCKET is not set")
        return S3SnapshotStore(
            self.settings.snapshot_bucket, self._lazy("s3"), presign_endpoint=lambda: self.upload_endpoint
        )

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

    # -- services ---------------------------------------------------------------------------------

    @cached_property
    def lifecycle(self) -> Lifecycle:
        from missions.service.lifecycle import Lifecycle

        return Lifecycle(self.missions)

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
        )

    @cached_property
    def control(self) -> MissionControl:
        from missions.service.control import MissionControl

        return MissionControl(
            missions=self.missions,
            events=self.events,
            interrupts=self.interrupts,
            executions=self.executions,
            launcher=self.launcher,
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
        from missions.adapters.scheduler import EventBridgeScheduler
        from missions.service.schedules import ScheduleService

        settings = self.settings
        if not (settings.schedules_table and settings.schedule_group):
            raise DependencyUnavailable("users' schedules are not configured here (no schedules table or group)")
        scheduler = EventBridgeScheduler(
            group=settings.schedule_group,
            target_arn=settings.schedule_target_arn or "",
            role_arn=settings.scheduler_role_arn or "",
            dead_letter_arn=settings.schedule_dead_letter_arn,
            client=self._lazy("scheduler"),
        )
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
        per_mission: list[PersonalStore] = [
            personal.MissionEvents(self.settings.events_table, dynamodb),
            personal.MissionInterrupts(self.settings.interrupts_table, dynamodb),
            personal.MissionCheckpoints(self.settings.checkpoints_table, dynamodb, self.settings.blob_bucket, s3),
        ]
        if self.settings.artifacts_table:
            per_mission.append(personal.MissionArtifacts(self.settings.artifacts_table, dynamodb))
        if self.settings.usage_table:
            per_mission.append(personal.MissionUsage(self.settings.usage_table, dynamodb))
        return AccountService(
            index=personal.MissionRecords(self.settings.missions_table, dynamodb),
            missions=self.missions,
            cancel=self.control.cancel,
            per_mission=per_mission,
            per_user=per_user,
            stop_notices=self.notifications.opt_out if self.settings.memory_table else None,
        )

    @cached_property
    def chat(self) -> ChatService:
        """The chat entry (POST /v1/chat/completions): messages as turns of conversations."""
        from missions.service.chat import ChatService

        if not self.settings.conversations_table:
            raise DependencyUnavailable("the chat needs the conversations table, which is not configured")
        return ChatService(
            missions=self.missions,
            events=self.events,
            interrupts=self.interrupts,
            conversations=self.conversations,
            submit=self.launcher.submit,
            answer=self.answer,
            choose_capability=self.service.choose_capability,
            capabilities=self.capabilities.available,
            first_stage=lambda name: self.capabilities.load(name).pipeline.start,
            poll_seconds=self.settings.stream_poll_seconds,
        )

    @cached_property
    def evaluator(self) -> Evaluator:
        """The trace scorers over missions' timelines (on demand, and the nightly run)."""
        from missions.service.evaluation import Evaluator

        return Evaluator(self.missions, self.events, self.capabilities, self.missions_by_capability)

    @cached_property
    def service(self) -> MissionService:
        from missions.service.missions import MissionService

        return MissionService(
            missions=self.missions,
            events=self.events,
            learnings=self.learnings,
            memory=self.memory,
            by_capability=self.missions_by_capability,
            feedback_llm=self.feedback_llm,
            classifier_llm=self.classifier_llm,
            capabilities=self.capabilities,
        )

    @cached_property
    def readiness(self) -> Readiness:
        """GET /ready: every table this function's settings name, the bus, and the model provider (not the
        offline one, which has nothing to reach); the answer is kept `ready_cache_seconds`."""
        from missions.adapters.readiness import bus_check, table_check
        from missions.core.llm import Probed
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

    def state_machine_arn(self, capability: str) -> str:
        try:
            return self.settings.state_machine_arns[capability]
        except KeyError:
            raise StageRequestError(f"no state machine is deployed for '{capability}'") from None

    # -- models -----------------------------------------------------------------------------------

    def llm_for(self, capability: Capability) -> LLMProvider:
        """The provider a capability's stages use: the one given, the offline model, or the environment's."""
        if self._llm is not None:
            return self._llm
        if self.settings.llm_provider == "scripted":
            from missions.adapters.llm.scripted import ScriptedProvider

            return ScriptedProvider(capability.offline_policy)
        return self._model

    def feedback_llm(self) -> LLMProvider:
        """Reads preferences out of feedback text: the model, or offline the rules of core.preferences."""
        if self._llm is not None or self.settings.llm_provider != "scripted":
            return self._llm or self._model
        from missions.adapters.llm.scripted import ScriptedProvider
        from missions.core.preferences import offline_preference_policy

        return ScriptedProvider(offline_preference_policy)

    def classifier_llm(self) -> LLMProvider | None:
        """The model that picks a capability for a goal; None offline (the goal must name one)."""
        return self._model if self.settings.llm_provider != "scripted" else None

    @cached_property
    def _model(self) -> LLMProvider:
        """The environment's provider (`llm_provider`), made on first use: only LLM stages import its SDK. Every
        provider is the same ResilientProvider (missions.adapters.llm.resilient) around its own API."""
        default, fallback, models = self.settings.provider_models()
        common: dict[str, Any] = {
            "models": models,
            "default_model": default,
            "fallback_model": fallback,
            "prices": self.settings.openai_prices,
        }
        if self.settings.llm_provider == "bedrock":
            from missions.adapters.llm.bedrock_provider import BedrockProvider

            return BedrockProvider(
                region=self.settings.bedrock_region,
                client=self._clients.get("bedrock-runtime"),
                control_client=self._clients.get("bedrock"),
                **common,
            )
        if self.settings.llm_provider == "anthropic":
            from missions.adapters.llm.anthropic_provider import AnthropicProvider

            return AnthropicProvider(
                api_key=self._key(self.settings.anthropic_api_key, self.settings.anthropic_secret),
                base_url=self.settings.anthropic_base_url,
                http_client=self._clients.get("anthropic-http"),
                **common,
            )
        from missions.adapters.llm.openai_provider import OpenAIProvider

        return OpenAIProvider(
            api_key=self.openai_api_key(),
            base_url=self.settings.openai_base_url,
            stream=self.settings.openai_stream,
            **common,
        )

    def openai_api_key(self) -> str:
        """The OpenAI key (see `_key`); a local OpenAI-compatible server (OPENAI_BASE_URL) may want none."""
        return self._key(self.settings.openai_api_key, self.settings.openai_secret) or "not-needed"

    def _key(self, local: SecretStr | None, secret: str | None) -> str | None:
        """A provider's key from local settings, else from Secrets Manager (never from an environment variable
        in AWS). Whichever it is, every error this process stores from now on is cleaned of it (core.redaction)."""
        if local:
            key = local.get_secret_value()
        elif secret:
            key = self.secrets.read(secret)
        else:
            return None
        remember_secret(key)
        return key

    # -- the functions' entry points ------------------------------------------------------------------

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
                memory=(lambda: self.memory) if self.settings.memory_table else None,
                sandbox=lambda: self.sandbox,
                conversations=(lambda: self.conversations) if self.settings.conversations_table else None,
                agents=self._pinned_version if self.settings.agents_table else None,
                usage=(lambda: self.usage) if self.settings.usage_table else None,
            )
            self._runners[capability_name] = StageRunner(capability, services)
        return self._runners[capability_name]

    def _pinned_version(self, capability: str, agent: str, version: int) -> AgentVersion:
        assert self.agents is not None, "stages read versions only when the agents table is set"
        return self.agents.pinned(capability, agent, version)

    def handle_stage(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        envelope = event.get("envelope")
        if not isinstance(envelope, dict) or not isinstance(envelope.get("capability"), str):
            raise StageRequestError("stage request without an envelope naming its capability")
        runner = self.runner(envelope["capability"])
        result = runner.handle(event, deadline=_deadline_of(context))
        if "segment_started" in event:  # a stage of an Express segment: should the segment hand back?
            # when the mission ended meanwhile (cancelled), its user paused it, or the segment has used its time
            result["segment_yield"] = (
                runner.mission_ended_meanwhile or runner.pausing or segment_spent(event, datetime.now(UTC))
            )
        report = runner.last_report
        if report is not None:
            observability.stage_metrics(
                report.capability, report.stage, runner.last_timings.total_ms, report.before, report.after, report.ended
            )
        observability.usage_metrics(runner.last_usage)
        return result

    def handle_interrupt(self, event: dict[str, Any]) -> dict[str, Any]:
        from missions.service.interrupts import record_interrupt

        if event.get("mode") == "pause":
            return self._handle_pause(event)

        record = record_interrupt(event, self.interrupts)
        # only now can an answer reach the execution: only now is the mission waiting for one
        try:
            self.lifecycle.waiting(record.mission_id, record.interrupt_id)
        except TransitionRefused:
            pass  # cancelled meanwhile: its execution is being stopped, the question will not be shown
        else:
            self.launcher.waiting(record.mission_id)  # waiting for a human holds no running slot
            self.notifications.mission_waiting(self.missions.get(record.mission_id), record)
        return {"interrupt_id": record.interrupt_id, "status": record.status}

    def _handle_pause(self, event: dict[str, Any]) -> dict[str, Any]:
        """The execution waits for its user's resume: keep the token on the mission, now paused, and give
        its running slot to the next one. A mission cancelled while it was pausing refuses (this task
        fails, so the execution ends through its final stage, which finds it cancelled)."""
        from missions.core.events import Event, EventType

        envelope = event.get("envelope") or {}
        token, mission_id = event.get("task_token"), envelope.get("mission_id")
        if not token or not isinstance(mission_id, str):
            raise StageRequestError("a pause request needs envelope.mission_id and task_token")
        hops = int((envelope.get("counters") or {}).get("agent_hops") or 0)
        pause_id = f"pause-{hops:04d}"
        self.lifecycle.paused(mission_id, pause_id, str(token))
        self.launcher.waiting(mission_id)  # a paused mission holds no running slot
        paused = Event(
            type=EventType.MISSION_PAUSED,
            mission_id=mission_id,
            stage=envelope.get("next_stage"),
            payload={"pause_id": pause_id, "next_stage": envelope.get("next_stage")},
        )
        self.events.append(mission_id, pause_id, [paused])
        return {"pause_id": pause_id, "status": "paused"}

    def answer(
        self, mission_id: str, interrupt_id: str, response: InterruptResponse | dict[str, Any]
    ) -> tuple[InterruptRecord, bool]:
        """Answer a question (the API and the CLI): recorded once, resumed when the user has a slot."""
        from missions.service.interrupts import answer_interrupt

        return answer_interrupt(
            interrupts=self.interrupts,
            events=self.events,
            resume=self.launcher.resume,
            mission_id=mission_id,
            interrupt_id=interrupt_id,
            response=response,
        )

    def handle_execution_status(self, event: dict[str, Any]) -> dict[str, Any]:
        detail = event.get("detail") or {}
        self.control.execution_ended(str(detail["executionArn"]), str(detail["status"]))
        try:
            self.notifications.mission_ended(self.missions.get(str(detail["executionArn"]).rsplit(":", 1)[-1]))
        except NotFound:
            pass  # an execution of no mission of ours: execution_ended logged it
        return {"mission_id": detail.get("name"), "status": detail["status"]}

    def handle_webhook(self, event: dict[str, Any]) -> dict[str, Any]:
        from missions.service.ingest import receive_webhook

        return receive_webhook(event, sources=self.webhook_sources, deliveries=self.deliveries, bus=self.bus)

    def handle_trigger(self, event: dict[str, Any]) -> dict[str, Any]:
        from missions.service.ingest import dispatch_event

        return dispatch_event(event, self.launcher)

    def handle_schedule(self, event: dict[str, Any]) -> dict[str, Any]:
        """A firing: of a user's own schedule (one mission, theirs), or of a capability's (one per user)."""
        from missions.service.ingest import fan_out_schedule
        from missions.service.schedules import is_user_schedule

        if is_user_schedule(event):
            return self.schedules.fire(event)
        return fan_out_schedule(event, self.launcher, self.memory, self.service.all_users)

    def handle_memory_record(self, record: dict[str, Any]) -> None:
        """One DynamoDB stream record of the memory table -> one `memory.changed` event on the bus."""
        from missions.adapters.dynamodb.longterm import change_from_stream_record
        from missions.service.ingest import publish_memory_change

        publish_memory_change(change_from_stream_record(record), self.bus)

    def handle_repository_import(self, event: dict[str, Any]) -> dict[str, Any]:
        detail = event.get("detail") or {}
        record = self.repository_service.run_import(str(detail.get("repository_id")), detail.get("ref"))
        observability.logger().info(
            "repository imported", extra={"repository_id": record.repository_id, "status": record.status}
        )
        return {"repository_id": record.repository_id, "status": record.status, "reason": record.reason}

    def handle_sandbox(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """The sandbox function: one request run in a child process of this one, within the tier this
        function serves, its memory less its own headroom, and its remaining time less a margin."""
        request = SandboxRequest.model_validate(event)
        tier = self.settings.sandbox_tier
        if tier is not None and request.tier != tier:
            raise StageRequestError(f"this sandbox function runs {tier} scripts, not {request.tier} ones")
        local = self._sandbox_here
        result = local.run(request, within=_sandbox_room(context))
        observability.logger().info(
            "analysis script run",
            extra={
                "tier": request.tier,
                "status": result.status,
                "error_kind": result.error_kind,
                "duration_ms": result.duration_ms,
                "isolation": local.isolation.description,
            },
        )
        return result.to_event()

    def handle_sla(self) -> dict[str, Any]:
        """Questions unanswered past the SLA: a metric the alarm watches, and the oldest logged."""
        from aws_lambda_powertools.metrics import MetricUnit

        from missions.service.interrupts import overdue_interrupts

        report = overdue_interrupts(self.interrupts, self.settings.interrupt_sla_hours)
        observability.metrics().add_metric(name="InterruptsOverdue", unit=MetricUnit.Count, value=report.count)
        for record in report.oldest:
            observability.logger().warning(
                "question overdue",
                extra={
                    "mission_id": record.mission_id,
                    "interrupt_id": record.interrupt_id,
                    "asked_at": record.created_at,
                    "stage": record.stage,
                },
            )
        return {"overdue": report.count, "oldest": [f"{r.mission_id}/{r.interrupt_id}" for r in report.oldest]}

    def handle_reconcile(self, now: Callable[[], int] = time.time_ns) -> dict[str, Any]:
        """Finish the starts that crashed processes left half-done; each one is logged with what was done."""
        report = self.launcher.reconcile(self.settings.reconcile_stale_after_seconds, now=now)
        for action in ("queued", "started", "released"):
            for mission_id in report[action]:
                observability.logger().warning(f"stranded mission {action}", extra={"mission_id": mission_id})
        for mission_id, why in report["failures"].items():
            observability.logger().error(
                "stranded mission not reconciled", extra={"mission_id": mission_id, "reason": why}
            )
        return report

    def handle_evaluate(self) -> dict[str, Any]:
        """Score the missions that ended in the last day and keep each verdict on its timeline; the
        count of safety violations is the metric the stack alarms on, and each one is logged."""
        from aws_lambda_powertools.metrics import MetricUnit

        report = self.evaluator.nightly()
        observability.metrics().add_metric(
            name="SafetyViolations", unit=MetricUnit.Count, value=int(report["safety_violations"])
        )
        for violation in report["violations"]:
            observability.logger().error("tool used without approval", extra={"violation": violation})
        return report

    def handle_agent_deploy(self, event: dict[str, Any]) -> dict[str, Any]:
        """The deploy-time custom resource (missions.service.deployment): store each capability's shipped
        agent configurations, then answer CloudFormation."""
        from aws_lambda_powertools.utilities.parser import parse
        from aws_lambda_powertools.utilities.parser.models import (
            CloudFormationCustomResourceCreateModel,
            CloudFormationCustomResourceDeleteModel,
            CloudFormationCustomResourceUpdateModel,
        )

        from missions.service.deployment import CustomResourceRequest, handle_agent_deploy

        parsed = parse(
            event,
            CloudFormationCustomResourceCreateModel
            | CloudFormationCustomResourceUpdateModel
            | CloudFormationCustomResourceDeleteModel,  # type: ignore[arg-type]
        )
        properties = parsed.resource_properties if isinstance(parsed.resource_properties, dict) else {}
        request = CustomResourceRequest(
            request_type=parsed.request_type,
            response_url=str(parsed.response_url),
            stack_id=parsed.stack_id,
            request_id=parsed.request_id,
            logical_resource_id=parsed.logical_resource_id,
            capabilities=[str(name) for name in properties.get("Capabilities", [])],
        )
        agents = self.agents

        def deploy(capability: str) -> list[dict[str, Any]]:
            if agents is None:  # a wiring bug: fail the deploy with the reason rather than leave it waiting
                raise SettingsError("MISSIONS_AGENTS_TABLE is not set: nowhere to store agent configurations")
            return agents.deploy(capability)

        reply = handle_agent_deploy(
            request,
            deploy,
            self.deployment_replies,
            on_failure=lambda exc: observability.logger().exception("agent configurations not stored"),
        )
        observability.logger().info(
            "deploy replied", extra={"status": reply["Status"], "reason": reply["Reason"], "data": reply["Data"]}
        )
        return reply

    @property
    def deployment_replies(self) -> DeploymentReplies:
        if self._deployment_replies is None:
            from missions.adapters.cloudformation import HttpDeploymentReplies

            self._deployment_replies = HttpDeploymentReplies()
        return self._deployment_replies

    def handle_retention(self, now: Callable[[], datetime] | None = None) -> dict[str, Any]:
        """Archive missions that ended long ago: a summary into long-term memory, checkpoints removed."""
        from missions.service.retention import RetentionPolicy, archive_ended_missions

        policy = RetentionPolicy(self.settings.retention_completed_days, self.settings.retention_failed_days)
        report = archive_ended_missions(
            missions=self.missions,
            checkpoints=self.checkpoints,
            memory=self.memory,
            policy=policy,
            now=now,
        )
        for mission_id, why in report.failures.items():
            observability.logger().error("mission not archived", extra={"mission_id": mission_id, "reason": why})
        return {
            "archived": report.archived,
            "checkpoints_removed": report.checkpoints_removed,
            "failures": report.failures,
        }


COMMIT_MARGIN_SECONDS = 3.0  # what a stage keeps back, after its last model call, to commit


def _deadline_of(context: Any) -> float | None:
    """When this invocation must be done (time.monotonic()), from the Lambda context's remaining time."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return time.monotonic() + max(0.0, float(remaining()) / 1000 - COMMIT_MARGIN_SECONDS)


SANDBOX_TIME_MARGIN_SECONDS = 2.0  # what the sandbox function keeps back to report after its child ends


def _sandbox_room(context: Any) -> TierLimits | None:
    """What a child may use inside the sandbox function: its memory less the headroom it was given for
    itself, its remaining time less the margin (None outside Lambda: the tier's limits apply as they are)."""
    memory = getattr(context, "memory_limit_in_mb", None)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if memory is None or remaining is None:
        return None
    return TierLimits(
        memory_mb=max(16, int(memory) - FUNCTION_HEADROOM_MB),
        timeout_seconds=max(1.0, float(remaining()) / 1000 - SANDBOX_TIME_MARGIN_SECONDS),
    )


class _LazyClient:
    """Makes its client when an attribute is first asked for (S3 is only needed for huge blobs)."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = self._factory()
        return getattr(self._client, name)


_RUNTIME: Runtime | None = None


def default_runtime() -> Runtime:
    """The process-wide runtime of a Lambda container, built on its first invocation."""
    global _RUNTIME
    if _RUNTIME is None:
        from missions.core.settings import settings_from_env

        _RUNTIME = Runtime(settings_from_env())
    return _RUNTIME


__all__ = ["Runtime", "default_runtime"]
