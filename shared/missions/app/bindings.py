"""The runtime's ports bound to their adapters: AWS clients, tables, buckets, the bus, secrets, the
sandbox and the model providers (the half of the composition root below the services;
missions.app.runtime builds the services on it).

Clients are private and made on first use, so a cold start pays only for what its function touches
(the stage of a capability without a repository never creates an S3 client; a stage that calls no
model never imports openai). Tests and the local emulation pass their own clients. Nothing here reads
the environment or creates a client at import.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from missions.core.errors import StageRequestError
from missions.core.mission.offload import EnvelopeCodec
from missions.core.redaction import remember_secret
from missions.core.settings import SettingsError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
    from botocore.client import BaseClient
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from pydantic import SecretStr

    from missions.core.capability.registry import Capability
    from missions.core.llm.provider import LLMProvider
    from missions.core.settings import RuntimeSettings
    from missions.ports.agents import AgentStore, UsageStore
    from missions.ports.artifacts import ArtifactStore
    from missions.ports.bus import EventBus
    from missions.ports.checkpoints import CheckpointStore
    from missions.ports.conversations import ConversationStore
    from missions.ports.deployment import DeploymentReplies
    from missions.ports.dispatch import DispatchStore
    from missions.ports.events import EventStore
    from missions.ports.executions import Executions
    from missions.ports.flow import FlowRecords
    from missions.ports.interrupts import InterruptStore
    from missions.ports.learnings import LearningsStore
    from missions.ports.memory import Embedder, LongTermMemory
    from missions.ports.missions import MissionsByCapability, MissionStore
    from missions.ports.repositories import RepositoryStore, SnapshotStore
    from missions.ports.sandbox import Sandbox
    from missions.ports.secrets import SecretReader
    from missions.ports.webhooks import DeliveryStore, WebhookSources
    from missions.service.mcp_tools import McpTools


class Bindings:
    def __init__(
        self,
        settings: RuntimeSettings,
        *,
        clients: dict[str, Any] | None = None,
        llm: LLMProvider | None = None,
        secrets: SecretReader | None = None,
        deployment_replies: DeploymentReplies | None = None,
    ):
        """`clients`: boto3 clients by service name ("dynamodb", "s3", "stepfunctions", "events") for
        tests and the emulation; `llm`: one provider for every stage (tests, a local model server)."""
        self.settings = settings
        self._clients: dict[str, Any] = dict(clients or {})
        self._llm = llm
        self._secrets = secrets
        self._deployment_replies = deployment_replies
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
    def embedder(self) -> Embedder:
        if self.settings.llm_provider == "openai" and self.settings.embeddings == "provider":
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
    def flow_records(self) -> FlowRecords:
        """Triggers' decisions and throttle windows (missions.service.flow.triggers), beside the dispatcher's."""
        from missions.adapters.dynamodb.flow import DynamoFlowRecords

        return DynamoFlowRecords(self._table("dispatch"), client=self._client("dynamodb"))

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
    def mcp_tools(self) -> McpTools:
        """Capabilities' MCP servers (missions.service.mcp_tools): one live session per server, opened on the
        first call; stdio servers only where the settings allow them (the dev server, tests)."""
        from missions.adapters.mcp_client import McpSessions
        from missions.service.mcp_tools import McpTools

        return McpTools(
            McpSessions(), secrets=lambda name: self.secrets.read(name), allow_stdio=self.settings.mcp_stdio
        )

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

    @property
    def deployment_replies(self) -> DeploymentReplies:
        if self._deployment_replies is None:
            from missions.adapters.cloudformation import HttpDeploymentReplies

            self._deployment_replies = HttpDeploymentReplies()
        return self._deployment_replies

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
            from missions.core.cost.pricing import price_of

            return ScriptedProvider(capability.offline_policy, price_of("scripted", self.settings.openai_prices))
        return self._model

    def feedback_llm(self) -> LLMProvider:
        """Reads preferences out of feedback text: the model, or offline the rules of core.preferences."""
        if self._llm is not None or self.settings.llm_provider != "scripted":
            return self._llm or self._model
        from missions.adapters.llm.scripted import ScriptedProvider
        from missions.core.memory.preferences import offline_preference_policy

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
            "max_tokens": self.settings.llm_max_output_tokens,
            "tokens_per_second": self.settings.llm_tokens_per_second,
            "first_token_seconds": self.settings.llm_first_token_seconds,
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


class _LazyClient:
    """Makes its client when an attribute is first asked for (S3 is only needed for huge blobs)."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = self._factory()
        return getattr(self._client, name)


__all__ = ["Bindings"]
