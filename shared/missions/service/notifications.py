"""Telling people when a mission needs them or finishes, if they opted in.

The opt-in (an email address and its subscription) is kept in the user's own memory (the `_users`
namespace, beside their profile), so it is theirs: listed, exported and erased with the rest. The
interrupt function tells a user their mission waits on them once the question can be answered; the
status function tells them it ended. Neither may fail because of a notice: a notice that could not
be sent is logged with its reason, and the mission goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from missions.core.errors import DependencyUnavailable, MissionRequestError
from missions.core.mission.status import MissionStatus
from missions.core.notifications import Notice, finished, needs_you, valid_email
from missions.ports.interrupts import InterruptRecord
from missions.ports.memory import LongTermMemory
from missions.ports.missions import MissionRecord
from missions.ports.notifications import Notifications
from missions.service.missions import USERS_NAMESPACE

KEY = "notifications"
log = logging.getLogger(__name__)


class NotificationRequestError(MissionRequestError):
    """An opt-in that cannot be taken (a malformed address): 422, nothing stored."""


class NotificationService:
    def __init__(self, notifications: Notifications | None, memory: LongTermMemory):
        self._notifications, self._memory = notifications, memory

    def _topic(self) -> Notifications:
        if self._notifications is None:
            raise DependencyUnavailable("notifications are not configured here (no notifications topic)")
        return self._notifications

    def _kept(self, user_id: str) -> dict[str, Any] | None:
        item = self._memory.get(user_id, USERS_NAMESPACE, KEY)
        return dict(item.value) if item is not None and isinstance(item.value, dict) else None

    def settings_of(self, user_id: str) -> dict[str, Any]:
        kept = self._kept(user_id)
        if kept is None:
            return {"email": None, "status": "off"}
        return {"email": kept["email"], "status": self._topic().status(kept["subscription"])}

    def opt_in(self, user_id: str, email: str) -> dict[str, Any]:
        """Subscribe the address (it is asked to confirm); a previous address is unsubscribed after."""
        email = email.strip()
        if not valid_email(email):
            raise NotificationRequestError(f"'{email[:80]}' is not an email address")
        topic, before = self._topic(), self._kept(user_id)
        if before is not None and before["email"] == email:
            return self.settings_of(user_id)
        subscription = topic.subscribe(user_id, email)
        self._memory.put(user_id, USERS_NAMESPACE, KEY, {"email": email, "subscription": subscription})
        if before is not None:
            topic.unsubscribe(before["subscription"])
        return {"email": email, "status": topic.status(subscription)}

    def opt_out(self, user_id: str) -> bool:
        kept = self._kept(user_id)
        if kept is None:
            return False
        self._topic().unsubscribe(kept["subscription"])
        self._memory.delete(user_id, USERS_NAMESPACE, KEY)
        return True

    # -- notices ------------------------------------------------------------------------------------

    def mission_waiting(self, record: MissionRecord, interrupt: InterruptRecord) -> None:
        self._send(record, lambda: needs_you(record.user_id, record.mission_id, record.goal, interrupt.question))

    def mission_ended(self, record: MissionRecord) -> None:
        if record.status not in (MissionStatus.COMPLETED, MissionStatus.FAILED):
            return  # a cancel was the user's own doing
        result = record.result or {}
        summary = result.get("answer") if isinstance(result.get("answer"), str) else record.terminal_reason
        self._send(record, lambda: finished(record.user_id, record.mission_id, record.goal, record.status, summary))

    def _send(self, record: MissionRecord, make: Callable[[], Notice]) -> None:
        if self._notifications is None:
            return
        user_id = record.user_id
        try:
            if self._kept(user_id) is None:
                return  # not opted in: nothing to publish
            self._notifications.publish(make())
        except Exception as exc:  # a notice must never fail the function that reports the mission's state
            log.warning("notice for %s not sent: %s: %s", user_id, type(exc).__name__, exc)
