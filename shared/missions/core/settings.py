"""Runtime settings: read from the environment once, validated, then passed around."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from missions.core.cost.pricing import unpriced
from missions.core.llm.limits import DEFAULT_FIRST_TOKEN_SECONDS, DEFAULT_MAX_TOKENS, DEFAULT_TOKENS_PER_SECOND
from missions.core.mission.offload import DEFAULT_THRESHOLD


class SettingsError(ValueError):
    pass


PREFIX = "MISSIONS_"
# read by the `missions` CLI as a client of a deployed API, never by the runtime
CLIENT_VARIABLES = frozenset(
    {
        "MISSIONS_DEBUG",
        "MISSIONS_API_URL",
        "MISSIONS_STREAM_URL",
        "MISSIONS_TOKEN",
        "MISSIONS_CLIENT_ID",
        "MISSIONS_CLIENT_SECRET",
        "MISSIONS_CONFIG_DIR",
    }
)
# the libraries' own switches in every function's environment (the CDK stack sets them; the bench's cold
# imports run under them): Powertools' namespace and level, and no scan for pydantic plugins (the runtime
# installs none, and the scan reads every installed distribution's entry points at the first model's
# build: about 7 ms of each cold start)
LIBRARY_ENVIRONMENT = {
    "POWERTOOLS_METRICS_NAMESPACE": "Missions",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    "PYDANTIC_DISABLE_PLUGINS": "__all__",
}
# the model SDK each provider's adapter imports at its first model call (missions.adapters.llm: Bedrock's is
# boto3, which Lambda's runtime has; the offline model needs none): a layer carries its environment's alone
PROVIDER_SDKS: dict[str, tuple[str, ...]] = {
    "scripted": (),
    "openai": ("openai",),
    "bedrock": (),
    "anthropic": ("anthropic",),
}
JSON_FIELDS = (
    "openai_models",
    "bedrock_models",
    "anthropic_models",
    "openai_prices",
    "state_machine_arns",
    "webhook_sources",
    "repo_roots",
    "operators",
    "sandbox_functions",
    "allowed_models",
)


class RuntimeSettings(BaseModel):
    """What a stage, interrupt or starter function needs to know about its environment."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    missions_table: str = Field(min_length=3)
    checkpoints_table: str = Field(min_length=3)
    events_table: str = Field(min_length=3)
    interrupts_table: str = Field(min_length=3)
    blob_bucket: str = Field(min_length=3)
    memory_table: str | None = None
    dispatch_table: str | None = None
    learnings_table: str | None = None
    deliveries_table: str | None = None
    artifacts_table: str | None = None
    repositories_table: str | None = None
    idempotency_table: str | None = None  # Idempotency-Key records of the HTTP API
    conversations_table: str | None = None  # conversations' working memories (missions.core.memory.conversation)
    agents_table: str | None = None  # agent configuration versions (missions.core.llm.agents)
    usage_table: str | None = None  # every model call (missions.core.cost.usage)
    schedules_table: str | None = None  # users' own schedules (missions.core.triggers.schedules)
    # users' schedules become EventBridge Scheduler schedules in this group, invoking the schedule function
    # (`schedule_target_arn`) as the scheduler's role, which may invoke only it; what it cannot deliver goes
    # to the function's dead-letter queue. Without a group, users cannot create schedules (503).
    schedule_group: str | None = Field(None, max_length=64)
    scheduler_role_arn: str | None = None
    schedule_target_arn: str | None = None
    schedule_dead_letter_arn: str | None = None
    schedules_per_user: int = Field(10, ge=1, le=1000)
    # no two of a schedule's next firings may be closer than this (missions.core.triggers.schedules.check_expression)
    schedule_min_interval_minutes: int = Field(15, ge=1, le=10080)
    snapshot_bucket: str | None = None  # repository snapshots and uploads
    # dev and tests only: git imports from file URLs under repo_roots and from loopback hosts
    local_git_sources: bool = False
    # dev and tests only: capabilities' MCP servers declared as a command run as child processes (stdio); in
    # Lambda they are refused with that reason (missions.service.mcp_tools)
    mcp_stdio: bool = False
    operators: list[str] = Field(default_factory=list, max_length=100)  # users who may share repositories
    event_bus: str | None = None
    notifications_topic: str | None = None  # SNS topic ARN of the email notices users opt in to
    concurrency_limit: int = Field(3, ge=1, le=100)  # running missions per user
    # model dollars all of a user's missions may spend per UTC day, unless an operator set theirs
    # (missions.core.cost.budget); None: no daily budget
    daily_budget_usd: float | None = Field(None, ge=0, le=1_000_000)
    state_machine_arns: dict[str, str] = Field(default_factory=dict)  # capability -> state machine ARN
    webhook_sources: dict[str, dict[str, Any]] = Field(default_factory=dict)  # local only: name -> secret, user_id
    webhook_secrets_prefix: str | None = None  # in AWS: Secrets Manager names <prefix>/<source>
    capability: str | None = None  # a stage function serves exactly one capability
    # the model provider of this environment; its models are the <provider>_* settings below, and every
    # provider's prices are `openai_prices` (the overrides of missions.core.cost.pricing, whatever the provider)
    llm_provider: Literal["scripted", "openai", "bedrock", "anthropic"] = "scripted"
    openai_api_key: SecretStr | None = None  # local use; in AWS the key is in Secrets Manager:
    openai_secret: str | None = None  # its secret id (name or ARN), read at first use and cached
    openai_base_url: str | None = None
    # stream an OpenAI(-compatible) model's answer onto the mission's events as it is written; off by
    # default: many compatible servers do not stream structured outputs (Bedrock and Anthropic always do)
    openai_stream: bool = False
    openai_default_model: str = "gpt-4o-mini"
    openai_fallback_model: str | None = None
    openai_models: dict[str, str] = Field(default_factory=dict)  # agent role -> model
    # Amazon Bedrock (Converse): model ids or inference profile ids; the function's role may invoke exactly these
    bedrock_region: str | None = None  # None: the function's own region
    bedrock_default_model: str = "amazon.nova-lite-v1:0"
    bedrock_fallback_model: str | None = None
    bedrock_models: dict[str, str] = Field(default_factory=dict)  # agent role -> model
    # Anthropic (Messages API): the key locally, its Secrets Manager secret in AWS (as OpenAI's)
    anthropic_api_key: SecretStr | None = None
    anthropic_secret: str | None = None
    anthropic_base_url: str | None = None
    anthropic_default_model: str = "claude-haiku-4-5"
    anthropic_fallback_model: str | None = None
    anthropic_models: dict[str, str] = Field(default_factory=dict)  # agent role -> model
    # the models a mission may name (POST /missions `model`), within each capability's own list; default: the
    # models this environment names (openai_default_model, openai_fallback_model, openai_models)
    allowed_models: list[str] = Field(default_factory=list, max_length=100)
    # how often a stage asks its model again when its answer is invalid (its schema, its citations, its tool
    # calls), showing it the answer and the errors; each time counts against max_llm_calls and max_cost_usd
    model_repairs: int = Field(2, ge=0, le=5)
    # what embeds text for memory search (the home_assistant catalogue, long-term memory): "provider" is the
    # OpenAI-compatible endpoint's /embeddings when the provider is openai (else local); "local" the offline
    # hashing embedder, for a model server without embeddings (llama.cpp's without --embeddings)
    embeddings: Literal["provider", "local"] = "provider"
    # how long a warm function keeps the active agent versions it read (a promotion reaches new missions within)
    agents_cache_seconds: float = Field(60.0, ge=0, le=3600)
    # bounded generations (missions.core.llm.limits): no model call asks for more output tokens than this
    # ceiling (an agent's or its role's limit is capped at it; a call that names none gets it); an attempt
    # may take llm_first_token_seconds plus its limit at llm_tokens_per_second, never past its stage's time
    llm_max_output_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=16, le=200_000)
    llm_tokens_per_second: float = Field(DEFAULT_TOKENS_PER_SECOND, gt=0, le=100_000)
    llm_first_token_seconds: float = Field(DEFAULT_FIRST_TOKEN_SECONDS, ge=1, le=900)
    # model -> (input, output) USD per million tokens, over the list in missions.core.cost.pricing
    openai_prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    offload_threshold: int = Field(DEFAULT_THRESHOLD, ge=4096, le=200_000)
    checkpoint_ttl_days: int | None = Field(None, ge=1)
    interrupt_sla_hours: int = Field(24, ge=1)  # a question unanswered for longer is reported overdue
    max_delegation_depth: int = Field(3, ge=0, le=10)  # sub-missions of sub-missions (missions.service.delegation)
    retention_completed_days: int = Field(30, ge=1)  # then archived to long-term memory
    retention_failed_days: int = Field(7, ge=1)
    # the dev server's short policy (`missions dev --retain-minutes`): every ended mission archived this many
    # minutes after it ended, instead of the days above, and its bulky items pruned (missions.service.retention)
    retention_minutes: float | None = Field(None, gt=0, le=525_600)
    # a start noted or claimed this long ago and not done was left by a process that died (longer
    # than any function runs: Lambda's ceiling is 900 s), so the reconciler finishes it
    reconcile_stale_after_seconds: int = Field(960, ge=1)
    # directories whose code missions may read by path (the dev server's --repo-root); none in AWS,
    # where a mission reads only repositories registered through the API
    repo_roots: list[str] = Field(default_factory=list, max_length=32)
    tracing: bool = False  # X-Ray through Powertools Tracer: its SDK costs ~0.4 s of cold start
    workspace_dir: str = "/tmp/missions/repositories"  # where snapshots are unpacked (ephemeral storage)
    # analysis scripts (missions.ports.sandbox): the sandbox function per tier in AWS, none to run them in a
    # local child process; a sandbox function itself names the one tier it serves
    sandbox_functions: dict[str, str] = Field(default_factory=dict)
    sandbox_tier: Literal["quick", "standard", "deep"] | None = None
    # how long GET /ready keeps its answer: a burst of probes asks the tables, bus and model once
    ready_cache_seconds: float = Field(10.0, ge=0, le=300)
    # the streaming routes (chat, event streams): how long a chat reply waits for its mission (a longer
    # one answers with its status), how often a follower reads the tables, how long one stream stays open
    # (a client reconnects with Last-Event-ID; a function URL's invocation ends at 900 s)
    chat_wait_seconds: float = Field(120.0, ge=1, le=840)
    stream_poll_seconds: float = Field(0.5, ge=0.05, le=10)
    stream_max_seconds: float = Field(840.0, ge=5, le=870)

    @model_validator(mode="after")
    def _every_model_is_priced(self) -> RuntimeSettings:
        """A model without a price would make every dollar budget meaningless: refused here, at start."""
        if self.llm_provider != "scripted":
            default, fallback, roles = self.provider_models()
            missing = unpriced([default, fallback, *roles.values()], self.openai_prices)
            if missing:
                raise ValueError(
                    f"no price for model(s) {missing}: give each in openai_prices as "
                    '{"<model>": [input, output]} in USD per million tokens'
                )
        missing = unpriced(self.allowed_models, self.openai_prices)
        if missing:
            raise ValueError(f"allowed_models: no price for model(s) {missing}: give each in openai_prices")
        for model, (price_in, price_out) in self.openai_prices.items():
            if price_in < 0 or price_out < 0:
                raise ValueError(f"the price of {model} is negative")
        return self

    def provider_models(self) -> tuple[str, str | None, dict[str, str]]:
        """The environment provider's default model, fallback and model per agent role (OpenAI's offline)."""
        if self.llm_provider == "bedrock":
            return self.bedrock_default_model, self.bedrock_fallback_model, self.bedrock_models
        if self.llm_provider == "anthropic":
            return self.anthropic_default_model, self.anthropic_fallback_model, self.anthropic_models
        return self.openai_default_model, self.openai_fallback_model, self.openai_models

    def mission_models(self) -> list[str]:
        """The models this environment lets a mission name (see `allowed_models`)."""
        if self.allowed_models:
            return list(self.allowed_models)
        default, fallback, roles = self.provider_models()
        return list(dict.fromkeys(model for model in [default, fallback, *roles.values()] if model))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RuntimeSettings:
        """Settings from MISSIONS_* variables (and OPENAI_API_KEY / OPENAI_BASE_URL / ANTHROPIC_API_KEY)."""
        env = os.environ if environ is None else environ
        named = {key: value for key, value in env.items() if key.startswith(PREFIX) and key not in CLIENT_VARIABLES}
        unknown = sorted(key for key in named if key[len(PREFIX) :].lower() not in cls.model_fields)
        if unknown:  # a misspelt setting would otherwise be ignored in silence
            raise SettingsError(f"unknown runtime settings {unknown}; see missions.core.settings.RuntimeSettings")
        values: dict[str, object] = {key[len(PREFIX) :].lower(): value for key, value in named.items()}
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
            if env.get(name):
                values.setdefault(name.lower(), env[name])
        import json

        for name in JSON_FIELDS:
            if isinstance(values.get(name), str):
                values[name] = json.loads(str(values[name]))
        if "llm_provider" not in values and (values.get("openai_api_key") or values.get("openai_base_url")):
            values["llm_provider"] = "openai"
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'MISSIONS_' + '_'.join(map(str, e['loc'])).upper() if e['loc'] else 'settings'}: {e['msg']}"
                for e in exc.errors()
            )
            raise SettingsError(f"invalid runtime settings: {problems}") from exc

    # -- the stream function (missions.app.streaming) -------------------------------------------------
    # Its function URL has no authorizer: the function verifies bearer tokens as the HTTP API's JWT
    # authorizer does, against this issuer (the user pool's, https://cognito-idp.<region>.amazonaws.com/
    # <pool id>, or auth.issuer) and these audiences (the pool's app client ids, or auth.audience).
    # MISSIONS_JWT_AUDIENCE is a JSON list or ids separated by commas (the stack joins CDK tokens so).
    jwt_issuer: str | None = Field(None, pattern=r"^https://")
    jwt_audience: list[str] = Field(default_factory=list, max_length=100)

    @model_validator(mode="before")
    @classmethod
    def _jwt_audience_listed(cls, values: Any) -> Any:
        text = values.get("jwt_audience") if isinstance(values, dict) else None
        if isinstance(text, str):
            if text.strip().startswith("["):
                import json

                return {**values, "jwt_audience": json.loads(text)}
            return {**values, "jwt_audience": [part.strip() for part in text.split(",") if part.strip()]}
        return values


def environment_of(**values: Any) -> dict[str, str]:
    """A function environment holding these settings, named exactly as `from_env` reads them.

    The CDK stack builds every function's environment with it, so a variable name is never typed
    by hand and an unknown setting fails the synth. Values may be CDK tokens (strings).
    """
    unknown = sorted(set(values) - set(RuntimeSettings.model_fields))
    if unknown:
        raise SettingsError(f"unknown runtime settings {unknown}")
    environment = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, dict | list | tuple) and name in JSON_FIELDS:
            import json

            text = json.dumps(value)
        else:
            text = str(value)
        environment[f"{PREFIX}{name.upper()}"] = text
    return environment


@lru_cache(maxsize=1)
def settings_from_env() -> RuntimeSettings:
    """Validated once per process (a Lambda container), on first use, never at import."""
    return RuntimeSettings.from_env()
