"""The SNS adapter of notifications on moto, held to the in-memory reference: a subscription per address
filtered on its user, its status, and notices that reach only their user's subscribers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from missions.adapters.sns_notifications import SnsNotifications
from missions.core.notifications import needs_you


@pytest.fixture()
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        sns, sqs = boto3.client("sns", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
        topic = sns.create_topic(Name="missions-notifications")["TopicArn"]
        yield {"sns": sns, "sqs": sqs, "topic": topic}


def test_a_subscription_filters_on_its_user_and_can_be_removed(aws: dict[str, Any]):
    notifications = SnsNotifications(aws["topic"], aws["sns"])
    subscription = notifications.subscribe("ann", "ann@example.org")
    attributes = aws["sns"].get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]
    assert json.loads(attributes["FilterPolicy"]) == {"user_id": ["ann"]} and attributes["Protocol"] == "email"
    assert notifications.status(subscription) in ("pending_confirmation", "on")
    notifications.unsubscribe(subscription)
    notifications.unsubscribe(subscription)  # gone already: nothing to do
    assert notifications.status(subscription) == "off"


def test_a_notice_reaches_only_its_users_subscribers(aws: dict[str, Any]):
    # Given a queue subscribed with the filter the adapter gives ann's addresses
    queue = aws["sqs"].create_queue(QueueName="ann")["QueueUrl"]
    queue_arn = aws["sqs"].get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws["sns"].subscribe(
        TopicArn=aws["topic"],
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"FilterPolicy": json.dumps({"user_id": ["ann"]}), "RawMessageDelivery": "true"},
    )
    notifications = SnsNotifications(aws["topic"], aws["sns"])
    # When notices for ann and for bo are published
    notifications.publish(needs_you("ann", "m1", "plan a trip", "Which city?"))
    notifications.publish(needs_you("bo", "m2", "fix the bug", "Which file?"))
    # Then only ann's arrives
    messages = aws["sqs"].receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in messages] == [needs_you("ann", "m1", "plan a trip", "Which city?").text]
