"""Notifications kept in memory (tests, and the reference for the SNS adapter): what was sent to whom."""

from __future__ import annotations

import itertools

from missions.core.notifications import Notice
from missions.ports.notifications import SubscriptionStatus


class InMemoryNotifications:
    def __init__(self) -> None:
        self.subscriptions: dict[str, tuple[str, str, SubscriptionStatus]] = {}  # id -> user, email, status
        self.sent: list[tuple[str, Notice]] = []  # (email, notice) as delivered
        self._ids = itertools.count(1)

    def publish(self, notice: Notice) -> None:
        for user, email, status in self.subscriptions.values():
            if user == notice.user_id and status == "on":
                self.sent.append((email, notice))

    def subscribe(self, user_id: str, email: str) -> str:
        subscription = f"sub-{next(self._ids)}"
        self.subscriptions[subscription] = (user_id, email, "pending_confirmation")
        return subscription

    def confirm(self, subscription_id: str) -> None:
        """What the address's owner does by following the link in the confirmation email."""
        user, email, _ = self.subscriptions[subscription_id]
        self.subscriptions[subscription_id] = (user, email, "on")

    def status(self, subscription_id: str) -> SubscriptionStatus:
        found = self.subscriptions.get(subscription_id)
        return found[2] if found else "off"

    def unsubscribe(self, subscription_id: str) -> None:
        self.subscriptions.pop(subscription_id, None)
