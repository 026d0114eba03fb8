"""The email notices users opt in to (missions.service.notifications): one topic, each subscription
filtered on its user's id, so nobody receives another user's notices."""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.config import EnvironmentConfig


class Notices(Construct):
    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=f"{config.prefix} missions",  # the sender's name in the email
            enforce_ssl=True,
            # encrypted at rest (notices carry goals and questions) with the key SNS manages: email
            # delivery needs no key policy of ours
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
        )
