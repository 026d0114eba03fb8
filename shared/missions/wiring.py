"""Composition root: the runtime's ports bound to AWS adapters, built once per process.

Handlers call `Runtime.handle_*`; tests and the local emulation pass their own clients.
Nothing here creates a client or reads the environment at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from missions import capability as registry
from missions.capability import Capability
from missions.interrupts import record_interrupt
from missions.lifecycle import Lifecycle, TransitionRefused
from missions.llm.base import LLMProvider
from missions.llm.scripted import ScriptedProvider
from missions.offload import EnvelopeCodec
from missions.runner import StageRequestError, StageRunner, StageServices
from missions.settings import RuntimeSettings, SettingsError
from missions.store.dynamodb import (
    DynamoBlobStore,
    DynamoCheckpointStore,
    DynamoEventStore,
    DynamoInterruptStore,
    DynamoMissionStore,
)
from missions.store.executions_sfn import StepFunctionsExecutions


class Runtime:
    def __init__(
        self,
        settings: RuntimeSettings,
        *,
        dynamodb: Any = None,
        s3: Any = None,
        llm: LLMProvider | None = None,
        on_timings: Any = None,
        sfn: Any = None,
        eventbridge: Any = None,
        read_secret: Callable[[str], str] | None = None,
    ):
        self.settings = settings
        self._dynamodb = dynamodb
        self._s3 = s3
        self._llm = llm
        self._runners: dict[str, StageRunner] = {}
        self._on_timings = on_timings
        self._sfn = sfn
        self._eventbridge = eventbridge
        self._read_secret = read_secret or _powertools_secret
        # where presigned upload URLs point: None is S3 itself; the dev server serves them locally
        self.upload_endpoint: str | None = None

    # -- clients and adapters (lazy: a cold start pays only for what it uses) ----------

    @cached_property
    def dynamodb(self) -> Any:
        if self._dynamodb is None:
            import boto3

            self._dynamodb = boto3.client("dynamodb")
        return self._dynamodb

    @cached_property
    def s3(self) -> Any:
        if self._s3 is None:
            import boto3

            self._s3 = boto3.client("s3")
        return self._s3

    @cached_property
    def missions(self) -> DynamoMissionStore:
        return DynamoMissionStore(self.settings.missions_table, client=self.dynamodb)

    @cached_property
    def checkpoints(self) -> DynamoCheckpointStore:
        return DynamoCheckpointStore(self.settings.checkpoints_table, client=self.dynamodb, ttl_seconds=self._ttl)

    @cached_property
    def events(self) -> DynamoEventStore:
        return DynamoEventStore(self.settings.events_table, client=self.dynamodb, ttl_seconds=self._ttl)

    @cached_property
    def interrupts(self) -> DynamoInterruptStore:
        return DynamoInterruptStore(self.settings.interrupts_table, client=self.dynamodb)

    @cached_property
    def artifacts(self) -> Any:
        from missions.store.dynamodb import DynamoArtifactStore

        return DynamoArtifactStore(self._table("artifacts"), client=self.dynamodb, ttl_seconds=self._ttl)

    @cached_property
    def codec(self) -> EnvelopeCodec:
        blobs = DynamoBlobStore(
            self.settings.checkpoints_table,
            self.settings.blob_bucket,
            client=self.dynamodb,
            s3_client=LazyClient(lambda: self.s3),
        )
        return EnvelopeCodec(blobs, threshold=self.settings.offload_threshold)

    @property
    def _ttl(self) -> int | None:
        days = self.settings.checkpoint_ttl_days
        return days * 86400 if days else None

    @cached_property
    def sfn(self) -> Any:
        if self._sfn is None:
            import boto3

            self._sfn = boto3.client("stepfunctions")
        return self._sfn

    @cached_property
    def eventbridge(self) -> Any:
        if self._eventbridge is None:
            import boto3

            self._eventbridge = boto3.client("events")
        return self._eventbridge

    def _table(self, name: str) -> str:
        value = getattr(self.settings, f"{name}_table")
        if not value:
            raise SettingsError(f"MISSIONS_{name.upper()}_TABLE is not set")
        return value

    @cached_property
    def memory(self) -> Any:
        from missions.longterm.dynamodb import DynamoLongTermMemory

        return DynamoLongTermMemory(self._table("memory"), client=self.dynamodb, embedder=self.embedder())

    def embedder(self) -> Any:
        if self.settings.llm_provider == "openai":
            from missions.longterm.embeddings import OpenAIEmbedder

            return OpenAIEmbedder(api_key=self.openai_api_key(), base_url=self.settings.openai_base_url)
        from missions.longterm.embeddings import HashingEmbedder

        return HashingEmbedder()

    @cached_property
    def learnings(self) -> Any:
        from missions.store.learnings_dynamodb import DynamoLearningsStore

        return DynamoLearningsStore(self._table("learnings"), client=self.dynamodb)

    @cached_property
    def missions_by_capability(self) -> Any:
        from missions.store.missions_query import DynamoMissionsByCapability

        return DynamoMissionsByCapability(self.settings.missions_table, client=self.dynamodb)

    @cached_property
    def deliveries(self) -> Any:
        from missions.store.deliveries_dynamodb import DynamoDeliveryStore

        return DynamoDeliveryStore(self._table("deliveries"), client=self.dynamodb)

    @cached_property
    def webhook_sources(self) -> Any:
        """Webhook secrets: from settings locally, from Secrets Manager (cached) in AWS."""
        from missions import webhooks

        if self.settings.webhook_sources:
            return webhooks.StaticWebhookSources(
                {
                    name: webhooks.WebhookSource(name=name, **spec)
                    for name, spec in self.settings.webhook_sources.items()
                }
            )
        if self.settings.webhook_secrets_prefix:
            from missions.store.webhook_secrets import SecretsManagerWebhookSources

            return SecretsManagerWebhookSources(self.settings.webhook_secrets_prefix)
        return webhooks.StaticWebhookSources({})

    @cached_property
    def executions(self) -> StepFunctionsExecutions:
        return StepFunctionsExecutions(LazyClient(lambda: self.sfn))

    @cached_property
    def lifecycle(self) -> Lifecycle:
        return Lifecycle(self.missions)

    @cached_property
    def local_roots(self) -> Any:
        from missions.repositories.roots import AllowedRoots

        return AllowedRoots.of(self.settings.repo_roots)

    @cached_property
    def repositories(self) -> Any:
        """Checks what a mission request says about its repository (used before anything is stored)."""
        from missions.repositories.resolver import UserRepositories

        store = self.repository_store if self.settings.repositories_table else None
        return UserRepositories(self.local_roots, store)

    @cached_property
    def workspaces(self) -> Any:
        """Where stages read repositories: local roots, and snapshots unpacked into ephemeral storage."""
        from pathlib import Path

        from missions.repositories.workspace import RepositoryWorkspaces

        if not self.settings.snapshot_bucket:
            return RepositoryWorkspaces(self.local_roots, Path(self.settings.workspace_dir))
        from missions.repositories.archive import extract_snapshot

        return RepositoryWorkspaces(
            self.local_roots, Path(self.settings.workspace_dir), snapshots=self.snapshot_store, extract=extract_snapshot
        )

    @cached_property
    def repository_store(self) -> Any:
        from missions.store.repositories_dynamodb import DynamoRepositoryStore

        return DynamoRepositoryStore(self._table("repositories"), client=self.dynamodb)

    @cached_property
    def snapshot_store(self) -> Any:
        from missions.store.snapshots_s3 import S3SnapshotStore

        if not self.settings.snapshot_bucket:
            raise SettingsError("MISSIONS_SNAPSHOT_BUCKET is not set")
        return S3SnapshotStore(
            self.settings.snapshot_bucket, LazyClient(lambda: self.s3), presign_endpoint=lambda: self.upload_endpoint
        )

    @cached_property
    def repository_service(self) -> Any:
        from missions.repositories.service import RepositoryService, UrlPolicy
        from missions.store.eventbus import EventBridgeImportQueue

        if not self.settings.event_bus:
            raise SettingsError("MISSIONS_EVENT_BUS is not set")
        return RepositoryService(
            store=self.repository_store,
            snapshots=self.snapshot_store,
            imports=EventBridgeImportQueue(self.settings.event_bus, LazyClient(lambda: self.eventbridge)),
            urls=UrlPolicy(allow_local=self.settings.local_git_sources, roots=self.local_roots),
        )

    @cached_property
    def dispatcher(self) -> Any:
        from missions.dispatch import Dispatcher
        from missions.store.dispatch_dynamodb import DynamoDispatchStore

        store = DynamoDispatchStore(self._table("dispatch"), client=self.dynamodb)
        return Dispatcher(store, self.missions, start=self.service.start, limit=self.settings.concurrency_limit)

    @cached_property
    def service(self) -> Any:
        from missions.service import MissionService

        def arn(capability: str) -> str:
            try:
                return self.settings.state_machine_arns[capability]
            except KeyError:
                raise StageRequestError(f"no state machine is deployed for '{capability}'") from None

        return MissionService(self, arn)

    def feedback_llm(self) -> LLMProvider:
        if self.settings.llm_provider == "openai":
            return self.llm_for(None)  # type: ignore[arg-type]
        from missions.feedback import offline_preference_policy

        return ScriptedProvider(offline_preference_policy)

    # -- LLM ------------------------------------------------------------------------------

    def llm_for(self, capability: Capability | None) -> LLMProvider:
        if self._llm is not None:
            return self._llm
        if self.settings.llm_provider == "scripted":
            if capability is None:
                raise StageRequestError("the offline model answers only for a capability")
            return ScriptedProvider(capability.offline_policy)
        self._llm = self._openai()
        return self._llm

    def _openai(self) -> LLMProvider:
        from missions.llm.openai_provider import OpenAIProvider  # only LLM stages pay for openai

        return OpenAIProvider(
            api_key=self.openai_api_key(),
            base_url=self.settings.openai_base_url,
            models=self.settings.openai_models,
            default_model=self.settings.openai_default_model,
            fallback_model=self.settings.openai_fallback_model,
        )

    def openai_api_key(self) -> str:
        """The key from local settings, else from Secrets Manager (never from an environment variable in AWS)."""
        if self.settings.openai_api_key:
            return self.settings.openai_api_key.get_secret_value()
        if self.settings.openai_secret:
            return self._read_secret(self.settings.openai_secret)
        return "not-needed"  # a local OpenAI-compatible server (OPENAI_BASE_URL) may want none

    # -- handlers ---------------------------------------------------------------------------

    def runner(self, capability_name: str) -> StageRunner:
        allowed = self.settings.capability
        if allowed and capability_name != allowed:
            raise StageRequestError(f"this function serves '{allowed}', not '{capability_name}'")
        if capability_name not in self._runners:
            capability = registry.load(capability_name)
            services = StageServices(
                checkpoints=self.checkpoints,
                events=self.events,
                codec=self.codec,
                llm=self.llm_for,
                missions=self.missions,
                interrupts=self.interrupts,
                artifacts=LazyClient(lambda: self.artifacts) if self.settings.artifacts_table else None,
                on_timings=self._on_timings,
                workspaces=self.workspaces if capability.repository != "none" else None,
            )
            self._runners[capability_name] = StageRunner(capability, services)
        return self._runners[capability_name]

    def handle_stage(self, event: dict[str, Any]) -> dict[str, Any]:
        envelope = event.get("envelope")
        if not isinstance(envelope, dict) or not isinstance(envelope.get("capability"), str):
            raise StageRequestError("stage request without an envelope naming its capability")
        return self.runner(envelope["capability"]).handle(event)

    def handle_interrupt(self, event: dict[str, Any]) -> dict[str, Any]:
        record = record_interrupt(event, self.interrupts)
        # only now can an answer reach the execution: only now is the mission waiting for one
        try:
            self.lifecycle.waiting(record.mission_id, record.interrupt_id)
        except TransitionRefused:
            pass  # cancelled meanwhile: its execution is being stopped, the question will not be shown
        return {"interrupt_id": record.interrupt_id, "status": record.status}


class LazyClient:
    """Defers creating a client until first used (S3 is only needed for huge blobs)."""

    def __init__(self, factory: Any):
        self._factory = factory
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = self._factory()
        return getattr(self._client, name)


def _powertools_secret(secret_id: str) -> str:
    """Cached for five minutes per container, so a rotated key is picked up without a redeploy."""
    from aws_lambda_powertools.utilities.parameters import get_secret

    return str(get_secret(secret_id, max_age=300))


_RUNTIME: Runtime | None = None


def default_runtime() -> Runtime:
    """The process-wide runtime of a Lambda container, built on first invocation."""
    global _RUNTIME
    if _RUNTIME is None:
        from missions.settings import settings_from_env

        _RUNTIME = Runtime(settings_from_env())
    return _RUNTIME
