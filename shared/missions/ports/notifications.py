"""Where notices go (missions.core.notifications): a topic users subscribe to by email, each filtered to
their own notices."""

from __future__ import annotations

from typing import Literal, Protocol

from missions.core.notifications import Notice

SubscriptionStatus = Literal["pending_confirmation", "on", "off"]


class Notifications(Protocol):
    def publish(self, notice: Notice) -> None:
        """Send it to whoever of its user subscribed (nobody: it goes nowhere)."""

    def subscribe(self, user_id: str, email: str) -> str:
        """Subscribe the address to the user's notices; the subscription's id. The address confirms it."""

    def status(self, subscription_id: str) -> SubscriptionStatus: ...

    def unsubscribe(self, subscription_id: str) -> None: ...
