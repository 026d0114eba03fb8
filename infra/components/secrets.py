"""Secrets the functions read at run time through Powertools Parameters (cached), never via env vars."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.components.nag import acknowledge
from infra.components.storage import removal_policy
from infra.config import EnvironmentConfig


class Secrets(Construct):
    """`openai_key` (and `anthropic_key` where Anthropic is the provider: put the real keys after deploy) and the
    name prefix of webhook sources' secrets."""

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig) -> None:
        super().__init__(scope, id)
        self.openai_key_name = f"{config.prefix}/openai-api-key"
        self.openai_key = secretsmanager.Secret(
            self,
            "OpenAIKey",
            secret_name=self.openai_key_name,
            description="OpenAI API key for mission stages; set it with `aws secretsmanager put-secret-value`",
            removal_policy=removal_policy(config),
        )
        acknowledge(
            self.openai_key,
            "AwsSolutions-SMG4",
            "An OpenAI key is issued by OpenAI, not by AWS: there is no rotation Lambda that could mint one. "
            "Rotate it in OpenAI's console and put the new value.",
        )
        # Functions find the key by name and are granted it by name ("-??????" is the suffix Secrets Manager
        # appends), so nothing depends on the secret resource itself: it can be replaced or made by hand.
        self.openai_key_arn_pattern = self._arn(f"{self.openai_key_name}-??????")
        # Anthropic's key, made only for an environment whose provider is Anthropic
        self.anthropic_key_name: str | None = None
        self.anthropic_key_arn_pattern: str | None = None
        if config.llm.provider == "anthropic":
            self.anthropic_key_name = f"{config.prefix}/anthropic-api-key"
            anthropic_key = secretsmanager.Secret(
                self,
                "AnthropicKey",
                secret_name=self.anthropic_key_name,
                description="Anthropic API key for mission stages; set it with `aws secretsmanager put-secret-value`",
                removal_policy=removal_policy(config),
            )
            acknowledge(
                anthropic_key,
                "AwsSolutions-SMG4",
                "An Anthropic key is issued by Anthropic, not by AWS: there is no rotation Lambda that could mint "
                "one. Rotate it in Anthropic's console and put the new value.",
            )
            self.anthropic_key_arn_pattern = self._arn(f"{self.anthropic_key_name}-??????")
        # each webhook source is one secret: <prefix>/<source> = {"secret": "whsec_<base64>", "user_id": ...}
        self.webhook_prefix = f"{config.prefix}/webhooks"
        self.webhook_arn_pattern = self._arn(f"{self.webhook_prefix}/*")

    @property
    def model_key_arn_pattern(self) -> str:
        """The key the environment's model provider needs (Bedrock needs none: its role invokes the models)."""
        return self.anthropic_key_arn_pattern or self.openai_key_arn_pattern

    def _arn(self, name: str) -> str:
        return Stack.of(self).format_arn(
            service="secretsmanager", resource="secret", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
