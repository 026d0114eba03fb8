"""Per-environment settings from cdk.json's `environments` context, validated once at synth."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class ConfigError(ValueError):
    pass


LOCAL_CALLBACK = "http://localhost:8787/callback"  # the CLI's and the dev server's loopback (make dev's port)


class AuthConfig(BaseModel):
    """How the HTTP API knows the user: a JWT issuer (a Cognito user pool made here when none is
    given) or IAM signatures (the caller's principal is the user).

    The pool made here has a hosted sign-in domain (`domain_prefix`, default
    `<stack name>-<account id>`: prefixes are unique across all accounts of a region), a public
    client for people (authorization code flow with PKCE, redirected to `callback_urls`) and a
    client-credentials client for machines (scope `missions/api`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["jwt", "iam"] = "jwt"
    issuer: str | None = Field(None, pattern=r"^https://")
    audience: list[str] = Field(default_factory=list)
    domain_prefix: str | None = Field(None, pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
    callback_urls: list[str] = Field(default_factory=lambda: [LOCAL_CALLBACK], min_length=1)
    logout_urls: list[str] = Field(default_factory=lambda: ["http://localhost:8787/"])

    @model_validator(mode="after")
    def _issuer_needs_audience(self) -> AuthConfig:
        if self.type == "jwt" and self.issuer and not self.audience:
            raise ValueError("a JWT issuer needs at least one audience (the app client id)")
        return self

    @field_validator("domain_prefix")
    @classmethod
    def _prefix_cognito_accepts(cls, prefix: str | None) -> str | None:
        if prefix and any(word in prefix for word in ("aws", "amazon", "cognito")):
            raise ValueError("a Cognito domain prefix may not contain 'aws', 'amazon' or 'cognito'")
        return prefix

    @field_validator("callback_urls", "logout_urls")
    @classmethod
    def _redirects_cognito_accepts(cls, urls: list[str]) -> list[str]:
        for url in urls:
            loopback = url.startswith(("http://localhost", "http://127.0.0.1"))
            if not (url.startswith("https://") or loopback) or "#" in url:
                raise ValueError(f"{url!r}: Cognito redirects to https URLs (http only on localhost), no fragment")
        return urls


class ThrottleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rate_limit: float = Field(50, gt=0)  # steady requests per second across the API
    burst_limit: int = Field(100, gt=0)


class LLMConfig(BaseModel):
    """The model a deployment calls: provider, an OpenAI-compatible base URL, the default model, one per
    agent role, the fallback, and prices for models the runtime's list does not know. Every model named
    must have a price (listed or given here), or the synth fails: a dollar budget must always bind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["scripted", "openai", "bedrock", "anthropic"] = "openai"
    base_url: str | None = Field(None, pattern=r"^https?://")  # OpenAI-compatible or Anthropic endpoint
    # None: the runtime's default for the provider (missions.core.settings: <provider>_default_model)
    default_model: str | None = Field(None, min_length=1, max_length=128)
    models: dict[str, str] = Field(default_factory=dict)  # agent role -> model
    fallback_model: str | None = Field(None, min_length=1, max_length=128)
    prices: dict[str, tuple[float, float]] = Field(default_factory=dict)  # model -> USD per million in/out
    # bounded generations (missions.core.llm.limits); None: the runtime's defaults
    max_output_tokens: int | None = Field(None, ge=16, le=200_000)  # the ceiling of every call's output limit
    tokens_per_second: float | None = Field(None, gt=0)  # the throughput floor an attempt's time follows from
    first_token_seconds: float | None = Field(None, ge=1, le=900)
    repairs: int = Field(2, ge=0, le=5)  # times a stage asks again after an invalid answer (model_repairs)
    embeddings: Literal["provider", "local"] = "provider"  # local: an endpoint without /embeddings

    @model_validator(mode="after")
    def _every_model_is_priced(self) -> LLMConfig:
        from missions.core.cost.pricing import unpriced

        if self.provider != "scripted":
            missing = unpriced([self.model, self.fallback_model, *self.models.values()], self.prices)
            if missing:
                raise ValueError(
                    f"no price for model(s) {missing}: add them to llm.prices as [input, output] USD per million tokens"
                )
        if any(price < 0 for pair in self.prices.values() for price in pair):
            raise ValueError("a price in llm.prices is negative")
        return self

    @property
    def model(self) -> str:
        """The default model: the one named, else the runtime's default for the provider."""
        from missions.core.settings import RuntimeSettings

        named = "openai" if self.provider == "scripted" else self.provider
        default: str = RuntimeSettings.model_fields[f"{named}_default_model"].default
        return self.default_model or default

    def named_models(self) -> list[str]:
        """Every model this environment's functions may call (Bedrock: what their roles may invoke)."""
        return sorted({self.model, *self.models.values(), *([self.fallback_model] if self.fallback_model else [])})

    def settings(self) -> dict[str, Any]:
        """These as the runtime's settings (missions.core.settings.RuntimeSettings field names): the models go
        to the provider's own settings (`bedrock_default_model`, ...); prices are every provider's overrides."""
        named = "openai" if self.provider == "scripted" else self.provider
        values: dict[str, Any] = {
            "llm_provider": self.provider,
            f"{named}_default_model": self.model,
            f"{named}_models": self.models or None,
            f"{named}_fallback_model": self.fallback_model,
            "openai_prices": {model: list(price) for model, price in self.prices.items()} or None,
            "llm_max_output_tokens": self.max_output_tokens,
            "llm_tokens_per_second": self.tokens_per_second,
            "llm_first_token_seconds": self.first_token_seconds,
            "model_repairs": self.repairs,
            "embeddings": self.embeddings,
        }
        if named in ("openai", "anthropic"):
            values[f"{named}_base_url"] = self.base_url
        return values


class Connection(BaseModel):
    """What a capability's stages need to reach a service of the user's (home_assistant: their HA).

    `environment`: plain settings its functions get (HA_URL). `secrets`: for each setting naming a
    secret, the Secrets Manager secret's name (HA_TOKEN_SECRET: missions-dev/home-assistant-token): the
    function gets the name, and its role may read that secret, nothing else. Put the value after deploy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    environment: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(default_factory=dict)

    @field_validator("environment", "secrets")
    @classmethod
    def _names(cls, values: dict[str, str]) -> dict[str, str]:
        bad = [name for name in values if not re.fullmatch(r"[A-Z][A-Z0-9_]{0,63}", name)]
        if bad:
            raise ValueError(f"setting names are upper-case identifiers: {bad}")
        return values

    @field_validator("environment")
    @classmethod
    def _no_secret_in_plain_sight(cls, values: dict[str, str]) -> dict[str, str]:
        named = [name for name in values if re.search(r"(TOKEN|KEY|PASSWORD)$", name)]
        if named:
            raise ValueError(f"{named} look like credentials: put them in Secrets Manager and name them in `secrets`")
        return values


class EnvironmentConfig(BaseModel):
    """One deployable environment (dev, staging, prod)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{1,15}$")
    memory_mb: int = Field(256, ge=128, le=10_240)  # service functions; stages take theirs from the capability
    timeout_seconds: int = Field(30, ge=3, le=900)  # service functions
    log_retention_days: int = 30
    removal_policy: Literal["destroy", "retain"] = "retain"
    alarms: bool = True
    # subscribed to the alarm topic (AWS mails a confirmation link first); without it the topic has no
    # subscriber and synth warns: subscribe another endpoint to the stack's AlarmTopicArn output
    alarm_email: str | None = Field(None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    auth: AuthConfig = Field(default_factory=AuthConfig)
    # the web page (S3 + CloudFront, signed in through the stack's own user pool); off only where no
    # CloudFront exists (the deploy into moto, whose CloudFormation has none)
    dashboard: bool = True
    throttle: ThrottleConfig = Field(default_factory=ThrottleConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    architecture: Literal["arm64", "x86_64"] = "arm64"
    concurrency_limit: int = Field(3, ge=1, le=100)  # running missions per user
    # model dollars a user's missions may spend per UTC day (operators set a user's own: PUT /users/{id}/budget)
    daily_budget_usd: float | None = Field(None, ge=0, le=1_000_000)
    interrupt_sla_hours: int = Field(24, ge=1, le=24 * 30)  # an unanswered question past this alarms
    blob_expiry_days: int = Field(90, ge=1)  # offloaded envelope fields in the bucket
    deleted_snapshot_days: int = Field(30, ge=1)  # a deleted repository's snapshots are recoverable this long
    checkpoint_ttl_days: int | None = Field(None, ge=1)
    retention_completed_days: int = Field(30, ge=1)  # then archived to long-term memory
    retention_failed_days: int = Field(7, ge=1)
    sandbox_concurrency: int = Field(5, ge=1, le=100)  # reserved per sandbox tier: analysis scripts at once
    capabilities: list[str] | None = None  # None: every installed capability
    connections: dict[str, Connection] = Field(default_factory=dict)  # capability -> how it reaches a service
    # directories inside the functions whose repositories missions may read by path, e.g. an EFS
    # mount; empty (the default): missions read only repositories registered through the API
    repo_roots: list[str] = Field(default_factory=list)
    # tests of a deployed stack only: git imports from file URLs under repo_roots and loopback hosts
    local_git_sources: bool = False
    account: str | None = Field(None, pattern=r"^\d{12}$")
    region: str | None = None

    @field_validator("log_retention_days")
    @classmethod
    def _retention_is_a_cloudwatch_value(cls, days: int) -> int:
        if days not in LOG_RETENTION_DAYS:
            raise ValueError(f"CloudWatch Logs keeps logs for one of {sorted(LOG_RETENTION_DAYS)} days")
        return days

    @field_validator("repo_roots")
    @classmethod
    def _roots_are_not_the_system(cls, roots: list[str]) -> list[str]:
        for root in roots:
            parts = root.rstrip("/").split("/")
            if not root.startswith("/") or root.rstrip("/") == "" or parts[1] in ("proc", "sys", "dev", "var", "opt"):
                raise ValueError(
                    f"{root!r}: a repository root must be an absolute path outside /proc, /sys, "
                    "/dev, /var and /opt (the runtime, its code and credentials live there)"
                )
        return roots

    @property
    def prefix(self) -> str:
        return f"missions-{self.name}"


# the retentions CloudWatch Logs accepts, by their aws_logs.RetentionDays member names
LOG_RETENTION_DAYS = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


def load_environments(context: dict[str, Any]) -> dict[str, EnvironmentConfig]:
    """Every environment in cdk.json; a bad one fails synth with the environment and field named."""
    if not isinstance(context, dict) or not context:
        raise ConfigError("cdk.json context 'environments' must map environment names to settings")
    configs = {}
    for name, values in context.items():
        try:
            configs[name] = EnvironmentConfig.model_validate({"name": name, **(values or {})})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"cdk.json environments.{name}: {problems}") from exc
    return configs
