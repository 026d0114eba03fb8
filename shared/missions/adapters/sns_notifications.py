"""Notifications on an SNS topic: email subscriptions, each with a filter policy on its user's id."""

from __future__ import annotations

import json
from typing import Any

from missions.core.errors import DependencyUnavailable
from missions.core.notifications import Notice
from missions.ports.notifications import SubscriptionStatus


class SnsNotifications:
    def __init__(self, topic_arn: str, client: Any = None):
        self.topic_arn = topic_arn
        if client is None:
            import boto3

            client = boto3.client("sns")
        self._client = client

    def publish(self, notice: Notice) -> None:
        self._client.publish(
            TopicArn=self.topic_arn,
            Subject=notice.subject,
            Message=notice.text,
            MessageAttributes={
                "user_id": {"DataType": "String", "StringValue": notice.user_id},
                "kind": {"DataType": "String", "StringValue": notice.kind},
            },
        )

    def subscribe(self, user_id: str, email: str) -> str:
        try:
            found = self._client.subscribe(
                TopicArn=self.topic_arn,
                Protocol="email",
                Endpoint=email,
                Attributes={"FilterPolicy": json.dumps({"user_id": [user_id]})},
                ReturnSubscriptionArn=True,  # an id to ask about and remove, even before it is confirmed
            )
        except self._client.exceptions.ClientError as exc:
            raise DependencyUnavailable(f"the notification topic refused the subscription: {exc}") from exc
        return str(found["SubscriptionArn"])

    def status(self, subscription_id: str) -> SubscriptionStatus:
        try:
            attributes = self._client.get_subscription_attributes(SubscriptionArn=subscription_id)["Attributes"]
        except self._client.exceptions.NotFoundException:
            return "off"
        return "pending_confirmation" if attributes.get("PendingConfirmation") == "true" else "on"

    def unsubscribe(self, subscription_id: str) -> None:
        try:
            self._client.unsubscribe(SubscriptionArn=subscription_id)
        except self._client.exceptions.NotFoundException:
            pass  # gone already: what was asked for
